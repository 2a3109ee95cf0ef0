// SPDX-License-Identifier: GPL-2.0
/*
 * The kit's hardware driver: tenants are this process's own HSA queues on
 * a real GPU, running tests/hw/kernels/spin.cl. kfd_preempt names a queue
 * by (gpu_id, queue_id), which the runtime does not expose; QUERY's
 * ring_base_address is the hsa_queue_t's base_address, which identifies it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "gpu.h"
#include "kit.h"
#include "kit_hsa.h"

#define SPIN_GROUPS 4	/* workgroups of the spinning kernel... */
#define SPIN_WG 64	/* ...of one wave each on gfx9 */

struct spin_queue {
	hsa_queue_t *q;
	/* Host memory the GPU writes and reads: accessed with __atomic. */
	__u64 *progress;	/* SPIN_GROUPS counters */
	__u32 *stop;
	hsa_signal_t done;
	void *kernarg;
};

struct hsa_tenant {
	struct kit_gpu gpu;
	struct kit_kernel spin;
	int nq;
	struct spin_queue qs[KIT_MAX_QUEUES];
	char why[256];
};

static const char *hsa_absent(void)
{
	static char why[300];
	struct kit_gpu g;
	const char *r;

	if (access("/dev/kfd", R_OK | W_OK))
		return "/dev/kfd is not accessible: no AMD GPU with a KFD node here";
	if (access("/dev/kfd_preempt", F_OK))
		return "/dev/kfd_preempt does not exist: kfd_preempt is not loaded";
	r = kit_gpu_open(&g);
	if (r) {
		snprintf(why, sizeof(why), "%s", r);
		return why;
	}
	kit_gpu_close(&g);
	return NULL;
}

static int hsa_open(struct kit_tenant *t)
{
	struct hsa_tenant *h = calloc(1, sizeof(*h));

	if (!h)
		return -ENOMEM;
	t->priv = h;
	t->fd = -1;
	t->kind = KFDP_TARGET_KFD_FD;
	if (kit_gpu_open(&h->gpu))
		return -ENODEV;
	if (kit_gpu_kernel(&h->gpu, "spin", &h->spin, h->why, sizeof(h->why))) {
		fprintf(stderr, "# %s\n", h->why);
		return -ENOENT;
	}
	t->fd = kit_gpu_kfd_fd(&h->gpu);
	return t->fd < 0 ? -EBADF : 0;
}

static void hsa_close(struct kit_tenant *t)
{
	struct hsa_tenant *h = t->priv;
	int i;

	if (!h)
		return;
	for (i = 0; i < h->nq; i++) {
		struct spin_queue *s = &h->qs[i];

		__atomic_store_n(s->stop, 1, __ATOMIC_RELEASE);
		/* A queue still preempted never finishes: destroying it ends it. */
		kit_gpu_wait(s->done, 2000);
		hsa.hsa_queue_destroy(s->q);
		hsa.hsa_signal_destroy(s->done);
		kit_gpu_free(s->progress);
		kit_gpu_free(s->stop);
		kit_gpu_free(s->kernarg);
	}
	kit_gpu_kernel_free(&h->spin);
	kit_gpu_close(&h->gpu);
	free(h);
	t->priv = NULL;
}

int kit_hsa_identify(int owner, __u32 handle, const void *ring_base, struct kit_queue *q)
{
	struct kfdp_queue_info *all;
	int r = -ENOENT;
	__u32 i, n;

	all = kit_query_all(owner, handle, 0, &n);
	if (!all)
		return -errno;
	for (i = 0; r && i < n; i++) {
		if (all[i].ring_base_address == (__u64)(uintptr_t)ring_base) {
			q->gpu_id = all[i].gpu_id;
			q->queue_id = all[i].queue_id;
			r = 0;
		}
	}
	free(all);
	return r;
}

static int hsa_spin(struct kit_tenant *t, int owner, __u32 handle, struct kit_queue *q)
{
	struct hsa_tenant *h = t->priv;
	struct spin_queue *s;
	void **args;

	if (h->nq == KIT_MAX_QUEUES)
		return -ENOSPC;
	s = &h->qs[h->nq];
	memset(s, 0, sizeof(*s));
	s->progress = kit_gpu_alloc(&h->gpu, SPIN_GROUPS * sizeof(__u64));
	s->stop = kit_gpu_alloc(&h->gpu, sizeof(__u32));
	s->kernarg = kit_gpu_kernarg(&h->gpu, h->spin.kernarg_size);
	if (!s->progress || !s->stop || !s->kernarg ||
	    hsa.hsa_signal_create(1, 0, NULL, &s->done) != HSA_STATUS_SUCCESS)
		goto fail;
	s->q = kit_gpu_queue(&h->gpu, HSA_QUEUE_TYPE_MULTI);
	if (!s->q) {
		hsa.hsa_signal_destroy(s->done);
		goto fail;
	}
	h->nq++;
	args = s->kernarg;
	args[0] = s->progress;
	args[1] = s->stop;
	kit_gpu_dispatch(s->q, &h->spin, s->kernarg, SPIN_GROUPS * SPIN_WG, SPIN_WG, 0, s->done);
	q->priv = s;
	/* A tenant without an owner (kfdp-hw-tenant) leaves that to its owner. */
	return owner < 0 ? 0 : kit_hsa_identify(owner, handle, s->q->base_address, q);
fail:
	kit_gpu_free(s->progress);
	kit_gpu_free(s->stop);
	kit_gpu_free(s->kernarg);
	return -ENOMEM;
}

static int hsa_progress(struct kit_tenant *t, struct kit_queue *q, __u64 *v)
{
	struct spin_queue *s = q->priv;
	int i;

	(void)t;
	*v = 0;
	for (i = 0; i < SPIN_GROUPS; i++)
		*v += __atomic_load_n(&s->progress[i], __ATOMIC_RELAXED);
	return 0;
}

struct kit_gpu *kit_hsa_gpu(struct kit_tenant *t)
{
	return &((struct hsa_tenant *)t->priv)->gpu;
}

hsa_queue_t *kit_hsa_queue(struct kit_queue *q)
{
	return ((struct spin_queue *)q->priv)->q;
}

const struct kit_driver kit_hsa_driver = {
	.name = "hsa",
	.absent = hsa_absent,
	.open = hsa_open,
	.close = hsa_close,
	.spin = hsa_spin,
	.progress = hsa_progress,
};
