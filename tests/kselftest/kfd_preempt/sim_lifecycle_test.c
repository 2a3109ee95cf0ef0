// SPDX-License-Identifier: GPL-2.0
/*
 * Processes coming and going around preemptions, on the simulated node:
 * tenants that exit or are killed while preempted or frozen, queues
 * destroyed while preempted, daemons killed between and during batches,
 * and module unload while files are open. Afterwards nothing may stay
 * suspended, mapped wrongly, or counted twice.
 */
#define _GNU_SOURCE
#include <pthread.h>

#include "kfdp_sim.h"
#include "kselftest_harness.h"

FIXTURE(life) {
	int owner;
	struct kfdp_child child;
	int handle;
};

FIXTURE_SETUP(life)
{
	const char *why = kfdp_sim_absent();

	self->owner = -1;
	self->child.pid = 0;
	if (why)
		SKIP(return, "%s", why);
	self->owner = kfdp_owner_open();
	ASSERT_LE(0, self->owner);
	ASSERT_EQ(0, kfdp_child_start(&self->child, KFDP_SIM_HWS, 4))
		TH_LOG("start a tenant and take its fd with pidfd_getfd");
	self->handle = kfdp_attach_sim(self->owner, self->child.fd);
	ASSERT_LT(0, self->handle);
}

FIXTURE_TEARDOWN(life)
{
	kfdp_child_stop(&self->child, 1);
	if (self->child.fd > 0)
		close(self->child.fd);
	if (self->owner >= 0)
		close(self->owner);
	KFDP_EXPECT_SIM_CLEAN();
}

static int preempt_all(int owner, __u32 handle, struct kfdp_child *c, __u32 cmd)
{
	struct kfdp_queue_ref refs[64];
	struct kfdp_batch b;
	int i, e;

	for (i = 0; i < c->nq; i++)
		refs[i] = kfdp_ref(handle, KFDP_SIM_HWS, c->qids[i]);
	e = kfdp_batch(owner, cmd, refs, c->nq, 0, 0, &b);
	return e ? -e : (int)b.num_ok;
}

/* Queues of the child (through the dup'ed fd the daemon holds). */
static __u32 child_state(struct kfdp_child *c, int i)
{
	return kfdp_queue_state(c->fd, c->qids[i]);
}

/* self is FIXTURE_DATA(life), spelled out. */
static void tenant_dies(struct __test_metadata *_metadata, struct _test_data_life *self,
			int kill_it, int frozen)
{
	long long procs = kfdp_sim_stat("processes");
	int e;

	if (frozen) {
		ASSERT_EQ(0, kfdp_freeze(self->owner, KFDP_IOC_FREEZE, self->handle, 0, NULL));
	} else {
		ASSERT_EQ(4, preempt_all(self->owner, self->handle, &self->child,
					 KFDP_IOC_PREEMPT));
	}
	kfdp_child_stop(&self->child, kill_it);
	/* The daemon's dup of the fd does not keep the dead tenant's queues. */
	EXPECT_EQ(procs - 1, kfdp_sim_stat("processes"));
	EXPECT_EQ(ESRCH, kfdp_queue_status(self->child.fd, self->child.qids[0],
					   &(struct kfdp_sim_queue_status){ 0 }));
	if (frozen) {
		e = kfdp_freeze(self->owner, KFDP_IOC_THAW, self->handle, 0, NULL);
		EXPECT_EQ(ESRCH, e);
	} else {
		e = preempt_all(self->owner, self->handle, &self->child, KFDP_IOC_RESUME);
		EXPECT_EQ(0, e) TH_LOG("no entry may succeed on an exited target");
	}
	EXPECT_EQ(0, kfdp_sim_stat("suspended"));
	/* A new ATTACH of the dead tenant's fd is refused. */
	EXPECT_EQ(-ESRCH, kfdp_attach_sim(self->owner, self->child.fd));
}

TEST_F(life, tenant_exits_while_preempted) { tenant_dies(_metadata, self, 0, 0); }
TEST_F(life, tenant_killed_while_preempted) { tenant_dies(_metadata, self, 1, 0); }
TEST_F(life, tenant_exits_while_frozen) { tenant_dies(_metadata, self, 0, 1); }
TEST_F(life, tenant_killed_while_frozen) { tenant_dies(_metadata, self, 1, 1); }

/* The statuses of a batch on an exited tenant are ESRCH. */
TEST_F(life, exited_tenant_entries_esrch)
{
	struct kfdp_queue_ref r = kfdp_ref(self->handle, KFDP_SIM_HWS, self->child.qids[0]);

	ASSERT_EQ(0, kfdp_control("exit %d", self->child.pid));
	ASSERT_EQ(0, kfdp_batch(self->owner, KFDP_IOC_PREEMPT, &r, 1, 0, 0, NULL));
	EXPECT_EQ(-ESRCH, r.status);
}

TEST_F(life, queue_destroyed_while_preempted)
{
	__u32 q = self->child.qids[1];

	ASSERT_EQ(0, kfdp_one(self->owner, KFDP_IOC_PREEMPT, self->handle, KFDP_SIM_HWS, q));
	ASSERT_EQ(0, kfdp_control("destroy %d %u", self->child.pid, q));
	EXPECT_EQ(-ENOENT, kfdp_one(self->owner, KFDP_IOC_RESUME, self->handle, KFDP_SIM_HWS, q));
	EXPECT_EQ(0, kfdp_sim_stat("suspended"));
	EXPECT_EQ(KFDP_QS_ACTIVE, child_state(&self->child, 0)) TH_LOG("the others kept running");
}

/* A daemon that preempts, reports, then waits to be killed. */
static pid_t daemon_preempting(struct kfdp_child *c, int *ready)
{
	int p[2];
	pid_t pid;

	if (pipe(p))
		return -1;
	pid = fork();
	if (pid == 0) {
		int o = kfdp_owner_open();
		int h = kfdp_attach_sim(o, c->fd);
		char ok = preempt_all(o, h, c, KFDP_IOC_PREEMPT) == c->nq;

		if (write(p[1], &ok, 1) != 1)
			_exit(1);
		pause();
		_exit(0);
	}
	close(p[1]);
	*ready = p[0];
	return pid;
}

TEST_F(life, daemon_killed_between_batches)
{
	char ok = 0;
	int ready, i;
	pid_t d = daemon_preempting(&self->child, &ready);

	ASSERT_LT(0, d);
	ASSERT_EQ(1, read(ready, &ok, 1));
	ASSERT_EQ(1, ok);
	for (i = 0; i < self->child.nq; i++)
		EXPECT_EQ(KFDP_QS_SUSPENDED, child_state(&self->child, i));
	kill(d, SIGKILL);
	waitpid(d, NULL, 0);
	close(ready);
	/* release() resumed everything before the daemon's fd was gone. */
	for (i = 0; i < self->child.nq; i++)
		EXPECT_EQ(KFDP_QS_ACTIVE, child_state(&self->child, i));
}

TEST_F(life, daemon_killed_during_batches)
{
	int round;

	for (round = 0; round < 5; round++) {
		pid_t d = fork();
		int i;

		ASSERT_LE(0, d);
		if (d == 0) {
			int o = kfdp_owner_open();
			int h = kfdp_attach_sim(o, self->child.fd);

			for (;;) {
				preempt_all(o, h, &self->child, KFDP_IOC_PREEMPT);
				preempt_all(o, h, &self->child, KFDP_IOC_RESUME);
			}
		}
		/* Slow cycles widen the window in which the kill lands. */
		kfdp_knob_set(KFDP_SIM_HWS, "delay_next_us", 3000);
		kfdp_sleep_ms(5 + 7 * round);
		kill(d, SIGKILL);
		waitpid(d, NULL, 0);
		kfdp_knob_set(KFDP_SIM_HWS, "delay_next_us", 0);
		for (i = 0; i < self->child.nq; i++)
			EXPECT_EQ(KFDP_QS_ACTIVE, child_state(&self->child, i));
	}
}

/* While any kfd_preempt file is open, the module cannot go away. */
TEST_F(life, unload_refused_while_open)
{
	int tenant;

	EXPECT_EQ(-1, syscall(SYS_delete_module, "kfd_preempt", O_NONBLOCK));
	EXPECT_TRUE(errno == EWOULDBLOCK || errno == EBUSY) TH_LOG("errno %d", errno);
	close(self->owner);
	self->owner = -1;
	close(self->child.fd);
	self->child.fd = -1;
	kfdp_child_stop(&self->child, 0);
	tenant = kfdp_tenant_open();
	ASSERT_LE(0, tenant);
	EXPECT_EQ(-1, syscall(SYS_delete_module, "kfd_preempt", O_NONBLOCK))
		TH_LOG("a tenant file alone must hold the module too");
	close(tenant);
}

TEST_HARNESS_MAIN
