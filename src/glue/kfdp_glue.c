// SPDX-License-Identifier: GPL-2.0
/*
 * kfd_preempt glue: capability checks and, later, everything that must see
 * amdkfd's private structures (Documentation/design.rst).
 */

#include <linux/capability.h>
#include <linux/fs.h>
#include <linux/user_namespace.h>

#include "kfdp_glue.h"

bool kfdp_file_may_preempt(const struct file *file)
{
	return file_ns_capable(file, &init_user_ns, CAP_SYS_NICE);
}
