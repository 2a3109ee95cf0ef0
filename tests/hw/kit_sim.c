// SPDX-License-Identifier: GPL-2.0
/*
 * The kit's dry-run driver: tenants on kfd_preempt's simulated node
 * (sim_nodes=N, node 0). A simulated queue on the hardware retires work
 * every millisecond; its retired count is the spinning workload's progress.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "kit.h"

#define SIM_DEV "/dev/kfd_preempt_sim"

static const char *sim_absent(void)
{
	if (access("/dev/kfd_preempt", F_OK))
		return "/dev/kfd_preempt does not exist: kfd_preempt is not loaded";
	if (access(SIM_DEV, F_OK))
		return "no simulated node for the dry run: load kfd_preempt with sim_nodes=N";
	return NULL;
}

static int sim_open(struct kit_tenant *t)
{
	t->fd = open(SIM_DEV, O_RDWR | O_CLOEXEC);
	t->kind = KFDP_TARGET_SIM_FD;
	return t->fd < 0 ? -errno : 0;
}

static void sim_close(struct kit_tenant *t)
{
	if (t->fd >= 0)
		close(t->fd);
	t->fd = -1;
}

static int sim_spin(struct kit_tenant *t, int owner, __u32 handle, struct kit_queue *q)
{
	struct kfdp_sim_queue_create c = { .node = 0, .queue_type = 0, .priority = 7 };

	(void)owner;
	(void)handle;
	if (ioctl(t->fd, KFDP_SIM_IOC_CREATE_QUEUE, &c))
		return -errno;
	q->gpu_id = c.gpu_id;
	q->queue_id = c.queue_id;
	return 0;
}

static int sim_progress(struct kit_tenant *t, struct kit_queue *q, __u64 *v)
{
	struct kfdp_sim_queue_status s = { .queue_id = q->queue_id };

	if (ioctl(t->fd, KFDP_SIM_IOC_QUEUE_STATUS, &s))
		return -errno;
	*v = s.retired;
	return 0;
}

const struct kit_driver kit_sim_driver = {
	.name = "sim",
	.absent = sim_absent,
	.open = sim_open,
	.close = sim_close,
	.spin = sim_spin,
	.progress = sim_progress,
};
