// SPDX-License-Identifier: GPL-2.0
/* ROCm's HSA runtime, found at run time (see hsa_api.h). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include "hsa_api.h"

struct kit_hsa hsa;

const char *kit_hsa_load(void)
{
	static const char *const names[] = {
		"libhsa-runtime64.so.1", "/opt/rocm/lib/libhsa-runtime64.so.1",
	};
	static char why[256];
	const char *env = getenv("KFDP_HSA_LIB");
	unsigned int i;

	if (hsa.lib)
		return NULL;
	if (env)
		hsa.lib = dlopen(env, RTLD_NOW | RTLD_LOCAL);
	for (i = 0; !env && !hsa.lib && i < sizeof(names) / sizeof(names[0]); i++)
		hsa.lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
	if (!hsa.lib) {
		snprintf(why, sizeof(why),
			 "no HSA runtime (libhsa-runtime64.so.1; install ROCm or set KFDP_HSA_LIB): %s",
			 dlerror());
		return why;
	}
#define KIT_HSA_RESOLVE(f)						\
	do {								\
		*(void **)&hsa.f = dlsym(hsa.lib, #f);			\
		if (!hsa.f) {						\
			snprintf(why, sizeof(why),			\
				 "the HSA runtime lacks %s: too old", #f); \
			dlclose(hsa.lib);				\
			hsa.lib = NULL;					\
			return why;					\
		}							\
	} while (0);
	KIT_HSA_FUNCS(KIT_HSA_RESOLVE)
#undef KIT_HSA_RESOLVE
	return NULL;
}

const char *kit_hsa_err(hsa_status_t s)
{
	const char *text = NULL;

	if (!hsa.hsa_status_string || hsa.hsa_status_string(s, &text) != HSA_STATUS_SUCCESS || !text)
		return "unknown HSA status";
	return text;
}
