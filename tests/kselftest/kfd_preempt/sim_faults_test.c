// SPDX-License-Identifier: GPL-2.0
/*
 * Injected faults on the simulated node (debugfs knobs): an unmap that
 * times out (the scheduler hangs, the node resets), a map that fails, and
 * slow cycles while other threads destroy queues and tenants exit. Nothing
 * may be reactivated that amdkfd would not reactivate, and nothing may be
 * left suspended or mapped wrongly.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>

#include "kfdp_sim.h"
#include "kselftest_harness.h"

FIXTURE(fault) {
	int owner, tenant, handle, node;
	int q[3];
};

FIXTURE_VARIANT(fault) {
	int node;
};

FIXTURE_VARIANT_ADD(fault, hws) { .node = KFDP_SIM_HWS };
FIXTURE_VARIANT_ADD(fault, mes) { .node = KFDP_SIM_MES };

FIXTURE_SETUP(fault)
{
	const char *why = kfdp_sim_absent();
	int i;

	self->owner = self->tenant = -1;
	if (why)
		SKIP(return, "%s", why);
	self->node = variant->node;
	self->handle = kfdp_owner_and_tenant(&self->owner, &self->tenant);
	ASSERT_LT(0, self->handle) TH_LOG("owner, tenant and ATTACH: %s", strerror(-self->handle));
	for (i = 0; i < 3; i++) {
		self->q[i] = kfdp_queue_create(self->tenant, self->node, KFDP_QT_COMPUTE);
		ASSERT_LE(0, self->q[i]);
	}
}

FIXTURE_TEARDOWN(fault)
{
	if (!kfdp_sim_absent()) {
		kfdp_knob_set(self->node, "fail_unmaps", 0);
		kfdp_knob_set(self->node, "fail_maps", 0);
		kfdp_knob_set(self->node, "delay_next_us", 0);
		kfdp_dbg_write("fail_node_lists", "0");
	}
	if (self->owner >= 0)
		close(self->owner);
	if (self->tenant >= 0)
		close(self->tenant);
	KFDP_EXPECT_SIM_CLEAN();
}

#define PREEMPT(q) kfdp_one(self->owner, KFDP_IOC_PREEMPT, self->handle, self->node, (q))
#define RESUME(q) kfdp_one(self->owner, KFDP_IOC_RESUME, self->handle, self->node, (q))
#define STATE(q) kfdp_queue_state(self->tenant, (q))

static long long node_resets(int node)
{
	char key[32];

	snprintf(key, sizeof(key), "node%d:resets", node);
	return kfdp_sim_stat(key);
}

TEST_F(fault, unmap_timeout_resets_node)
{
	long long r0 = node_resets(self->node);
	struct kfdp_sim_queue_status s1, s2;
	int fresh;

	ASSERT_EQ(0, kfdp_knob_set(self->node, "fail_unmaps", 1));
	EXPECT_EQ(-EIO, PREEMPT(self->q[0]));
	EXPECT_EQ(r0 + 1, node_resets(self->node));
	/* The mark is kept: the queue is suspended and reset. */
	EXPECT_EQ(KFDP_QS_SUSPENDED | KFDP_QS_RESET, STATE(self->q[0]));
	EXPECT_EQ(KFDP_QS_RESET, STATE(self->q[1])) TH_LOG("the whole node was reset");
	EXPECT_EQ(-EIO, PREEMPT(self->q[1])) TH_LOG("a reset queue cannot be preempted");
	/* RESUME ends the mark but reactivates nothing amdkfd reset. */
	EXPECT_EQ(-EIO, RESUME(self->q[0]));
	EXPECT_EQ(KFDP_QS_RESET, STATE(self->q[0]));
	ASSERT_EQ(0, kfdp_queue_status(self->tenant, self->q[1], &s1));
	kfdp_sleep_ms(10);
	ASSERT_EQ(0, kfdp_queue_status(self->tenant, self->q[1], &s2));
	EXPECT_EQ(s1.retired, s2.retired) TH_LOG("a reset queue makes no progress");
	/* The node itself works again for new queues. */
	fresh = kfdp_queue_create(self->tenant, self->node, KFDP_QT_COMPUTE);
	ASSERT_LE(0, fresh);
	EXPECT_EQ(KFDP_QS_ACTIVE, STATE(fresh));
	EXPECT_EQ(0, PREEMPT(fresh));
	EXPECT_EQ(0, RESUME(fresh));
	EXPECT_EQ(KFDP_QS_RESET, STATE(self->q[1]));
}

TEST_F(fault, map_failure)
{
	ASSERT_EQ(0, PREEMPT(self->q[0]));
	ASSERT_EQ(0, kfdp_knob_set(self->node, "fail_maps", 1));
	EXPECT_EQ(-EIO, RESUME(self->q[0]));
	/* Not suspended any more, but not on the hardware either. */
	EXPECT_EQ(0, STATE(self->q[0]));
	/* The next change of the node maps it. */
	ASSERT_EQ(0, PREEMPT(self->q[1]));
	ASSERT_EQ(0, RESUME(self->q[1]));
	/* HWS: the cycle maps every queue; MES calls are per queue. */
	EXPECT_EQ(self->node == KFDP_SIM_HWS ? KFDP_QS_ACTIVE : 0, STATE(self->q[0]));
	EXPECT_EQ(KFDP_QS_ACTIVE, STATE(self->q[1]));
	/* Its own next change maps it on MES. */
	ASSERT_EQ(0, PREEMPT(self->q[0]));
	ASSERT_EQ(0, RESUME(self->q[0]));
	EXPECT_EQ(KFDP_QS_ACTIVE, STATE(self->q[0]));
}

struct race {
	int owner, handle, node;
	int tenants[4];
	int qids[4][8];
	atomic_int stop;
	int bad_status;
};

static void *batcher(void *arg)
{
	struct race *r = arg;

	while (!atomic_load(&r->stop)) {
		struct kfdp_queue_ref refs[32];
		int t, i, n = 0;

		for (t = 0; t < 4; t++)
			for (i = 0; i < 8; i++)
				refs[n++] = kfdp_ref(r->handle + t, r->node, r->qids[t][i]);
		for (int cmd = 0; cmd < 2; cmd++) {
			if (kfdp_batch(r->owner, cmd ? KFDP_IOC_RESUME : KFDP_IOC_PREEMPT,
				       refs, n, 0, 0, NULL))
				r->bad_status = -1000;
			for (i = 0; i < n; i++) {
				int s = refs[i].status;

				/*
				 * EXTERNAL: a queue destroyed while preempted
				 * and its id reused by the new one.
				 */
				if (s != 0 && s != KFDP_R_ALREADY && s != -ENOENT &&
				    s != -ESRCH && s != KFDP_R_DEFERRED && s != KFDP_R_EXTERNAL)
					r->bad_status = s;
			}
		}
	}
	return NULL;
}

/* Slow cycles while queues are destroyed and tenants exit underneath. */
TEST_F(fault, delays_with_concurrent_destroy_and_exit)
{
	struct race r = { .owner = self->owner, .node = self->node };
	pthread_t th;
	int t, i, round;

	/* Handles are consecutive for new targets of one owner. */
	for (t = 0; t < 4; t++) {
		int h;

		r.tenants[t] = kfdp_tenant_open();
		ASSERT_LE(0, r.tenants[t]);
		h = kfdp_attach_sim(self->owner, r.tenants[t]);
		ASSERT_LT(0, h);
		if (t == 0)
			r.handle = h;
		ASSERT_EQ(r.handle + t, h);
		for (i = 0; i < 8; i++) {
			r.qids[t][i] = kfdp_queue_create(r.tenants[t], self->node, KFDP_QT_COMPUTE);
			ASSERT_LE(0, r.qids[t][i]);
		}
	}
	ASSERT_EQ(0, pthread_create(&th, NULL, batcher, &r));
	for (round = 0; round < 8; round++) {
		kfdp_knob_set(self->node, "delay_next_us", 2000);
		kfdp_sleep_ms(3);
		/* Destroy and re-create a queue of tenant 1... */
		ASSERT_EQ(0, kfdp_queue_destroy(r.tenants[1], r.qids[1][round]));
		ASSERT_LE(0, kfdp_queue_create(r.tenants[1], self->node, KFDP_QT_COMPUTE));
		/* ...and at round 4, tenant 2 goes away. */
		if (round == 4) {
			close(r.tenants[2]);
			r.tenants[2] = -1;
		}
	}
	/* Then every tenant of this process is torn down, as at exit. */
	kfdp_knob_set(self->node, "delay_next_us", 2000);
	ASSERT_EQ(0, kfdp_control("exit %d", getpid()));
	kfdp_sleep_ms(10);
	atomic_store(&r.stop, 1);
	pthread_join(th, NULL);
	EXPECT_EQ(0, r.bad_status);
	for (t = 0; t < 4; t++)
		if (r.tenants[t] >= 0)
			close(r.tenants[t]);
}

/*
 * A target's node list that cannot be allocated: a FREEZE of every node
 * fails with ENOMEM as a whole and freezes no node, rather than freezing
 * the nodes a shorter list named and reporting success.
 */
TEST_F(fault, freeze_of_all_nodes_without_memory)
{
	struct kfdp_freeze f;
	int i;

	ASSERT_EQ(0, kfdp_dbg_write("fail_node_lists", "1"));
	EXPECT_EQ(ENOMEM, kfdp_freeze(self->owner, KFDP_IOC_FREEZE, self->handle, 0, &f));
	for (i = 0; i < 3; i++)
		EXPECT_EQ(KFDP_QS_ACTIVE, STATE(self->q[i])) TH_LOG("queue %d", i);
	/* The injection is spent: the same call now freezes, and thaws. */
	ASSERT_EQ(0, kfdp_freeze(self->owner, KFDP_IOC_FREEZE, self->handle, 0, &f));
	EXPECT_EQ(0, f.status);
	EXPECT_NE(0, STATE(self->q[0]) & KFDP_QS_EVICTED);
	ASSERT_EQ(0, kfdp_freeze(self->owner, KFDP_IOC_THAW, self->handle, 0, &f));
	EXPECT_EQ(KFDP_QS_ACTIVE, STATE(self->q[0]));
}

TEST_HARNESS_MAIN
