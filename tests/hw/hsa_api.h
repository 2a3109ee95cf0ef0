/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ROCm's HSA runtime, found at run time. The kit is built against the HSA
 * headers (Debian's libhsa-runtime-dev) but never links the runtime, so
 * that it builds and runs, skipping with a reason, on hosts without one.
 */
#ifndef KIT_HSA_API_H
#define KIT_HSA_API_H

#include <hsa/hsa.h>
#include <hsa/hsa_ext_amd.h>

/* Every runtime function the kit calls. */
#define KIT_HSA_FUNCS(X)						\
	X(hsa_init) X(hsa_shut_down) X(hsa_status_string)		\
	X(hsa_iterate_agents) X(hsa_agent_get_info)			\
	X(hsa_amd_agent_iterate_memory_pools)				\
	X(hsa_amd_memory_pool_get_info) X(hsa_amd_memory_pool_allocate)	\
	X(hsa_amd_memory_pool_free) X(hsa_amd_agents_allow_access)	\
	X(hsa_queue_create) X(hsa_queue_destroy)			\
	X(hsa_queue_add_write_index_relaxed)				\
	X(hsa_queue_load_read_index_relaxed)				\
	X(hsa_signal_create) X(hsa_signal_destroy)			\
	X(hsa_signal_store_relaxed) X(hsa_signal_load_relaxed)		\
	X(hsa_signal_wait_scacquire)					\
	X(hsa_code_object_reader_create_from_memory)			\
	X(hsa_code_object_reader_destroy) X(hsa_executable_create_alt)	\
	X(hsa_executable_load_agent_code_object)			\
	X(hsa_executable_freeze) X(hsa_executable_get_symbol_by_name)	\
	X(hsa_executable_symbol_get_info) X(hsa_executable_destroy)	\
	X(hsa_amd_queue_cu_set_mask) X(hsa_amd_queue_set_priority)

struct kit_hsa {
	void *lib;
#define KIT_HSA_MEMBER(f) __typeof__(f) *f;
	KIT_HSA_FUNCS(KIT_HSA_MEMBER)
#undef KIT_HSA_MEMBER
};

extern struct kit_hsa hsa;

/*
 * Loads the runtime (KFDP_HSA_LIB, else libhsa-runtime64.so.1 on the
 * loader's path, else ROCm's /opt/rocm/lib). Returns NULL, or why the
 * runtime cannot be used here.
 */
const char *kit_hsa_load(void);

/* The runtime's text for a status. */
const char *kit_hsa_err(hsa_status_t s);

#endif /* KIT_HSA_API_H */
