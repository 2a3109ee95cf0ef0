/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A GPU as the kit drives it through ROCm's HSA runtime: one agent, its
 * fine-grained host memory, the kit's code objects and raw AQL dispatch.
 */
#ifndef KIT_GPU_H
#define KIT_GPU_H

#include <stddef.h>
#include <stdint.h>

#include "hsa_api.h"

struct kit_gpu {
	hsa_agent_t agent;
	char target[64];	/* gfx target, e.g. gfx942 */
	char product[64];	/* marketing name, e.g. AMD Instinct MI300X */
	hsa_amd_memory_pool_t host_pool;	/* fine-grained system memory */
	hsa_amd_memory_pool_t kernarg_pool;
	int have_host_pool, have_kernarg_pool;
	int initialized;	/* hsa_init() succeeded for this gpu */
	int kfd_fd;		/* the runtime's /dev/kfd, or -1 */
};

struct kit_kernel {
	hsa_executable_t exe;
	uint64_t object;
	uint32_t kernarg_size;
	uint32_t group_size;	/* static LDS */
};

/*
 * Loads the runtime, initialises it and picks the GPU (KFDP_HW_GPU=N picks
 * the N-th, default the first). Returns NULL, or why there is no GPU to
 * run on (the caller skips with it).
 */
const char *kit_gpu_open(struct kit_gpu *g);
void kit_gpu_close(struct kit_gpu *g);

/* Loads <dir>/<workload>-<target>.co, dir from KFDP_HW_KERNELS. */
int kit_gpu_kernel(struct kit_gpu *g, const char *workload, struct kit_kernel *k,
		   char *why, size_t why_len);
void kit_gpu_kernel_free(struct kit_kernel *k);

/* Zeroed host memory the GPU reads and writes coherently; NULL on failure. */
void *kit_gpu_alloc(struct kit_gpu *g, size_t size);
/* Memory for one dispatch's kernel arguments. */
void *kit_gpu_kernarg(struct kit_gpu *g, size_t size);
void kit_gpu_free(void *p);

/* A user-mode queue of 1024 packets; NULL on failure. */
hsa_queue_t *kit_gpu_queue(struct kit_gpu *g, hsa_queue_type32_t type);

/*
 * Writes one kernel dispatch packet (1-D: @grid work-items in groups of
 * @wg, plus @dyn_lds bytes of dynamic LDS) and rings the doorbell.
 * @kernarg is kit_gpu_kernarg() memory already filled. @done may be a null
 * signal. Returns the packet's index in the queue.
 */
uint64_t kit_gpu_dispatch(hsa_queue_t *q, const struct kit_kernel *k, void *kernarg,
			  uint32_t grid, uint32_t wg, uint32_t dyn_lds, hsa_signal_t done);

/*
 * One dispatch of the "stamp" workload @k (64 work-items; work-item 0
 * writes the GPU's clock into @stamps[@slot]). Returns 0, or -ENOMEM if
 * no kernel-argument memory was left.
 */
int kit_gpu_stamp(struct kit_gpu *g, const struct kit_kernel *k, hsa_queue_t *q,
		  uint64_t *stamps, uint32_t slot, hsa_signal_t done);

/* Waits up to @ms for @s to drop below 1; returns 0 or -1 on timeout. */
int kit_gpu_wait(hsa_signal_t s, long ms);

/*
 * The /dev/kfd file the runtime opened at kit_gpu_open() (one this process
 * did not already hold), or -1.
 */
int kit_gpu_kfd_fd(const struct kit_gpu *g);

#endif /* KIT_GPU_H */
