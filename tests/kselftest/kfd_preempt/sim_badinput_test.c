// SPDX-License-Identifier: GPL-2.0
/*
 * Bad input against a live target on the simulated node: every case
 * asserts the exact errno (or entry status) and that nothing changed:
 * queue states, the preempted queue's progress, the node's runlist
 * updates, and what is suspended. uapi_test covers the same ioctls without
 * a target.
 */
#define _GNU_SOURCE
#include <sys/mman.h>

#include "kfdp_sim.h"
#include "kselftest_harness.h"

#define NQ 3

struct snapshot {
	__u32 state[NQ];
	__u64 frozen_total;	/* progress of the preempted queue */
	long long updates[2], suspended;
};

FIXTURE(bad) {
	int owner, tenant, handle;
	int q[NQ];		/* q[0] is preempted, the others run */
	struct snapshot before;
	long page;
	char *pages;		/* two pages: read-write, then PROT_NONE */
};

/* FIXTURE_DATA(bad), spelled out. */
static void snap(struct _test_data_bad *self, struct snapshot *s)
{
	int i;

	for (i = 0; i < NQ; i++)
		s->state[i] = kfdp_queue_state(self->tenant, self->q[i]);
	s->frozen_total = kfdp_queue_total(self->tenant, self->q[0]);
	s->updates[0] = kfdp_node_updates(0);
	s->updates[1] = kfdp_node_updates(1);
	s->suspended = kfdp_sim_stat("suspended");
}

FIXTURE_SETUP(bad)
{
	const char *why = kfdp_sim_absent();
	int i;

	self->owner = self->tenant = -1;
	if (why)
		SKIP(return, "%s", why);
	self->handle = kfdp_owner_and_tenant(&self->owner, &self->tenant);
	ASSERT_LT(0, self->handle) TH_LOG("owner, tenant and ATTACH: %s", strerror(-self->handle));
	for (i = 0; i < NQ; i++) {
		self->q[i] = kfdp_queue_create(self->tenant, KFDP_SIM_HWS, KFDP_QT_COMPUTE);
		ASSERT_LE(0, self->q[i]);
	}
	ASSERT_EQ(0, kfdp_one(self->owner, KFDP_IOC_PREEMPT, self->handle, KFDP_SIM_HWS,
			      self->q[0]));
	self->page = sysconf(_SC_PAGESIZE);
	self->pages = mmap(NULL, 2 * self->page, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, self->pages);
	ASSERT_EQ(0, mprotect(self->pages + self->page, self->page, PROT_NONE));
	snap(self, &self->before);
	ASSERT_EQ(KFDP_QS_SUSPENDED, self->before.state[0]);
	ASSERT_EQ(KFDP_QS_ACTIVE, self->before.state[1]);
}

FIXTURE_TEARDOWN(bad)
{
	if (self->owner >= 0)
		close(self->owner);
	if (self->tenant >= 0)
		close(self->tenant);
}

/* Nothing changed since the fixture was set up. */
#define UNCHANGED() do {							\
	struct snapshot now;							\
	int i_;									\
	snap(self, &now);							\
	for (i_ = 0; i_ < NQ; i_++)						\
		EXPECT_EQ(self->before.state[i_], now.state[i_]);		\
	EXPECT_EQ(self->before.frozen_total, now.frozen_total);		\
	EXPECT_EQ(self->before.updates[0], now.updates[0]);			\
	EXPECT_EQ(self->before.updates[1], now.updates[1]);			\
	EXPECT_EQ(self->before.suspended, now.suspended);			\
} while (0)

/* A batch of the two running queues with one field changed by @mutate. */
#define BATCH_ERRNO(cmd, mutate) ({						\
	struct kfdp_queue_ref r_[2] = {						\
		kfdp_ref(self->handle, KFDP_SIM_HWS, self->q[1]),		\
		kfdp_ref(self->handle, KFDP_SIM_HWS, self->q[2]),		\
	};									\
	struct kfdp_batch b = {							\
		.entries_ptr = (__u64)(uintptr_t)r_, .num_entries = 2,		\
		.entry_size = sizeof(r_[0]),					\
	};									\
	mutate;									\
	kfdp_ioctl_errno(self->owner, (cmd), &b);				\
})

TEST_F(bad, batch_header_fields)
{
	EXPECT_EQ(EINVAL, BATCH_ERRNO(KFDP_IOC_PREEMPT, b.reserved[0] = 1));
	EXPECT_EQ(EINVAL, BATCH_ERRNO(KFDP_IOC_PREEMPT, b.reserved[1] = 1));
	EXPECT_EQ(EINVAL, BATCH_ERRNO(KFDP_IOC_PREEMPT, b.flags = 1u << 2));
	EXPECT_EQ(EINVAL, BATCH_ERRNO(KFDP_IOC_PREEMPT, b.flags = 1u << 31));
	EXPECT_EQ(EINVAL, BATCH_ERRNO(KFDP_IOC_PREEMPT, b.entry_size = 15));
	EXPECT_EQ(EINVAL, BATCH_ERRNO(KFDP_IOC_PREEMPT, b.entry_size = 0));
	EXPECT_EQ(E2BIG, BATCH_ERRNO(KFDP_IOC_PREEMPT, b.num_entries = KFDP_MAX_BATCH + 1));
	EXPECT_EQ(E2BIG, BATCH_ERRNO(KFDP_IOC_PREEMPT, b.num_entries = ~0u));
	EXPECT_EQ(EINVAL, BATCH_ERRNO(KFDP_IOC_RESUME, b.lease_ms = 10))
		TH_LOG("RESUME with a lease");
	UNCHANGED();
}

TEST_F(bad, batch_output_fields_on_input)
{
	/* num_ok, num_runlist_updates and elapsed_ns are outputs: ignored on input. */
	EXPECT_EQ(0, BATCH_ERRNO(KFDP_IOC_PREEMPT,
				 (b.num_ok = 7, b.num_runlist_updates = 9,
				  b.flags = KFDP_BATCH_VALIDATE_ONLY)));
	UNCHANGED();
}

TEST_F(bad, batch_pointers)
{
	struct kfdp_queue_ref *edge = (void *)(self->pages + self->page - sizeof(*edge));
	struct kfdp_queue_ref *ro;

	EXPECT_EQ(EFAULT, BATCH_ERRNO(KFDP_IOC_PREEMPT, b.entries_ptr = 0));
	EXPECT_EQ(EFAULT, BATCH_ERRNO(KFDP_IOC_PREEMPT,
				      b.entries_ptr = (__u64)(uintptr_t)(self->pages + self->page)));
	/* Partly mapped: the first entry is readable, the second is not. */
	*edge = kfdp_ref(self->handle, KFDP_SIM_HWS, self->q[1]);
	EXPECT_EQ(EFAULT, BATCH_ERRNO(KFDP_IOC_PREEMPT, b.entries_ptr = (__u64)(uintptr_t)edge));
	/* Read-only: readable entries, but statuses cannot be written back. */
	ro = (void *)self->pages;
	ro[0] = kfdp_ref(self->handle, KFDP_SIM_HWS, self->q[1]);
	ro[1] = kfdp_ref(self->handle, KFDP_SIM_HWS, self->q[2]);
	ASSERT_EQ(0, mprotect(self->pages, self->page, PROT_READ));
	EXPECT_EQ(EFAULT, BATCH_ERRNO(KFDP_IOC_PREEMPT, b.entries_ptr = (__u64)(uintptr_t)ro));
	ASSERT_EQ(0, mprotect(self->pages, self->page, PROT_READ | PROT_WRITE));
	/* The header itself unmapped. */
	EXPECT_EQ(EFAULT, kfdp_ioctl_errno(self->owner, KFDP_IOC_PREEMPT,
					   self->pages + self->page));
	EXPECT_EQ(EFAULT, kfdp_ioctl_errno(self->owner, KFDP_IOC_PREEMPT, NULL));
	UNCHANGED();
}

TEST_F(bad, entry_size_larger_with_tail)
{
	struct { struct kfdp_queue_ref r; __u32 tail; } big[2] = {
		{ kfdp_ref(self->handle, KFDP_SIM_HWS, self->q[1]), 0 },
		{ kfdp_ref(self->handle, KFDP_SIM_HWS, self->q[2]), 5 },
	};
	struct kfdp_batch b = {
		.entries_ptr = (__u64)(uintptr_t)big, .num_entries = 2, .entry_size = sizeof(big[0]),
	};

	EXPECT_EQ(E2BIG, kfdp_ioctl_errno(self->owner, KFDP_IOC_PREEMPT, &b));
	EXPECT_EQ(5, big[1].tail);
	UNCHANGED();
}

/* Per-entry errors: the call succeeds, the entry says why, nothing moves. */
TEST_F(bad, entry_errors)
{
	struct kfdp_queue_ref r[6] = {
		kfdp_ref(self->handle + 1000, KFDP_SIM_HWS, self->q[1]),  /* foreign handle */
		kfdp_ref(0, KFDP_SIM_HWS, self->q[1]),                     /* handle 0 */
		kfdp_ref(self->handle, KFDP_SIM_HWS, 999),                 /* unknown queue */
		kfdp_ref(self->handle, KFDP_SIM_HWS, 1u << 20),            /* out of range */
		kfdp_ref(self->handle, KFDP_SIM_HWS, self->q[1]),          /* bad gpu_id... */
		kfdp_ref(self->handle, KFDP_SIM_HWS, self->q[1]),          /* ...and 0 */
	};
	struct kfdp_batch b;

	r[4].gpu_id = 0x9999;
	r[5].gpu_id = 0;
	ASSERT_EQ(0, kfdp_batch(self->owner, KFDP_IOC_PREEMPT, r, 6, 0, 0, &b));
	EXPECT_EQ(0, b.num_ok);
	EXPECT_EQ(-EINVAL, r[0].status);
	EXPECT_EQ(-EINVAL, r[1].status);
	EXPECT_EQ(-ENOENT, r[2].status);
	EXPECT_EQ(-EINVAL, r[3].status);
	EXPECT_EQ(-EINVAL, r[4].status);
	EXPECT_EQ(-EINVAL, r[5].status);
	EXPECT_EQ(0, b.num_runlist_updates);
	/* The queue exists, but on node 0, not node 1. */
	EXPECT_EQ(-ENOENT, kfdp_one(self->owner, KFDP_IOC_PREEMPT, self->handle, KFDP_SIM_MES,
				    self->q[1]));
	UNCHANGED();
}

TEST_F(bad, stale_handle)
{
	struct kfdp_detach d = { .handle = self->handle };
	int h2;

	/* DETACH resumes q[0]; re-preempt through a new handle. */
	ASSERT_EQ(0, ioctl(self->owner, KFDP_IOC_DETACH, &d));
	EXPECT_EQ(-EINVAL, kfdp_one(self->owner, KFDP_IOC_PREEMPT, self->handle, KFDP_SIM_HWS,
				    self->q[1]));
	EXPECT_EQ(EINVAL, kfdp_ioctl_errno(self->owner, KFDP_IOC_DETACH, &d));
	h2 = kfdp_attach_sim(self->owner, self->tenant);
	ASSERT_LT(0, h2);
	EXPECT_NE(self->handle, h2) TH_LOG("handles are not reused");
	ASSERT_EQ(0, kfdp_one(self->owner, KFDP_IOC_PREEMPT, h2, KFDP_SIM_HWS, self->q[0]));
	/* Two cycles, and q[0] ran in between. */
	self->before.updates[0] += 2;
	self->before.frozen_total = kfdp_queue_total(self->tenant, self->q[0]);
	UNCHANGED();
}

TEST_F(bad, attach_wrong_kinds)
{
	int null = open("/dev/null", O_RDWR);
	struct kfdp_attach a = { .kind = KFDP_TARGET_KFD_FD, .fd = self->tenant };

	ASSERT_LE(0, null);
	EXPECT_EQ(EINVAL, kfdp_ioctl_errno(self->owner, KFDP_IOC_ATTACH, &a))
		TH_LOG("a simulated tenant is not a /dev/kfd");
	EXPECT_EQ(-EINVAL, kfdp_attach_sim(self->owner, null)) TH_LOG("/dev/null");
	EXPECT_EQ(-EINVAL, kfdp_attach_sim(self->owner, self->owner)) TH_LOG("an owner");
	EXPECT_EQ(-EBADF, kfdp_attach_sim(self->owner, -1));
	close(null);
	EXPECT_EQ(-EBADF, kfdp_attach_sim(self->owner, null)) TH_LOG("a closed fd");
	a = (struct kfdp_attach){ .kind = KFDP_TARGET_SIM_FD, .fd = self->tenant, .pid = 1 };
	EXPECT_EQ(EINVAL, kfdp_ioctl_errno(self->owner, KFDP_IOC_ATTACH, &a));
	a = (struct kfdp_attach){ .kind = KFDP_TARGET_SIM_FD, .fd = self->tenant, .flags = 1 };
	EXPECT_EQ(EINVAL, kfdp_ioctl_errno(self->owner, KFDP_IOC_ATTACH, &a));
	a = (struct kfdp_attach){ .kind = KFDP_TARGET_SIM_FD, .fd = self->tenant, .reserved1 = 1 };
	EXPECT_EQ(EINVAL, kfdp_ioctl_errno(self->owner, KFDP_IOC_ATTACH, &a));
	a = (struct kfdp_attach){ .kind = 99, .fd = self->tenant };
	EXPECT_EQ(EINVAL, kfdp_ioctl_errno(self->owner, KFDP_IOC_ATTACH, &a));
	/* The same tenant again: the existing handle. */
	EXPECT_EQ(self->handle, kfdp_attach_sim(self->owner, self->tenant));
	UNCHANGED();
}

TEST_F(bad, query_and_freeze_fields)
{
	struct kfdp_queue_info qi[2];
	struct kfdp_query q = {
		.handle = self->handle, .entries_ptr = (__u64)(uintptr_t)qi,
		.entry_size = sizeof(qi[0]), .capacity = 2,
	};
	struct kfdp_freeze f = { .handle = self->handle };

	q.reserved[1] = 1;
	EXPECT_EQ(EINVAL, kfdp_ioctl_errno(self->owner, KFDP_IOC_QUERY, &q));
	q.reserved[1] = 0;
	q.entry_size = sizeof(qi[0]) - 8;
	EXPECT_EQ(EINVAL, kfdp_ioctl_errno(self->owner, KFDP_IOC_QUERY, &q));
	q.entry_size = sizeof(qi[0]);
	q.gpu_id = 0x9999;
	EXPECT_EQ(EINVAL, kfdp_ioctl_errno(self->owner, KFDP_IOC_QUERY, &q));
	q.gpu_id = 0;
	q.entries_ptr = (__u64)(uintptr_t)(self->pages + self->page);
	EXPECT_EQ(EFAULT, kfdp_ioctl_errno(self->owner, KFDP_IOC_QUERY, &q));

	f.flags = 1;
	EXPECT_EQ(EINVAL, kfdp_ioctl_errno(self->owner, KFDP_IOC_FREEZE, &f));
	f.flags = 0;
	f.status = 1;
	EXPECT_EQ(EINVAL, kfdp_ioctl_errno(self->owner, KFDP_IOC_FREEZE, &f));
	f.status = 0;
	f.gpu_id = 0x9999;
	EXPECT_EQ(EINVAL, kfdp_ioctl_errno(self->owner, KFDP_IOC_FREEZE, &f));
	f.gpu_id = 0;
	f.handle = self->handle + 1000;
	EXPECT_EQ(EINVAL, kfdp_ioctl_errno(self->owner, KFDP_IOC_FREEZE, &f));
	f.handle = self->handle;
	EXPECT_EQ(EINVAL, kfdp_ioctl_errno(self->owner, KFDP_IOC_THAW, &f))
		TH_LOG("THAW without FREEZE");
	EXPECT_EQ(EFAULT, kfdp_ioctl_errno(self->owner, KFDP_IOC_FREEZE,
					   self->pages + self->page));
	UNCHANGED();
}

TEST_F(bad, tenant_ioctls)
{
	struct kfdp_sim_queue_create c = { .node = 0, .queue_type = KFDP_QT_COMPUTE };
	struct kfdp_sim_queue_destroy d = { .queue_id = 999 };
	struct kfdp_sim_queue_status s = { .queue_id = 999 };

	c.node = kfdp_sim_nodes();	/* one past the last */
	EXPECT_EQ(EINVAL, kfdp_ioctl_errno(self->tenant, KFDP_SIM_IOC_CREATE_QUEUE, &c));
	c.node = 0;
	c.queue_type = 7;
	EXPECT_EQ(EINVAL, kfdp_ioctl_errno(self->tenant, KFDP_SIM_IOC_CREATE_QUEUE, &c));
	c.queue_type = 0;
	c.priority = 16;
	EXPECT_EQ(EINVAL, kfdp_ioctl_errno(self->tenant, KFDP_SIM_IOC_CREATE_QUEUE, &c));
	c.priority = 0;
	c.reserved1 = 1;
	EXPECT_EQ(EINVAL, kfdp_ioctl_errno(self->tenant, KFDP_SIM_IOC_CREATE_QUEUE, &c));
	EXPECT_EQ(ENOENT, kfdp_ioctl_errno(self->tenant, KFDP_SIM_IOC_DESTROY_QUEUE, &d));
	d.reserved = 1;
	d.queue_id = self->q[1];
	EXPECT_EQ(EINVAL, kfdp_ioctl_errno(self->tenant, KFDP_SIM_IOC_DESTROY_QUEUE, &d));
	EXPECT_EQ(ENOENT, kfdp_ioctl_errno(self->tenant, KFDP_SIM_IOC_QUEUE_STATUS, &s));
	s.queue_id = self->q[1];
	s.reserved[0] = 1;
	EXPECT_EQ(EINVAL, kfdp_ioctl_errno(self->tenant, KFDP_SIM_IOC_QUEUE_STATUS, &s));
	EXPECT_EQ(ENOTTY, kfdp_ioctl_errno(self->tenant, KFDP_IOC_INFO, &s))
		TH_LOG("the tenant device has only the tenant ioctls");
	EXPECT_EQ(ENOTTY, kfdp_ioctl_errno(self->owner, KFDP_SIM_IOC_QUEUE_STATUS, &s))
		TH_LOG("and the owner device none of them");
	UNCHANGED();
}

/* A tenant's queue limit is a clear ENOSPC, and the process survives it. */
TEST_F(bad, queue_limit)
{
	int t = kfdp_tenant_open(), i, q = 0;

	ASSERT_LE(0, t);
	for (i = 0; i < 1024 && q >= 0; i++)
		q = kfdp_queue_create(t, KFDP_SIM_MES, KFDP_QT_SDMA);
	EXPECT_LE(0, q);
	EXPECT_EQ(-ENOSPC, kfdp_queue_create(t, KFDP_SIM_MES, KFDP_QT_SDMA));
	EXPECT_EQ(0, kfdp_queue_destroy(t, 5));
	EXPECT_EQ(5, kfdp_queue_create(t, KFDP_SIM_MES, KFDP_QT_SDMA)) TH_LOG("lowest free id");
	close(t);
	/* 1024 MES queues were mapped and unmapped: one call each, and more. */
	self->before.updates[1] = kfdp_node_updates(1);
	UNCHANGED();
}

TEST_HARNESS_MAIN
