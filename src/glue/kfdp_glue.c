// SPDX-License-Identifier: GPL-2.0
/*
 * kfd_preempt glue: rights, and the facts about amdkfd and amdgpu.ko the
 * rest of the glue relies on (Documentation/design.rst).
 */

#include <linux/capability.h>
#include <linux/fs.h>
#include <linux/user_namespace.h>

#include "kfdp_glue_priv.h"
#include "kfdp_amdgpu_id.h"
#include "kfdp_amdkfd_fp.h"

/*
 * Facts about amdkfd the glue relies on. They are checked against the
 * headers of the amdgpu source the module is built against (AMDGPU_SRC), so
 * that building against another amdkfd fails here instead of misbehaving at
 * run time.
 */
static_assert(KFD_CONTEXT_ID_PRIMARY == 0xFFFF,
	      "secondary-context check assumes the 7.x primary context id");
static_assert(KFD_MAX_NUM_OF_QUEUES_PER_PROCESS == 1024,
	      "queue ids are validated against 1024 per process");

bool kfdp_file_may_preempt(const struct file *file)
{
	return file_ns_capable(file, &init_user_ns, CAP_SYS_NICE);
}

/* PID attach bypasses the ptrace checks of pidfd_getfd(2): admin only. */
bool kfdp_capable_sys_admin(void)
{
	return capable(CAP_SYS_ADMIN);
}

/* Recorded by Kbuild from the amdgpu.ko built from AMDGPU_SRC; "" if none. */
const char *kfdp_amdgpu_built_srcversion(void)
{
	return KFDP_AMDGPU_SRCVERSION;
}

/*
 * The amdkfd definitions that differ from the reviewed ones, when the
 * operator built with KFDP_ALLOW_UNREVIEWED_AMDKFD=1; "" normally.
 */
const char *kfdp_amdkfd_unreviewed(void)
{
	return KFDP_AMDKFD_UNREVIEWED;
}

/*
 * Linux 7.2's MiscDeviceRegistration leaves file_operations.owner NULL, so
 * an open file does not pin the module as it does from 7.3 on: there the
 * crate pins it by hand from open to release (src/compat.rs).
 */
bool kfdp_module_get(void)
{
	return try_module_get(THIS_MODULE);
}

void kfdp_module_put(void)
{
	module_put(THIS_MODULE);
}

/*
 * srcversion is an extra check where both sides have one; distribution
 * kernels build amdgpu without (no CONFIG_MODULE_SRCVERSION_ALL, no
 * MODULE_VERSION), and then the structural checks decide alone.
 */
bool kfdp_srcversion_accepts(const char *running, const char *built)
{
	if (!running || !*running || !built || !*built)
		return true;
	return !strcmp(running, built);
}
