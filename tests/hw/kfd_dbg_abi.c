// SPDX-License-Identifier: GPL-2.0
/*
 * The numbers userspace/kfdp-scenario/src/debugger.rs uses for amdkfd's
 * debugger ioctl, checked against Linux's own uapi header at build time
 * (scripts/build-hw-kit.sh compiles this with -fsyntax-only).
 */
#include <stddef.h>
#include <linux/kfd_ioctl.h>

_Static_assert(sizeof(struct kfd_ioctl_dbg_trap_args) == 32, "DbgTrapArgs size");
_Static_assert(offsetof(struct kfd_ioctl_dbg_trap_args, enable) == 8, "union offset");
_Static_assert(AMDKFD_IOC_DBG_TRAP == 0xc0204b26, "AMDKFD_IOC_DBG_TRAP");
_Static_assert(KFD_IOC_DBG_TRAP_ENABLE == 0 && KFD_IOC_DBG_TRAP_DISABLE == 1, "ops");
_Static_assert(KFD_IOC_DBG_TRAP_SUSPEND_QUEUES == 6 && KFD_IOC_DBG_TRAP_RESUME_QUEUES == 7,
	       "ops");
_Static_assert(KFD_IOC_DBG_TRAP_GET_QUEUE_SNAPSHOT == 13, "ops");
_Static_assert(KFD_EC_MASK(EC_QUEUE_NEW) == 1ULL << 30, "EC_QUEUE_NEW");
_Static_assert(KFD_DBG_QUEUE_ERROR_MASK == 1u << 30 && KFD_DBG_QUEUE_INVALID_MASK == 1u << 31,
	       "per-queue error bits");
/* enable: exception_mask, rinfo_ptr, then rinfo_size and dbg_fd sharing a word */
_Static_assert(offsetof(struct kfd_ioctl_dbg_trap_enable_args, rinfo_size) == 16 &&
	       offsetof(struct kfd_ioctl_dbg_trap_enable_args, dbg_fd) == 20, "enable");
_Static_assert(offsetof(struct kfd_ioctl_dbg_trap_suspend_queues_args, queue_array_ptr) == 8 &&
	       offsetof(struct kfd_ioctl_dbg_trap_suspend_queues_args, num_queues) == 16 &&
	       offsetof(struct kfd_ioctl_dbg_trap_suspend_queues_args, grace_period) == 20,
	       "suspend");
_Static_assert(offsetof(struct kfd_ioctl_dbg_trap_resume_queues_args, queue_array_ptr) == 0 &&
	       offsetof(struct kfd_ioctl_dbg_trap_resume_queues_args, num_queues) == 8, "resume");
_Static_assert(offsetof(struct kfd_ioctl_dbg_trap_queue_snapshot_args, snapshot_buf_ptr) == 8 &&
	       offsetof(struct kfd_ioctl_dbg_trap_queue_snapshot_args, num_queues) == 16 &&
	       offsetof(struct kfd_ioctl_dbg_trap_queue_snapshot_args, entry_size) == 20,
	       "snapshot");
_Static_assert(sizeof(struct kfd_runtime_info) == 16, "runtime info");
_Static_assert(sizeof(struct kfd_queue_snapshot_entry) <= 128, "snapshot entry room");
