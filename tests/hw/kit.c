// SPDX-License-Identifier: GPL-2.0
/* The driver-independent part of the kit's tenants (see kit.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>

#include "kit.h"

const struct kit_driver *kit_driver(void)
{
	const char *name = getenv("KFDP_HW_DRIVER");

	if (!name || !strcmp(name, "hsa"))
		return &kit_hsa_driver;
	if (!strcmp(name, "sim"))
		return &kit_sim_driver;
	return NULL;
}

int kit_attach(int owner, const struct kit_tenant *t)
{
	struct kfdp_attach a = { .kind = t->kind, .fd = t->fd };

	if (ioctl(owner, KFDP_IOC_ATTACH, &a))
		return -errno;
	return a.handle;
}

void kit_sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

__u64 kit_wait_progress(struct kit_tenant *t, struct kit_queue *q, __u64 from, long ms)
{
	__u64 v = from;

	for (; ms > 0; ms -= 5) {
		if (t->drv->progress(t, q, &v))
			return from;
		if (v > from)
			return v;
		kit_sleep_ms(5);
	}
	return from;
}

struct kfdp_queue_info *kit_query_all(int owner, __u32 handle, __u32 gpu_id, __u32 *n)
{
	struct kfdp_queue_info *all = calloc(KFDP_MAX_BATCH, sizeof(*all));
	struct kfdp_query query = {
		.handle = handle, .gpu_id = gpu_id,
		.entries_ptr = (__u64)(uintptr_t)all,
		.entry_size = sizeof(*all), .capacity = KFDP_MAX_BATCH,
	};

	if (all && ioctl(owner, KFDP_IOC_QUERY, &query)) {
		free(all);
		return NULL;
	}
	*n = all ? query.num_written : 0;
	return all;
}

int kit_query_one(int owner, __u32 handle, const struct kit_queue *q,
		  struct kfdp_queue_info *out)
{
	struct kfdp_queue_info *all;
	int r = -ENOENT;
	__u32 i, n;

	all = kit_query_all(owner, handle, q->gpu_id, &n);
	if (!all)
		return -errno;
	for (i = 0; r && i < n; i++) {
		if (all[i].queue_id == q->queue_id) {
			*out = all[i];
			r = 0;
		}
	}
	free(all);
	return r;
}

int kit_batch(int owner, unsigned long cmd, __u32 handle, struct kit_queue *qs, int n,
	      struct kfdp_batch *out)
{
	struct kfdp_queue_ref refs[KIT_MAX_QUEUES];
	struct kfdp_batch b;
	int i, tries, again;

	if (n < 1 || n > KIT_MAX_QUEUES)
		return -EINVAL;
	for (tries = 0; tries < 200; tries++) {
		for (i = 0; i < n; i++) {
			refs[i] = (struct kfdp_queue_ref){
				.handle = handle, .gpu_id = qs[i].gpu_id, .queue_id = qs[i].queue_id,
			};
		}
		memset(&b, 0, sizeof(b));
		b.entries_ptr = (__u64)(uintptr_t)refs;
		b.num_entries = n;
		b.entry_size = sizeof(refs[0]);
		if (ioctl(owner, cmd, &b))
			return -errno;
		for (again = 0, i = 0; i < n; i++)
			again |= refs[i].status == -EAGAIN;
		if (!again)
			break;
		if (b.num_ok) /* some went through: the batch is not all or nothing */
			return -EAGAIN;
		kit_sleep_ms(2);
	}
	if (out)
		*out = b;
	for (i = 0; i < n; i++)
		if (refs[i].status)
			return refs[i].status;
	return 0;
}
