// SPDX-License-Identifier: GPL-2.0
/*
 * kfdp_amdkfd_emu: the module around amdkfd's queue manager, the emulated
 * HWS and kfd_preempt's glue. Its KUnit suites (emu_glue_test.c) run at
 * insmod; the module itself does nothing else.
 */

#include <linux/module.h>

#include "emu.h"

static int __init emu_init(void)
{
	return 0;
}

static void __exit emu_exit(void)
{
	emu_cov_report();
	emu_mem_cleanup();
}

module_init(emu_init);
module_exit(emu_exit);
MODULE_DESCRIPTION("kfd_preempt test: amdkfd's queue manager behind an emulated HWS");
MODULE_LICENSE("GPL");
/* mm_alloc(): a KFD process needs an mm of its own (emu_node.c). */
MODULE_IMPORT_NS("EXPORTED_FOR_KUNIT_TESTING");
