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

/* Every runtime function the kit calls (hsa_api.c lists them too). */
struct kit_hsa {
	void *lib;
	__typeof__(hsa_init) *hsa_init;
	__typeof__(hsa_shut_down) *hsa_shut_down;
	__typeof__(hsa_status_string) *hsa_status_string;
	__typeof__(hsa_iterate_agents) *hsa_iterate_agents;
	__typeof__(hsa_agent_get_info) *hsa_agent_get_info;
	__typeof__(hsa_amd_agent_iterate_memory_pools) *hsa_amd_agent_iterate_memory_pools;
	__typeof__(hsa_amd_memory_pool_get_info) *hsa_amd_memory_pool_get_info;
	__typeof__(hsa_amd_memory_pool_allocate) *hsa_amd_memory_pool_allocate;
	__typeof__(hsa_amd_memory_pool_free) *hsa_amd_memory_pool_free;
	__typeof__(hsa_amd_agents_allow_access) *hsa_amd_agents_allow_access;
	__typeof__(hsa_queue_create) *hsa_queue_create;
	__typeof__(hsa_queue_destroy) *hsa_queue_destroy;
	__typeof__(hsa_queue_add_write_index_relaxed) *hsa_queue_add_write_index_relaxed;
	__typeof__(hsa_queue_load_read_index_relaxed) *hsa_queue_load_read_index_relaxed;
	__typeof__(hsa_signal_create) *hsa_signal_create;
	__typeof__(hsa_signal_destroy) *hsa_signal_destroy;
	__typeof__(hsa_signal_store_relaxed) *hsa_signal_store_relaxed;
	__typeof__(hsa_signal_load_relaxed) *hsa_signal_load_relaxed;
	__typeof__(hsa_signal_wait_scacquire) *hsa_signal_wait_scacquire;
	__typeof__(hsa_code_object_reader_create_from_memory) *hsa_code_object_reader_create_from_memory;
	__typeof__(hsa_code_object_reader_destroy) *hsa_code_object_reader_destroy;
	__typeof__(hsa_executable_create_alt) *hsa_executable_create_alt;
	__typeof__(hsa_executable_load_agent_code_object) *hsa_executable_load_agent_code_object;
	__typeof__(hsa_executable_freeze) *hsa_executable_freeze;
	__typeof__(hsa_executable_get_symbol_by_name) *hsa_executable_get_symbol_by_name;
	__typeof__(hsa_executable_symbol_get_info) *hsa_executable_symbol_get_info;
	__typeof__(hsa_executable_destroy) *hsa_executable_destroy;
	__typeof__(hsa_amd_queue_cu_set_mask) *hsa_amd_queue_cu_set_mask;
	__typeof__(hsa_amd_queue_set_priority) *hsa_amd_queue_set_priority;
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
