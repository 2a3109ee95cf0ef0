/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Input for bindgen only: the uapi header's structs and constants, plus its
 * ioctl numbers as enumerators so that clang evaluates the _IO* macros and
 * src/uapi.rs can compare them with the numbers the crate computes.
 */
#include <linux/kfd_preempt.h>

enum {
	KFDP_CHECK_IOC_INFO = KFDP_IOC_INFO,
	KFDP_CHECK_IOC_ATTACH = KFDP_IOC_ATTACH,
	KFDP_CHECK_IOC_DETACH = KFDP_IOC_DETACH,
	KFDP_CHECK_IOC_QUERY = KFDP_IOC_QUERY,
	KFDP_CHECK_IOC_PREEMPT = KFDP_IOC_PREEMPT,
	KFDP_CHECK_IOC_RESUME = KFDP_IOC_RESUME,
	KFDP_CHECK_IOC_FREEZE = KFDP_IOC_FREEZE,
	KFDP_CHECK_IOC_THAW = KFDP_IOC_THAW,
	KFDP_CHECK_SIM_IOC_CREATE_QUEUE = KFDP_SIM_IOC_CREATE_QUEUE,
	KFDP_CHECK_SIM_IOC_DESTROY_QUEUE = KFDP_SIM_IOC_DESTROY_QUEUE,
	KFDP_CHECK_SIM_IOC_QUEUE_STATUS = KFDP_SIM_IOC_QUEUE_STATUS,
};
