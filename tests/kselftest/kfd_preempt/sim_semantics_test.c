// SPDX-License-Identifier: GPL-2.0
/*
 * What schedulers rely on, end to end through the uapi on the simulated
 * node: a preempted queue stops and resumes with nothing lost, a batch
 * costs one runlist update per HWS node and one call per queue on MES,
 * statuses, flags, owners, leases, DETACH, close, FREEZE and THAW
 * (Documentation/simulated-node.rst). Each test runs on the HWS node and
 * on the MES node.
 */
#define _GNU_SOURCE
#include "kfdp_sim.h"
#include "kselftest_harness.h"

#define WORK_PER_TICK 16 /* the model's units per tick (src/backend/sim/model.rs) */

FIXTURE(sim) {
	int owner, tenant, handle, node;
};

FIXTURE_VARIANT(sim) {
	int node;
};

FIXTURE_VARIANT_ADD(sim, hws) { .node = KFDP_SIM_HWS };
FIXTURE_VARIANT_ADD(sim, mes) { .node = KFDP_SIM_MES };

FIXTURE_SETUP(sim)
{
	const char *why = kfdp_sim_absent();

	self->owner = self->tenant = -1;
	if (why)
		SKIP(return, "%s", why);
	self->node = variant->node;
	self->handle = kfdp_owner_and_tenant(&self->owner, &self->tenant);
	ASSERT_LT(0, self->handle) TH_LOG("owner, tenant and ATTACH: %s", strerror(-self->handle));
}

FIXTURE_TEARDOWN(sim)
{
	if (self->owner >= 0)
		close(self->owner);
	if (self->tenant >= 0)
		close(self->tenant);
	KFDP_EXPECT_SIM_CLEAN();
}

#define PREEMPT(q) kfdp_one(self->owner, KFDP_IOC_PREEMPT, self->handle, self->node, (q))
#define RESUME(q) kfdp_one(self->owner, KFDP_IOC_RESUME, self->handle, self->node, (q))
#define STATE(q) kfdp_queue_state(self->tenant, (q))

/* The kfdtest oracle: flat while preempted, continues after, nothing lost. */
TEST_F(sim, preempt_stops_progress_resume_continues)
{
	struct kfdp_sim_queue_status s0, s1, s2, s3;
	int q = kfdp_queue_create(self->tenant, self->node, KFDP_QT_COMPUTE);

	ASSERT_LE(0, q);
	kfdp_sleep_ms(20);
	ASSERT_EQ(0, kfdp_queue_status(self->tenant, q, &s0));
	EXPECT_TRUE(s0.state & KFDP_QS_ACTIVE);
	EXPECT_LT(0, s0.retired) TH_LOG("a mapped queue makes progress");

	ASSERT_EQ(0, PREEMPT(q));
	ASSERT_EQ(0, kfdp_queue_status(self->tenant, q, &s1));
	EXPECT_EQ(KFDP_QS_SUSPENDED, s1.state);
	kfdp_sleep_ms(30);
	ASSERT_EQ(0, kfdp_queue_status(self->tenant, q, &s2));
	EXPECT_EQ(s1.retired, s2.retired) TH_LOG("retired work moved while preempted");
	EXPECT_EQ(s1.in_flight, s2.in_flight) TH_LOG("saved work changed while preempted");

	ASSERT_EQ(0, RESUME(q));
	EXPECT_TRUE(STATE(q) & KFDP_QS_ACTIVE);
	kfdp_sleep_ms(20);
	ASSERT_EQ(0, kfdp_queue_status(self->tenant, q, &s3));
	/* The saved work retires first: nothing lost... */
	EXPECT_LE(s1.retired + s1.in_flight, s3.retired);
	/* ...and nothing run twice: the total grows by whole dispatches. */
	EXPECT_EQ(0, (s3.retired + s3.in_flight - s1.retired - s1.in_flight) % WORK_PER_TICK);
	EXPECT_EQ(0, kfdp_sim_stat("conservation_errors"));
}

/* K queues in P processes: 1 runlist update on HWS, K calls on MES. */
TEST_F(sim, batch_costs_one_update_per_node)
{
	enum { P = 4, QPP = 4, K = P * QPP };
	struct kfdp_queue_ref refs[K];
	struct kfdp_batch b;
	int tenants[P], i, j;
	long long before;

	for (i = 0; i < P; i++) {
		int h;

		tenants[i] = kfdp_tenant_open();
		ASSERT_LE(0, tenants[i]);
		h = kfdp_attach_sim(self->owner, tenants[i]);
		ASSERT_LT(0, h);
		for (j = 0; j < QPP; j++) {
			int q = kfdp_queue_create(tenants[i], self->node, KFDP_QT_COMPUTE);

			ASSERT_LE(0, q);
			refs[i * QPP + j] = kfdp_ref(h, self->node, q);
		}
	}

	before = kfdp_node_updates(self->node);
	ASSERT_EQ(0, kfdp_batch(self->owner, KFDP_IOC_PREEMPT, refs, K, 0, 0, &b));
	EXPECT_EQ(K, b.num_ok);
	EXPECT_EQ(self->node == KFDP_SIM_HWS ? 1 : K, b.num_runlist_updates);
	EXPECT_EQ(b.num_runlist_updates, kfdp_node_updates(self->node) - before)
		TH_LOG("num_runlist_updates must be what the node counted");
	for (i = 0; i < K; i++) {
		EXPECT_EQ(0, refs[i].status);
		EXPECT_EQ(KFDP_QS_SUSPENDED, kfdp_queue_state(tenants[i / QPP], refs[i].queue_id));
	}

	before = kfdp_node_updates(self->node);
	ASSERT_EQ(0, kfdp_batch(self->owner, KFDP_IOC_RESUME, refs, K, 0, 0, &b));
	EXPECT_EQ(K, b.num_ok);
	EXPECT_EQ(self->node == KFDP_SIM_HWS ? 1 : K, b.num_runlist_updates);
	EXPECT_EQ(b.num_runlist_updates, kfdp_node_updates(self->node) - before);
	for (i = 0; i < K; i++)
		EXPECT_EQ(KFDP_QS_ACTIVE, kfdp_queue_state(tenants[i / QPP], refs[i].queue_id));
	for (i = 0; i < P; i++)
		close(tenants[i]);
}

/* One batch over both nodes: each node is charged on its own terms. */
TEST_F(sim, batch_over_two_nodes)
{
	struct kfdp_queue_ref refs[5];
	struct kfdp_batch b;
	int i;

	for (i = 0; i < 5; i++) {
		int node = i < 2 ? KFDP_SIM_HWS : KFDP_SIM_MES;
		int q = kfdp_queue_create(self->tenant, node, KFDP_QT_COMPUTE);

		ASSERT_LE(0, q);
		refs[i] = kfdp_ref(self->handle, node, q);
	}
	ASSERT_EQ(0, kfdp_batch(self->owner, KFDP_IOC_PREEMPT, refs, 5, 0, 0, &b));
	EXPECT_EQ(5, b.num_ok);
	EXPECT_EQ(1 + 3, b.num_runlist_updates);
	ASSERT_EQ(0, kfdp_batch(self->owner, KFDP_IOC_RESUME, refs, 5, 0, 0, &b));
	EXPECT_EQ(1 + 3, b.num_runlist_updates);
}

TEST_F(sim, already)
{
	int q = kfdp_queue_create(self->tenant, self->node, KFDP_QT_COMPUTE);
	struct kfdp_queue_ref refs[2];
	long long before;

	ASSERT_LE(0, q);
	EXPECT_EQ(KFDP_R_ALREADY, RESUME(q)) TH_LOG("resume of a running queue");
	ASSERT_EQ(0, PREEMPT(q));
	before = kfdp_node_updates(self->node);
	EXPECT_EQ(KFDP_R_ALREADY, PREEMPT(q));
	EXPECT_EQ(before, kfdp_node_updates(self->node)) TH_LOG("ALREADY costs nothing");
	ASSERT_EQ(0, RESUME(q));

	refs[0] = refs[1] = kfdp_ref(self->handle, self->node, q);
	ASSERT_EQ(0, kfdp_batch(self->owner, KFDP_IOC_PREEMPT, refs, 2, 0, 0, NULL));
	EXPECT_EQ(0, refs[0].status);
	EXPECT_EQ(KFDP_R_ALREADY, refs[1].status) TH_LOG("a duplicate in one batch");
	ASSERT_EQ(0, RESUME(q));
}

/* RESUME while the process is evicted: the restore maps the queue. */
TEST_F(sim, deferred_by_memory_eviction)
{
	int q = kfdp_queue_create(self->tenant, self->node, KFDP_QT_COMPUTE);

	ASSERT_LE(0, q);
	ASSERT_EQ(0, PREEMPT(q));
	ASSERT_EQ(0, kfdp_control("evict %d %d", getpid(), self->node));
	EXPECT_EQ(KFDP_R_DEFERRED, RESUME(q));
	EXPECT_EQ(KFDP_QS_EVICTED, STATE(q)) TH_LOG("not suspended, not yet active");
	ASSERT_EQ(0, kfdp_control("restore %d %d", getpid(), self->node));
	EXPECT_EQ(KFDP_QS_ACTIVE, STATE(q));
}

/* The tenant resumed its own queue (debugger attach/detach). */
TEST_F(sim, external_resume_reported)
{
	int q = kfdp_queue_create(self->tenant, self->node, KFDP_QT_COMPUTE);

	ASSERT_LE(0, q);
	ASSERT_EQ(0, PREEMPT(q));
	ASSERT_EQ(0, kfdp_control("external_resume %d %d", getpid(), q));
	EXPECT_EQ(KFDP_QS_ACTIVE, STATE(q));
	EXPECT_EQ(KFDP_R_EXTERNAL, RESUME(q));
	/* Ownership was dropped: a new preemption is an ordinary one. */
	EXPECT_EQ(0, PREEMPT(q));
	EXPECT_EQ(0, RESUME(q));
}

TEST_F(sim, validate_only_changes_nothing)
{
	int q = kfdp_queue_create(self->tenant, self->node, KFDP_QT_COMPUTE);
	struct kfdp_queue_ref refs[2];
	struct kfdp_batch b;
	long long before;

	ASSERT_LE(0, q);
	refs[0] = kfdp_ref(self->handle, self->node, q);
	refs[1] = kfdp_ref(self->handle, self->node, 999);
	before = kfdp_node_updates(self->node);
	ASSERT_EQ(0, kfdp_batch(self->owner, KFDP_IOC_PREEMPT, refs, 2,
				KFDP_BATCH_VALIDATE_ONLY, 0, &b));
	EXPECT_EQ(0, refs[0].status);
	EXPECT_EQ(-ENOENT, refs[1].status);
	EXPECT_EQ(1, b.num_ok);
	EXPECT_EQ(0, b.num_runlist_updates);
	EXPECT_EQ(before, kfdp_node_updates(self->node));
	EXPECT_EQ(KFDP_QS_ACTIVE, STATE(q));
}

TEST_F(sim, all_or_nothing)
{
	int q = kfdp_queue_create(self->tenant, self->node, KFDP_QT_COMPUTE);
	int sdma = kfdp_queue_create(self->tenant, self->node, KFDP_QT_SDMA);
	struct kfdp_queue_ref refs[2];
	struct kfdp_batch b;
	long long before;

	ASSERT_LE(0, q);
	ASSERT_LE(0, sdma);
	refs[0] = kfdp_ref(self->handle, self->node, q);
	refs[1] = kfdp_ref(self->handle, self->node, sdma);
	before = kfdp_node_updates(self->node);
	ASSERT_EQ(0, kfdp_batch(self->owner, KFDP_IOC_PREEMPT, refs, 2,
				KFDP_BATCH_ALL_OR_NOTHING, 0, &b));
	EXPECT_EQ(0, b.num_ok);
	EXPECT_EQ(-ECANCELED, refs[0].status);
	EXPECT_EQ(-EOPNOTSUPP, refs[1].status) TH_LOG("SDMA queues are not preemptible");
	EXPECT_EQ(before, kfdp_node_updates(self->node));
	EXPECT_EQ(KFDP_QS_ACTIVE, STATE(q));

	/* Without the flag, the good entry goes through. */
	ASSERT_EQ(0, kfdp_batch(self->owner, KFDP_IOC_PREEMPT, refs, 2, 0, 0, &b));
	EXPECT_EQ(1, b.num_ok);
	EXPECT_EQ(KFDP_QS_SUSPENDED, STATE(q));
	ASSERT_EQ(0, RESUME(q));
}

/* No owner can see, resume or take over another owner's preemption. */
TEST_F(sim, owners_isolated)
{
	int q = kfdp_queue_create(self->tenant, self->node, KFDP_QT_COMPUTE);
	int other = kfdp_owner_open();
	struct kfdp_queue_info qi[4];
	struct kfdp_query query = {
		.entries_ptr = (__u64)(uintptr_t)qi, .entry_size = sizeof(qi[0]), .capacity = 4,
	};
	int h2;

	ASSERT_LE(0, q);
	ASSERT_LE(0, other);
	h2 = kfdp_attach_sim(other, self->tenant);
	ASSERT_LT(0, h2);
	ASSERT_EQ(0, PREEMPT(q));
	EXPECT_EQ(-EBUSY, kfdp_one(other, KFDP_IOC_PREEMPT, h2, self->node, q));
	EXPECT_EQ(-EBUSY, kfdp_one(other, KFDP_IOC_RESUME, h2, self->node, q));
	EXPECT_EQ(-EINVAL, kfdp_one(other, KFDP_IOC_RESUME, self->handle + 100, self->node, q))
		TH_LOG("a handle this owner does not have");
	query.handle = h2;
	ASSERT_EQ(0, ioctl(other, KFDP_IOC_QUERY, &query));
	ASSERT_EQ(1, query.num_written);
	EXPECT_EQ(KFDP_QS_SUSPENDED | KFDP_QS_OWNED_OTHER, qi[0].state);
	close(other);
	EXPECT_EQ(KFDP_QS_SUSPENDED, STATE(q)) TH_LOG("the other owner's close resumed ours");
	ASSERT_EQ(0, RESUME(q));
}

TEST_F(sim, lease_expires)
{
	int q = kfdp_queue_create(self->tenant, self->node, KFDP_QT_COMPUTE);
	struct kfdp_queue_ref r;

	ASSERT_LE(0, q);
	r = kfdp_ref(self->handle, self->node, q);
	ASSERT_EQ(0, kfdp_batch(self->owner, KFDP_IOC_PREEMPT, &r, 1, 0, 50, NULL));
	EXPECT_EQ(0, r.status);
	EXPECT_EQ(KFDP_QS_SUSPENDED, STATE(q));
	kfdp_sleep_ms(50 + KFDP_HOUSEKEEPING_MS);
	EXPECT_EQ(KFDP_QS_ACTIVE, STATE(q)) TH_LOG("the lease ended: resumed by the module");
	EXPECT_EQ(KFDP_R_ALREADY, RESUME(q)) TH_LOG("no longer this owner's");
}

TEST_F(sim, detach_resumes)
{
	int q = kfdp_queue_create(self->tenant, self->node, KFDP_QT_COMPUTE);
	struct kfdp_detach d = { .handle = self->handle };

	ASSERT_LE(0, q);
	ASSERT_EQ(0, PREEMPT(q));
	ASSERT_EQ(0, ioctl(self->owner, KFDP_IOC_DETACH, &d));
	EXPECT_EQ(KFDP_QS_ACTIVE, STATE(q));
	EXPECT_EQ(-EINVAL, PREEMPT(q)) TH_LOG("the handle is gone");
}

TEST_F(sim, close_resumes_and_thaws)
{
	int q = kfdp_queue_create(self->tenant, self->node, KFDP_QT_COMPUTE);
	int q2 = kfdp_queue_create(self->tenant, self->node, KFDP_QT_COMPUTE);

	ASSERT_LE(0, q);
	ASSERT_LE(0, q2);
	ASSERT_EQ(0, PREEMPT(q));
	ASSERT_EQ(0, kfdp_freeze(self->owner, KFDP_IOC_FREEZE, self->handle,
				 KFDP_SIM_GPU0 + self->node, NULL));
	EXPECT_EQ(KFDP_QS_EVICTED, STATE(q2));
	close(self->owner);
	self->owner = -1;
	EXPECT_EQ(KFDP_QS_ACTIVE, STATE(q));
	EXPECT_EQ(KFDP_QS_ACTIVE, STATE(q2));
}

/* FREEZE holds back queues created later, and nests with evictions. */
TEST_F(sim, freeze_nests_with_eviction)
{
	__u32 gpu = KFDP_SIM_GPU0 + self->node;
	struct kfdp_sim_queue_status s1, s2;
	struct kfdp_freeze f;
	int q = kfdp_queue_create(self->tenant, self->node, KFDP_QT_COMPUTE);
	int late;

	ASSERT_LE(0, q);
	ASSERT_EQ(0, kfdp_freeze(self->owner, KFDP_IOC_FREEZE, self->handle, gpu, &f));
	EXPECT_EQ(0, f.status);
	EXPECT_EQ(KFDP_QS_EVICTED, STATE(q));
	ASSERT_EQ(0, kfdp_queue_status(self->tenant, q, &s1));
	late = kfdp_queue_create(self->tenant, self->node, KFDP_QT_COMPUTE);
	ASSERT_LE(0, late);
	EXPECT_EQ(KFDP_QS_EVICTED, STATE(late)) TH_LOG("born frozen");

	ASSERT_EQ(0, kfdp_control("evict %d %d", getpid(), self->node));
	ASSERT_EQ(0, kfdp_freeze(self->owner, KFDP_IOC_THAW, self->handle, gpu, &f));
	EXPECT_EQ(0, f.status);
	EXPECT_EQ(KFDP_QS_EVICTED, STATE(q)) TH_LOG("the memory eviction still holds");
	kfdp_sleep_ms(10);
	ASSERT_EQ(0, kfdp_queue_status(self->tenant, q, &s2));
	EXPECT_EQ(s1.retired, s2.retired);
	ASSERT_EQ(0, kfdp_control("restore %d %d", getpid(), self->node));
	EXPECT_EQ(KFDP_QS_ACTIVE, STATE(q));
	EXPECT_EQ(KFDP_QS_ACTIVE, STATE(late));
	EXPECT_EQ(EINVAL, kfdp_freeze(self->owner, KFDP_IOC_THAW, self->handle, gpu, NULL))
		TH_LOG("nothing left to thaw");
}

/* Freezes nest per owner; gpu_id 0 freezes every node of the target. */
TEST_F(sim, freeze_nests_and_all_nodes)
{
	int q = kfdp_queue_create(self->tenant, self->node, KFDP_QT_COMPUTE);

	ASSERT_LE(0, q);
	ASSERT_EQ(0, kfdp_freeze(self->owner, KFDP_IOC_FREEZE, self->handle, 0, NULL));
	ASSERT_EQ(0, kfdp_freeze(self->owner, KFDP_IOC_FREEZE, self->handle,
				 KFDP_SIM_GPU0 + self->node, NULL));
	ASSERT_EQ(0, kfdp_freeze(self->owner, KFDP_IOC_THAW, self->handle, 0, NULL));
	EXPECT_EQ(KFDP_QS_EVICTED, STATE(q)) TH_LOG("one freeze of this node is left");
	ASSERT_EQ(0, kfdp_freeze(self->owner, KFDP_IOC_THAW, self->handle,
				 KFDP_SIM_GPU0 + self->node, NULL));
	EXPECT_EQ(KFDP_QS_ACTIVE, STATE(q));
}

TEST_F(sim, query_describes_queues)
{
	int q = kfdp_queue_create(self->tenant, self->node, KFDP_QT_COMPUTE);
	int q2 = kfdp_queue_create(self->tenant, self->node, KFDP_QT_COMPUTE);
	struct kfdp_queue_info qi[1];
	struct kfdp_query query = {
		.handle = self->handle, .gpu_id = KFDP_SIM_GPU0 + self->node,
		.entries_ptr = (__u64)(uintptr_t)qi, .entry_size = sizeof(qi[0]), .capacity = 1,
	};

	ASSERT_LE(0, q);
	ASSERT_LE(0, q2);
	ASSERT_EQ(0, PREEMPT(q));
	ASSERT_EQ(0, ioctl(self->owner, KFDP_IOC_QUERY, &query));
	EXPECT_EQ(2, query.num_queues) TH_LOG("num_queues counts past the capacity");
	EXPECT_EQ(1, query.num_written);
	EXPECT_EQ(KFDP_SIM_GPU0 + self->node, qi[0].gpu_id);
	EXPECT_EQ(q, qi[0].queue_id);
	EXPECT_EQ(KFDP_QT_COMPUTE, qi[0].queue_type);
	EXPECT_EQ(KFDP_QS_SUSPENDED | KFDP_QS_OWNED, qi[0].state);
	EXPECT_EQ(self->node == KFDP_SIM_HWS ? 0x090403 : 0x0b0000, qi[0].gc_ip_version);
	EXPECT_NE(0, qi[0].ring_base_address);
	EXPECT_EQ(0, qi[0].reserved[0] | qi[0].reserved[1]);
	ASSERT_EQ(0, RESUME(q));
}

TEST_HARNESS_MAIN
