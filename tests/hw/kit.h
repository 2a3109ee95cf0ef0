/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The hardware kit's tenants. A check is written once against this
 * interface and runs on a real GPU through ROCm's HSA runtime (driver
 * "hsa", the default) or, as a dry run, on kfd_preempt's simulated node
 * (driver "sim", KFDP_HW_DRIVER=sim), which expresses the same oracle
 * where its model can: a spinning queue's progress is the simulated
 * queue's retired work (Documentation/hardware-validation.rst).
 */
#ifndef KIT_H
#define KIT_H

#include <linux/types.h>
#include <stddef.h>

#include <linux/kfd_preempt.h>

#define KIT_MAX_QUEUES 64

/* A queue of a tenant, running the spinning workload. */
struct kit_queue {
	__u32 gpu_id, queue_id;	/* as kfd_preempt names it */
	void *priv;
};

struct kit_driver;

/* One KFD process's worth of queues, in the calling process. */
struct kit_tenant {
	const struct kit_driver *drv;
	int fd;		/* what an owner ATTACHes */
	__u32 kind;	/* KFDP_TARGET_KFD_FD or KFDP_TARGET_SIM_FD */
	void *priv;
};

struct kit_driver {
	const char *name;
	/* Why this driver cannot run here, or NULL. */
	const char *(*absent)(void);
	int (*open)(struct kit_tenant *t);
	void (*close)(struct kit_tenant *t);
	/*
	 * Creates a queue running the spinning workload and fills @q's
	 * kfd_preempt identity, found through @owner's attachment @handle
	 * of @t (QUERY) where the runtime does not tell it; with @owner -1
	 * the identity may stay unknown (0).
	 */
	int (*spin)(struct kit_tenant *t, int owner, __u32 handle, struct kit_queue *q);
	/* A count that grows only while @q is on the hardware. */
	int (*progress)(struct kit_tenant *t, struct kit_queue *q, __u64 *v);
};

extern const struct kit_driver kit_hsa_driver, kit_sim_driver;

/* The driver KFDP_HW_DRIVER names ("hsa" by default), or NULL. */
const struct kit_driver *kit_driver(void);

/* ATTACHes @t to @owner; returns the handle or -errno. */
int kit_attach(int owner, const struct kit_tenant *t);

/*
 * Waits up to @ms for @q's progress to pass @from; returns the new value,
 * or @from if it did not move.
 */
__u64 kit_wait_progress(struct kit_tenant *t, struct kit_queue *q, __u64 from, long ms);

/*
 * Every queue of attachment @handle on @gpu_id (0: all nodes), in a
 * buffer to free(); NULL with errno set on failure.
 */
struct kfdp_queue_info *kit_query_all(int owner, __u32 handle, __u32 gpu_id, __u32 *n);

/* kfd_preempt's view of one queue (QUERY); 0 or -errno. */
int kit_query_one(int owner, __u32 handle, const struct kit_queue *q,
		  struct kfdp_queue_info *out);

/*
 * PREEMPT or RESUME (@cmd) of @n queues of attachment @handle as one batch;
 * fills @out if not NULL. A PREEMPT that comes too soon after the node's
 * last change (min_preempt_interval_us) gets -EAGAIN entries and changes
 * nothing: it is retried, as a scheduler would. Returns 0, the first
 * entry's non-zero status, or -errno of the ioctl.
 */
int kit_batch(int owner, unsigned long cmd, __u32 handle, struct kit_queue *qs, int n,
	      struct kfdp_batch *out);

void kit_sleep_ms(long ms);

#endif /* KIT_H */
