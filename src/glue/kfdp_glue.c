// SPDX-License-Identifier: GPL-2.0
/*
 * kfd_preempt glue: capability checks and, later, everything that must see
 * amdkfd's private structures (Documentation/design.rst).
 */

#include <linux/capability.h>
#include <linux/fs.h>
#include <linux/user_namespace.h>

#include "kfd_priv.h"

#include "kfdp_glue.h"

/*
 * Facts about amdkfd the glue relies on (Documentation/design.rst). They are
 * checked against the headers of the amdgpu source the module is built
 * against (AMDGPU_SRC), so that building against another amdkfd fails here
 * instead of misbehaving at run time.
 */
static_assert(KFD_CONTEXT_ID_PRIMARY == 0xFFFF,
	      "secondary-context check assumes the 7.x primary context id");
static_assert(KFD_MAX_NUM_OF_QUEUES_PER_PROCESS == 1024,
	      "queue ids are validated against 1024 per process");

bool kfdp_file_may_preempt(const struct file *file)
{
	return file_ns_capable(file, &init_user_ns, CAP_SYS_NICE);
}
