// SPDX-License-Identifier: GPL-2.0
/* A GPU driven through ROCm's HSA runtime (see gpu.h). */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gpu.h"

#define KIT_MAX_FDS 4096

struct agent_pick {
	int want, seen;
	hsa_agent_t agent;
	int found;
};

static hsa_status_t pick_gpu(hsa_agent_t agent, void *data)
{
	struct agent_pick *p = data;
	hsa_device_type_t type;

	if (hsa.hsa_agent_get_info(agent, HSA_AGENT_INFO_DEVICE, &type) != HSA_STATUS_SUCCESS ||
	    type != HSA_DEVICE_TYPE_GPU)
		return HSA_STATUS_SUCCESS;
	if (p->seen++ == p->want) {
		p->agent = agent;
		p->found = 1;
		return HSA_STATUS_INFO_BREAK;
	}
	return HSA_STATUS_SUCCESS;
}

/* The system pools: fine-grained host memory and kernel arguments. */
static hsa_status_t pick_pools(hsa_amd_memory_pool_t pool, void *data)
{
	struct kit_gpu *g = data;
	hsa_amd_segment_t segment;
	uint32_t flags;

	if (hsa.hsa_amd_memory_pool_get_info(pool, HSA_AMD_MEMORY_POOL_INFO_SEGMENT,
					     &segment) != HSA_STATUS_SUCCESS ||
	    segment != HSA_AMD_SEGMENT_GLOBAL ||
	    hsa.hsa_amd_memory_pool_get_info(pool, HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS,
					     &flags) != HSA_STATUS_SUCCESS)
		return HSA_STATUS_SUCCESS;
	if ((flags & HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_KERNARG_INIT) && !g->have_kernarg_pool) {
		g->kernarg_pool = pool;
		g->have_kernarg_pool = 1;
	}
	if ((flags & HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED) && !g->have_host_pool) {
		g->host_pool = pool;
		g->have_host_pool = 1;
	}
	return HSA_STATUS_SUCCESS;
}

static hsa_status_t find_cpu_pools(hsa_agent_t agent, void *data)
{
	hsa_device_type_t type;

	if (hsa.hsa_agent_get_info(agent, HSA_AGENT_INFO_DEVICE, &type) == HSA_STATUS_SUCCESS &&
	    type == HSA_DEVICE_TYPE_CPU)
		hsa.hsa_amd_agent_iterate_memory_pools(agent, pick_pools, data);
	return HSA_STATUS_SUCCESS;
}

/*
 * Calls @fn for each of this process's descriptors open on /dev/kfd; stops
 * at and returns the first for which it returns non-zero, else -1.
 */
static int each_kfd_fd(int (*fn)(int fd, void *data), void *data)
{
	char link[300], target[64];
	struct dirent *d;
	DIR *dir = opendir("/proc/self/fd");
	int fd = -1;
	ssize_t n;

	while (dir && (d = readdir(dir))) {
		snprintf(link, sizeof(link), "/proc/self/fd/%s", d->d_name);
		n = readlink(link, target, sizeof(target) - 1);
		if (n <= 0)
			continue;
		target[n] = 0;
		if (!strcmp(target, "/dev/kfd") && fn(atoi(d->d_name), data)) {
			fd = atoi(d->d_name);
			break;
		}
	}
	if (dir)
		closedir(dir);
	return fd;
}

static int remember(int fd, void *data)
{
	unsigned char *seen = data;

	if (fd < KIT_MAX_FDS)
		seen[fd] = 1;
	return 0;
}

static int is_new(int fd, void *data)
{
	const unsigned char *seen = data;

	return fd >= KIT_MAX_FDS || !seen[fd];
}

const char *kit_gpu_open(struct kit_gpu *g)
{
	static unsigned char kfd_before[KIT_MAX_FDS];
	static char why[256];
	struct agent_pick pick = { .want = 0 };
	const char *env = getenv("KFDP_HW_GPU");
	const char *r = kit_hsa_load();
	hsa_status_t s;

	if (r)
		return r;
	memset(g, 0, sizeof(*g));
	/*
	 * The runtime opens /dev/kfd itself; a descriptor this process
	 * inherited or holds for another tenant is not this one's.
	 */
	memset(kfd_before, 0, sizeof(kfd_before));
	each_kfd_fd(remember, kfd_before);
	s = hsa.hsa_init();
	if (s != HSA_STATUS_SUCCESS) {
		snprintf(why, sizeof(why), "hsa_init: %s (no usable KFD GPU here)", kit_hsa_err(s));
		return why;
	}
	if (env)
		pick.want = atoi(env);
	hsa.hsa_iterate_agents(pick_gpu, &pick);
	if (!pick.found) {
		hsa.hsa_shut_down();
		snprintf(why, sizeof(why), "the HSA runtime sees %d GPU(s), KFDP_HW_GPU wants #%d",
			 pick.seen, pick.want);
		return why;
	}
	g->initialized = 1;
	g->kfd_fd = each_kfd_fd(is_new, kfd_before);
	g->agent = pick.agent;
	hsa.hsa_agent_get_info(g->agent, HSA_AGENT_INFO_NAME, g->target);
	hsa.hsa_agent_get_info(g->agent, (hsa_agent_info_t)HSA_AMD_AGENT_INFO_PRODUCT_NAME,
			       g->product);
	hsa.hsa_iterate_agents(find_cpu_pools, g);
	if (!g->have_host_pool || !g->have_kernarg_pool) {
		kit_gpu_close(g);
		return "the HSA runtime offers no fine-grained or kernarg system memory pool";
	}
	return NULL;
}

/* hsa_init() counts its callers: each open gpu shuts down once. */
void kit_gpu_close(struct kit_gpu *g)
{
	if (g->initialized)
		hsa.hsa_shut_down();
	g->initialized = 0;
}

int kit_gpu_kernel(struct kit_gpu *g, const char *workload, struct kit_kernel *k,
		   char *why, size_t why_len)
{
	const char *dir = getenv("KFDP_HW_KERNELS");
	char path[PATH_MAX], sym[128];
	hsa_code_object_reader_t reader;
	hsa_executable_symbol_t symbol;
	hsa_status_t s = HSA_STATUS_ERROR;
	long size;
	void *blob;
	FILE *f;

	memset(k, 0, sizeof(*k));
	snprintf(path, sizeof(path), "%s/%s-%s.co", dir ? dir : "kernels", workload, g->target);
	f = fopen(path, "rb");
	if (!f) {
		snprintf(why, why_len, "%s: %s (set KFDP_HW_KERNELS; is %s a kit target?)",
			 path, strerror(errno), g->target);
		return -1;
	}
	fseek(f, 0, SEEK_END);
	size = ftell(f);
	rewind(f);
	blob = malloc(size > 0 ? size : 1);
	if (!blob || fread(blob, 1, size, f) != (size_t)size) {
		fclose(f);
		free(blob);
		snprintf(why, why_len, "%s: cannot read", path);
		return -1;
	}
	fclose(f);
	snprintf(sym, sizeof(sym), "%s.kd", workload);
	if (hsa.hsa_code_object_reader_create_from_memory(blob, size, &reader) == HSA_STATUS_SUCCESS) {
		s = hsa.hsa_executable_create_alt(HSA_PROFILE_FULL,
						  HSA_DEFAULT_FLOAT_ROUNDING_MODE_DEFAULT,
						  NULL, &k->exe);
		if (s == HSA_STATUS_SUCCESS)
			s = hsa.hsa_executable_load_agent_code_object(k->exe, g->agent, reader,
								      NULL, NULL);
		if (s == HSA_STATUS_SUCCESS)
			s = hsa.hsa_executable_freeze(k->exe, NULL);
		if (s == HSA_STATUS_SUCCESS)
			s = hsa.hsa_executable_get_symbol_by_name(k->exe, sym, &g->agent, &symbol);
		hsa.hsa_code_object_reader_destroy(reader);
	}
	free(blob);
	if (s == HSA_STATUS_SUCCESS)
		s = hsa.hsa_executable_symbol_get_info(symbol,
			HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_OBJECT, &k->object);
	if (s == HSA_STATUS_SUCCESS)
		s = hsa.hsa_executable_symbol_get_info(symbol,
			HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_KERNARG_SEGMENT_SIZE, &k->kernarg_size);
	if (s == HSA_STATUS_SUCCESS)
		s = hsa.hsa_executable_symbol_get_info(symbol,
			HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_GROUP_SEGMENT_SIZE, &k->group_size);
	if (s != HSA_STATUS_SUCCESS) {
		snprintf(why, why_len, "loading %s (%s): %s", path, sym, kit_hsa_err(s));
		return -1;
	}
	return 0;
}

void kit_gpu_kernel_free(struct kit_kernel *k)
{
	if (k->object)
		hsa.hsa_executable_destroy(k->exe);
	k->object = 0;
}

static void *alloc_in(struct kit_gpu *g, hsa_amd_memory_pool_t pool, size_t size)
{
	void *p = NULL;

	if (hsa.hsa_amd_memory_pool_allocate(pool, size, 0, &p) != HSA_STATUS_SUCCESS)
		return NULL;
	if (hsa.hsa_amd_agents_allow_access(1, &g->agent, NULL, p) != HSA_STATUS_SUCCESS) {
		hsa.hsa_amd_memory_pool_free(p);
		return NULL;
	}
	memset(p, 0, size);
	return p;
}

void *kit_gpu_alloc(struct kit_gpu *g, size_t size)
{
	return alloc_in(g, g->host_pool, size);
}

void *kit_gpu_kernarg(struct kit_gpu *g, size_t size)
{
	return alloc_in(g, g->kernarg_pool, size);
}

void kit_gpu_free(void *p)
{
	if (p)
		hsa.hsa_amd_memory_pool_free(p);
}

hsa_queue_t *kit_gpu_queue(struct kit_gpu *g, hsa_queue_type32_t type)
{
	hsa_queue_t *q = NULL;

	if (hsa.hsa_queue_create(g->agent, 1024, type, NULL, NULL, UINT32_MAX, UINT32_MAX,
				 &q) != HSA_STATUS_SUCCESS)
		return NULL;
	return q;
}

uint64_t kit_gpu_dispatch(hsa_queue_t *q, const struct kit_kernel *k, void *kernarg,
			  uint32_t grid, uint32_t wg, uint32_t dyn_lds, hsa_signal_t done)
{
	uint64_t index = hsa.hsa_queue_add_write_index_relaxed(q, 1);
	hsa_kernel_dispatch_packet_t *p;
	uint16_t header, setup;

	/* The ring has room: the kit never has 1024 dispatches in flight. */
	while (index - hsa.hsa_queue_load_read_index_relaxed(q) >= q->size)
		;
	p = (hsa_kernel_dispatch_packet_t *)q->base_address + (index & (q->size - 1));
	memset((char *)p + 4, 0, sizeof(*p) - 4);
	p->workgroup_size_x = wg;
	p->workgroup_size_y = 1;
	p->workgroup_size_z = 1;
	p->grid_size_x = grid;
	p->grid_size_y = 1;
	p->grid_size_z = 1;
	p->group_segment_size = k->group_size + dyn_lds;
	p->kernel_object = k->object;
	p->kernarg_address = kernarg;
	p->completion_signal = done;
	setup = 1 << HSA_KERNEL_DISPATCH_PACKET_SETUP_DIMENSIONS;
	header = HSA_PACKET_TYPE_KERNEL_DISPATCH << HSA_PACKET_HEADER_TYPE |
		 1 << HSA_PACKET_HEADER_BARRIER |
		 HSA_FENCE_SCOPE_SYSTEM << HSA_PACKET_HEADER_SCACQUIRE_FENCE_SCOPE |
		 HSA_FENCE_SCOPE_SYSTEM << HSA_PACKET_HEADER_SCRELEASE_FENCE_SCOPE;
	/* The header goes last: the packet processor starts on a valid one. */
	__atomic_store_n((uint32_t *)p, header | (uint32_t)setup << 16, __ATOMIC_RELEASE);
	hsa.hsa_signal_store_relaxed(q->doorbell_signal, index);
	return index;
}

int kit_gpu_stamp(struct kit_gpu *g, const struct kit_kernel *k, hsa_queue_t *q,
		  uint64_t *stamps, uint32_t slot, hsa_signal_t done)
{
	uint32_t *a = kit_gpu_kernarg(g, k->kernarg_size);

	if (!a)
		return -ENOMEM;
	/* The kernel's arguments: the stamps' address, then the slot. */
	memcpy(a, &stamps, sizeof(stamps));
	a[2] = slot;
	kit_gpu_dispatch(q, k, a, 64, 64, 0, done);
	return 0;
}

static long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int kit_gpu_wait(hsa_signal_t s, long ms)
{
	long deadline = now_ms() + ms;

	/*
	 * The runtime's timeout is only a hint, in its own timestamp units:
	 * wait in short slices against our own clock.
	 */
	while (hsa.hsa_signal_wait_scacquire(s, HSA_SIGNAL_CONDITION_LT, 1, 1000000,
					     HSA_WAIT_STATE_BLOCKED) >= 1)
		if (now_ms() > deadline)
			return -1;
	return 0;
}

int kit_gpu_kfd_fd(const struct kit_gpu *g)
{
	return g->kfd_fd;
}
