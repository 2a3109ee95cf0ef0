// SPDX-License-Identifier: GPL-2.0
/* ROCm's HSA runtime, found at run time (see hsa_api.h). */
#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hsa_api.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define KIT_HSA_SYMBOL(f) { #f, offsetof(struct kit_hsa, f) }

struct kit_hsa hsa;

/* Where dlsym()'s answer for each function goes in struct kit_hsa. */
static const struct {
	const char *name;
	size_t offset;
} symbols[] = {
	KIT_HSA_SYMBOL(hsa_init),
	KIT_HSA_SYMBOL(hsa_shut_down),
	KIT_HSA_SYMBOL(hsa_status_string),
	KIT_HSA_SYMBOL(hsa_iterate_agents),
	KIT_HSA_SYMBOL(hsa_agent_get_info),
	KIT_HSA_SYMBOL(hsa_amd_agent_iterate_memory_pools),
	KIT_HSA_SYMBOL(hsa_amd_memory_pool_get_info),
	KIT_HSA_SYMBOL(hsa_amd_memory_pool_allocate),
	KIT_HSA_SYMBOL(hsa_amd_memory_pool_free),
	KIT_HSA_SYMBOL(hsa_amd_agents_allow_access),
	KIT_HSA_SYMBOL(hsa_queue_create),
	KIT_HSA_SYMBOL(hsa_queue_destroy),
	KIT_HSA_SYMBOL(hsa_queue_add_write_index_relaxed),
	KIT_HSA_SYMBOL(hsa_queue_load_read_index_relaxed),
	KIT_HSA_SYMBOL(hsa_signal_create),
	KIT_HSA_SYMBOL(hsa_signal_destroy),
	KIT_HSA_SYMBOL(hsa_signal_store_relaxed),
	KIT_HSA_SYMBOL(hsa_signal_load_relaxed),
	KIT_HSA_SYMBOL(hsa_signal_wait_scacquire),
	KIT_HSA_SYMBOL(hsa_code_object_reader_create_from_memory),
	KIT_HSA_SYMBOL(hsa_code_object_reader_destroy),
	KIT_HSA_SYMBOL(hsa_executable_create_alt),
	KIT_HSA_SYMBOL(hsa_executable_load_agent_code_object),
	KIT_HSA_SYMBOL(hsa_executable_freeze),
	KIT_HSA_SYMBOL(hsa_executable_get_symbol_by_name),
	KIT_HSA_SYMBOL(hsa_executable_symbol_get_info),
	KIT_HSA_SYMBOL(hsa_executable_destroy),
	KIT_HSA_SYMBOL(hsa_amd_queue_cu_set_mask),
	KIT_HSA_SYMBOL(hsa_amd_queue_set_priority),
};

const char *kit_hsa_load(void)
{
	static const char *const names[] = {
		"libhsa-runtime64.so.1", "/opt/rocm/lib/libhsa-runtime64.so.1",
	};
	static char why[256];
	const char *env = getenv("KFDP_HSA_LIB");
	size_t i;

	if (hsa.lib)
		return NULL;
	if (env)
		hsa.lib = dlopen(env, RTLD_NOW | RTLD_LOCAL);
	for (i = 0; !env && !hsa.lib && i < ARRAY_SIZE(names); i++)
		hsa.lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
	if (!hsa.lib) {
		snprintf(why, sizeof(why),
			 "no HSA runtime (libhsa-runtime64.so.1; install ROCm or set KFDP_HSA_LIB): %s",
			 dlerror());
		return why;
	}
	for (i = 0; i < ARRAY_SIZE(symbols); i++) {
		void *f = dlsym(hsa.lib, symbols[i].name);

		if (!f) {
			snprintf(why, sizeof(why), "the HSA runtime lacks %s: too old",
				 symbols[i].name);
			dlclose(hsa.lib);
			hsa.lib = NULL;
			return why;
		}
		memcpy((char *)&hsa + symbols[i].offset, &f, sizeof(f));
	}
	return NULL;
}

const char *kit_hsa_err(hsa_status_t s)
{
	const char *text = NULL;

	if (!hsa.hsa_status_string || hsa.hsa_status_string(s, &text) != HSA_STATUS_SUCCESS || !text)
		return "unknown HSA status";
	return text;
}
