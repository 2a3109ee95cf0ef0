// SPDX-License-Identifier: GPL-2.0
/*
 * The hardware validation kit's checks (Documentation/hardware-validation.rst).
 *
 * On a host with an AMD GPU and ROCm's HSA runtime they drive real queues
 * running the kit's GPU workloads (tests/hw/kernels); elsewhere each one
 * SKIPs with the reason. With KFDP_HW_DRIVER=sim they run as a dry run on
 * kfd_preempt's simulated node, where a spinning queue's progress is the
 * simulated queue's retired work; a check the model cannot express SKIPs
 * there and says so.
 *
 * Environment: KFDP_HW_KERNELS (code objects), KFDP_HW_CYCLES (preempt/
 * resume cycles of the state check, default 10000), KFDP_HW_QUEUES and
 * KFDP_HW_PROCESSES (the batch check's K over P, default 8 over 4),
 * KFDP_HW_DESTRUCTIVE=1 (allow the preemption-timeout check on hardware).
 */
#define _GNU_SOURCE
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "kfdp_sim.h"
#include "kfdp_test.h"
#include "kselftest_harness.h"
#include "kit.h"
#include "kit_hsa.h"
#include "rls.h"

#define PROGRESS_MS 5000	/* a running queue moves within this */
#define STILL_MS 100		/* a preempted queue stays still this long */

static long env_long(const char *name, long dflt)
{
	const char *v = getenv(name);

	return v && *v ? strtol(v, NULL, 0) : dflt;
}

static int write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC), r = 0;

	if (fd < 0)
		return -errno;
	if (write(fd, text, strlen(text)) < 0)
		r = -errno;
	close(fd);
	return r;
}

/* The driver to run, or NULL with *why set. */
static const struct kit_driver *driver_or_skip(const char **why)
{
	const struct kit_driver *drv = kit_driver();

	*why = drv ? drv->absent() : "KFDP_HW_DRIVER must be hsa or sim";
	return *why ? NULL : drv;
}

/*
 * Every check runs with the driver KFDP_HW_DRIVER names, or SKIPs with why
 * it cannot run here. The timeouts are for real GPUs: 10,000 cycles of the
 * state check take tens of seconds at the default min_preempt_interval_us.
 */
FIXTURE(kit) {
	const struct kit_driver *drv;
};

FIXTURE_SETUP(kit)
{
	const char *why;

	self->drv = driver_or_skip(&why);
	if (!self->drv)
		SKIP(return, "%s", why);
}

FIXTURE_TEARDOWN(kit)
{
}

static int is_sim(const struct kit_driver *drv)
{
	return drv == &kit_sim_driver;
}

/* Owner, tenant and handle of one check. */
struct setup {
	int owner;
	__u32 handle;
	struct kit_tenant t;
};

static int setup_open(struct setup *s, const struct kit_driver *drv)
{
	int r;

	memset(s, 0, sizeof(*s));
	s->t.drv = drv;
	s->t.fd = -1;
	s->owner = open(KFDP_DEV, O_RDWR | O_CLOEXEC);
	if (s->owner < 0)
		return -errno;
	r = drv->open(&s->t);
	if (r)
		return r;
	r = kit_attach(s->owner, &s->t);
	if (r < 0)
		return r;
	s->handle = r;
	return 0;
}

static void setup_close(struct setup *s)
{
	if (s->owner >= 0)
		close(s->owner);
	s->owner = -1;
	if (s->t.drv)
		s->t.drv->close(&s->t);
}

static __u64 progress(struct kit_tenant *t, struct kit_queue *q)
{
	__u64 v = 0;

	t->drv->progress(t, q, &v);
	return v;
}

/* The queue does not move for STILL_MS. */
static int stays_still(struct kit_tenant *t, struct kit_queue *q)
{
	__u64 a = progress(t, q);

	kit_sleep_ms(STILL_MS);
	return progress(t, q) == a;
}

static int moves(struct kit_tenant *t, struct kit_queue *q)
{
	__u64 a = progress(t, q);

	return kit_wait_progress(t, q, a, PROGRESS_MS) > a;
}

/* WATCH and SAMPLE one queue: its activity record, or -errno. */
static int watch_and_sample(int owner, __u32 handle, const struct kit_queue *q,
			    struct kfdp_activity *act)
{
	struct kfdp_queue_ref r = { handle, q->gpu_id, q->queue_id, 0 };
	struct kfdp_watch w = {
		.entries_ptr = (__u64)(uintptr_t)&r, .num_entries = 1, .entry_size = sizeof(r),
	};
	struct kfdp_sample smp = {
		.entries_ptr = (__u64)(uintptr_t)act, .entry_size = sizeof(*act), .capacity = 1,
	};

	if (ioctl(owner, KFDP_IOC_WATCH, &w) || (r.status && r.status != KFDP_R_ALREADY))
		return r.status < 0 ? r.status : -errno;
	if (ioctl(owner, KFDP_IOC_SAMPLE, &smp))
		return -errno;
	return smp.num_watches == 1 ? 0 : -ENOENT;
}

/*
 * Activity detection on a real AQL queue (ABI 1.2): WATCH pins the
 * runtime's read and write dispatch ids; an idle queue is not pending; an
 * ARMed ANY_BUSY wakes its eventfd when a dispatch is published; the read
 * index catches up once the dispatch completed (its delay is
 * kfdp-hw-probe's rptr_writeback). The simulated driver's queues have no
 * rings: sim_activity_test covers the same on simulated ring queues.
 */
TEST_F_TIMEOUT(kit, activity_sees_dispatches, 120)
{
	struct kfdp_arm arm = { .condition = KFDP_ARM_ANY_BUSY, .period_us = 50 };
	struct pollfd woken = { .events = POLLIN };
	struct kfdp_activity act;
	struct kit_kernel k;
	struct kit_queue q;
	struct setup s;
	struct kit_gpu *g;
	hsa_signal_t done;
	hsa_queue_t *hq;
	uint64_t *stamps;
	char why[256];
	int efd, i;

	if (is_sim(self->drv))
		SKIP(return, "the simulated driver's queues have no rings (sim_activity_test covers ring queues)");
	ASSERT_EQ(0, setup_open(&s, self->drv));
	g = kit_hsa_gpu(&s.t);
	ASSERT_EQ(0, kit_gpu_kernel(g, "stamp", &k, why, sizeof(why))) TH_LOG("%s", why);
	stamps = kit_gpu_alloc(g, 64 * sizeof(*stamps));
	hq = kit_gpu_queue(g, HSA_QUEUE_TYPE_MULTI);
	ASSERT_TRUE(stamps && hq);
	ASSERT_EQ(0, kit_hsa_identify(s.owner, s.handle, hq->base_address, &q));
	ASSERT_EQ(0, watch_and_sample(s.owner, s.handle, &q, &act))
		TH_LOG("WATCH of an AQL queue of the runtime");
	EXPECT_EQ(0, act.flags & KFDP_ACT_PENDING) TH_LOG("an idle queue is pending");
	efd = eventfd(0, EFD_CLOEXEC);
	ASSERT_LE(0, efd);
	arm.eventfd = efd;
	woken.fd = efd;
	ASSERT_EQ(0, ioctl(s.owner, KFDP_IOC_ARM, &arm));
	ASSERT_EQ(HSA_STATUS_SUCCESS, hsa.hsa_signal_create(1, 0, NULL, &done));
	ASSERT_EQ(0, kit_gpu_stamp(g, &k, hq, stamps, 0, done));
	EXPECT_EQ(1, poll(&woken, 1, 1000)) TH_LOG("ANY_BUSY did not see the dispatch");
	ASSERT_EQ(0, kit_gpu_wait(done, 10000));
	/* The CP writes the read index back after the completion signal. */
	for (i = 0; i < 1000; i++) {
		ASSERT_EQ(0, watch_and_sample(s.owner, s.handle, &q, &act));
		if (!(act.flags & KFDP_ACT_PENDING))
			break;
		kit_sleep_ms(1);
	}
	EXPECT_EQ(0, act.flags & KFDP_ACT_PENDING) TH_LOG("read index %llu, write index %llu",
							  act.read_index, act.write_index);
	EXPECT_EQ(act.write_index, act.read_index);
	close(efd);
	hsa.hsa_signal_destroy(done);
	hsa.hsa_queue_destroy(hq);
	kit_gpu_kernel_free(&k);
	setup_close(&s);
}

/* Preempt stops a spinning queue's progress and resume restarts it. */
TEST_F_TIMEOUT(kit, progress_stops_while_preempted, 120)
{
	const struct kit_driver *drv;
	struct kit_queue q;
	struct setup s;

	drv = self->drv;
	ASSERT_EQ(0, setup_open(&s, drv));
	ASSERT_EQ(0, drv->spin(&s.t, s.owner, s.handle, &q));
	ASSERT_TRUE(moves(&s.t, &q)) TH_LOG("the workload never ran");
	ASSERT_EQ(0, kit_batch(s.owner, KFDP_IOC_PREEMPT, s.handle, &q, 1, NULL));
	EXPECT_TRUE(stays_still(&s.t, &q)) TH_LOG("progress while preempted");
	ASSERT_EQ(0, kit_batch(s.owner, KFDP_IOC_RESUME, s.handle, &q, 1, NULL));
	EXPECT_TRUE(moves(&s.t, &q)) TH_LOG("no progress after resume");
	setup_close(&s);
}

/*
 * The hardware form of the state check: the checksum kernel's result after
 * many preempt/resume cycles is bit-identical to an unpreempted run's.
 */
static void checksum_run(struct __test_metadata *_metadata, struct setup *s, long cycles)
{
	enum { GROUPS = 16, WG = 256, ROUNDS = 1 << 22 };
	struct kit_gpu *g = kit_hsa_gpu(&s->t);
	struct kit_kernel k;
	hsa_signal_t done;
	hsa_queue_t *hq;
	struct kit_queue q;
	__u32 *ref, *out;
	void *args;
	long done_cycles = 0;
	char why[256];
	int run;

	ASSERT_EQ(0, kit_gpu_kernel(g, "checksum", &k, why, sizeof(why))) TH_LOG("%s", why);
	ref = kit_gpu_alloc(g, GROUPS * WG * 4);
	out = kit_gpu_alloc(g, GROUPS * WG * 4);
	args = kit_gpu_kernarg(g, k.kernarg_size);
	hq = kit_gpu_queue(g, HSA_QUEUE_TYPE_MULTI);
	ASSERT_TRUE(ref && out && args && hq);
	ASSERT_EQ(0, kit_hsa_identify(s->owner, s->handle, hq->base_address, &q));
	ASSERT_EQ(HSA_STATUS_SUCCESS, hsa.hsa_signal_create(1, 0, NULL, &done));
	/* Run 0 is the reference; then as many runs as the cycles need. */
	for (run = 0; run == 0 || done_cycles < cycles; run++) {
		__u32 *dst = run ? out : ref;
		/* The dynamic LDS starts after the kernel's static LDS. */
		struct { void *out; __u32 lds, rounds; } a = {
			dst, k.group_size, ROUNDS,
		};

		memcpy(args, &a, sizeof(a));
		hsa.hsa_signal_store_relaxed(done, 1);
		kit_gpu_dispatch(hq, &k, args, GROUPS * WG, WG, WG * 4, done);
		while (run && hsa.hsa_signal_load_relaxed(done) >= 1 && done_cycles < cycles) {
			ASSERT_EQ(0, kit_batch(s->owner, KFDP_IOC_PREEMPT, s->handle, &q, 1, NULL));
			ASSERT_EQ(0, kit_batch(s->owner, KFDP_IOC_RESUME, s->handle, &q, 1, NULL));
			done_cycles++;
		}
		ASSERT_EQ(0, kit_gpu_wait(done, 600000)) TH_LOG("checksum run %d never finished", run);
		if (run)
			ASSERT_EQ(0, memcmp(ref, out, GROUPS * WG * 4))
				TH_LOG("run %d differs after %ld cycles", run, done_cycles);
	}
	TH_LOG("%ld preempt/resume cycles over %d runs, results identical", done_cycles, run - 1);
	hsa.hsa_signal_destroy(done);
	hsa.hsa_queue_destroy(hq);
	kit_gpu_kernel_free(&k);
}

/*
 * The simulated form: a preempted queue's saved work neither retires nor
 * disappears, cycle after cycle, and the model's conservation oracle holds.
 */
static void conservation_run(struct __test_metadata *_metadata, struct setup *s, long cycles)
{
	struct kfdp_sim_queue_status a, b;
	struct kit_queue q;
	long i;

	ASSERT_EQ(0, s->t.drv->spin(&s->t, s->owner, s->handle, &q));
	for (i = 0; i < cycles; i++) {
		ASSERT_EQ(0, kit_batch(s->owner, KFDP_IOC_PREEMPT, s->handle, &q, 1, NULL));
		memset(&a, 0, sizeof(a));
		memset(&b, 0, sizeof(b));
		a.queue_id = b.queue_id = q.queue_id;
		ASSERT_EQ(0, ioctl(s->t.fd, KFDP_SIM_IOC_QUEUE_STATUS, &a));
		/* The model retires work every millisecond a queue is mapped. */
		kit_sleep_ms(3);
		ASSERT_EQ(0, ioctl(s->t.fd, KFDP_SIM_IOC_QUEUE_STATUS, &b));
		ASSERT_EQ(a.retired, b.retired) TH_LOG("cycle %ld: work retired while preempted", i);
		ASSERT_EQ(a.in_flight, b.in_flight) TH_LOG("cycle %ld: saved work changed", i);
		ASSERT_EQ(0, kit_batch(s->owner, KFDP_IOC_RESUME, s->handle, &q, 1, NULL));
	}
	ASSERT_EQ(0, kfdp_sim_stat("conservation_errors"));
	TH_LOG("%ld preempt/resume cycles, no work lost", cycles);
}

/* Preempt/resume cycles leave a running computation's state intact. */
TEST_F_TIMEOUT(kit, state_survives_preempt_resume_cycles, 1800)
{
	const struct kit_driver *drv;
	struct setup s;

	drv = self->drv;
	ASSERT_EQ(0, setup_open(&s, drv));
	if (is_sim(drv))
		conservation_run(_metadata, &s, env_long("KFDP_HW_CYCLES", 200));
	else
		checksum_run(_metadata, &s, env_long("KFDP_HW_CYCLES", 10000));
	setup_close(&s);
}

/* Packets written and rung while the queue is preempted run after resume. */
TEST_F_TIMEOUT(kit, doorbell_while_preempted_runs_after_resume, 120)
{
	enum { N = 16 };
	const struct kit_driver *drv;
	struct kit_kernel k;
	struct kit_queue q;
	struct kit_gpu *g;
	hsa_signal_t done;
	hsa_queue_t *hq;
	struct setup s;
	char err[256];
	uint64_t *stamps;
	int i;

	drv = self->drv;
	if (is_sim(drv))
		SKIP(return, "the simulated node has no rings or doorbells to ring");
	ASSERT_EQ(0, setup_open(&s, drv));
	g = kit_hsa_gpu(&s.t);
	ASSERT_EQ(0, kit_gpu_kernel(g, "stamp", &k, err, sizeof(err))) TH_LOG("%s", err);
	stamps = kit_gpu_alloc(g, N * sizeof(*stamps));
	hq = kit_gpu_queue(g, HSA_QUEUE_TYPE_MULTI);
	ASSERT_TRUE(stamps && hq);
	ASSERT_EQ(HSA_STATUS_SUCCESS, hsa.hsa_signal_create(N, 0, NULL, &done));
	ASSERT_EQ(0, kit_hsa_identify(s.owner, s.handle, hq->base_address, &q));
	ASSERT_EQ(0, kit_batch(s.owner, KFDP_IOC_PREEMPT, s.handle, &q, 1, NULL));
	for (i = 0; i < N; i++)
		ASSERT_EQ(0, kit_gpu_stamp(g, &k, hq, stamps, i, done));
	kit_sleep_ms(STILL_MS);
	EXPECT_EQ(N, hsa.hsa_signal_load_relaxed(done)) TH_LOG("a dispatch ran while preempted");
	for (i = 0; i < N; i++)
		EXPECT_EQ(0, stamps[i]);
	ASSERT_EQ(0, kit_batch(s.owner, KFDP_IOC_RESUME, s.handle, &q, 1, NULL));
	/* Each dispatch decrements the signal once: all N ran, in order. */
	ASSERT_EQ(0, kit_gpu_wait(done, PROGRESS_MS)) TH_LOG("dispatches lost");
	for (i = 1; i < N; i++)
		EXPECT_LE(stamps[i - 1], stamps[i]);
	hsa.hsa_queue_destroy(hq);
	hsa.hsa_signal_destroy(done);
	kit_gpu_kernel_free(&k);
	setup_close(&s);
}

/* A child tenant: its queues' identities come back through a pipe. */
struct child {
	pid_t pid;
	int fd;		/* its tenant file, via pidfd_getfd */
	int ctl;	/* closing it ends the child */
	int nq;
	struct kit_queue qs[KIT_MAX_QUEUES];
};

static int child_start(const struct kit_driver *drv, struct child *c, int nq)
{
	int up[2], down[2], pidfd;
	int msg[2 + 2 * KIT_MAX_QUEUES];

	memset(c, 0, sizeof(*c));
	c->fd = -1;
	if (nq > KIT_MAX_QUEUES || pipe(up) || pipe(down))
		return -1;
	c->pid = fork();
	if (c->pid == 0) {
		struct setup s;
		char b;
		int i, r, fd;

		/*
		 * Only its own pipe ends: not the tenant files the parent holds
		 * for earlier children, which the runtime would see as its own.
		 */
		for (fd = 3; fd < 4096; fd++)
			if (fd != up[1] && fd != down[0])
				close(fd);
		r = setup_open(&s, drv);
		msg[0] = r ? r : s.t.fd;
		for (i = 0; !r && i < nq; i++) {
			struct kit_queue q;

			r = drv->spin(&s.t, s.owner, s.handle, &q);
			msg[2 + 2 * i] = q.gpu_id;
			msg[3 + 2 * i] = q.queue_id;
		}
		msg[1] = r;
		/* Its own owner only found the queue ids: drop it. */
		close(s.owner);
		if (write(up[1], msg, sizeof(msg)) != sizeof(msg))
			_exit(1);
		while (read(down[0], &b, 1) < 0 && errno == EINTR)
			;
		s.owner = -1;
		setup_close(&s);
		_exit(0);
	}
	close(up[1]);
	close(down[0]);
	c->ctl = down[1];
	if (c->pid < 0 || read(up[0], msg, sizeof(msg)) != sizeof(msg) || msg[0] < 0 || msg[1]) {
		close(up[0]);
		return -1;
	}
	close(up[0]);
	c->nq = nq;
	for (int i = 0; i < nq; i++) {
		c->qs[i].gpu_id = msg[2 + 2 * i];
		c->qs[i].queue_id = msg[3 + 2 * i];
	}
	pidfd = syscall(SYS_pidfd_open, c->pid, 0);
	if (pidfd < 0)
		return -1;
	c->fd = syscall(SYS_pidfd_getfd, pidfd, msg[0], 0);
	close(pidfd);
	return c->fd < 0 ? -1 : 0;
}

static void child_stop(struct child *c)
{
	if (c->pid <= 0)
		return;
	close(c->ctl);
	waitpid(c->pid, NULL, 0);
	if (c->fd >= 0)
		close(c->fd);
	c->pid = 0;
}

/*
 * What the firmware maps, for the batch check: on the simulated node the
 * number of queues mapped on node 0; on hardware, how many of @qs amdkfd's
 * runlist (debugfs kfd/rls) maps, by doorbell offset.
 */
static int firmware_mapped(const struct kit_driver *drv, int owner, __u32 *handles,
		  struct kit_queue *qs, int n)
{
	int i, count = 0;

	if (is_sim(drv))
		return kfdp_sim_stat("node0:mapped");
	for (i = 0; i < n; i++) {
		struct kfdp_queue_info info;
		int r = kit_query_one(owner, handles[i], &qs[i], &info);

		if (r)
			return r;
		r = kit_rls_maps(qs[i].gpu_id, info.doorbell_off);
		if (r < 0)
			return r;
		count += r;
	}
	return count;
}

/*
 * K queues over P processes preempted as one batch: one runlist update
 * per HWS node (one call per queue on MES), and what the firmware maps
 * agrees with QUERY before, during and after.
 */
TEST_F_TIMEOUT(kit, batch_one_runlist_update_per_node, 120)
{
	long k = env_long("KFDP_HW_QUEUES", 8), p = env_long("KFDP_HW_PROCESSES", 4);
	struct kit_queue qs[KIT_MAX_QUEUES];
	__u32 handles[KIT_MAX_QUEUES], nodes[KIT_MAX_QUEUES];
	struct kfdp_queue_ref refs[KIT_MAX_QUEUES];
	const struct kit_driver *drv;
	struct child cs[16];
	struct kfdp_batch b;
	int i, j, n = 0, nnodes = 0, mes = 0, before, owner;

	drv = self->drv;
	if (!is_sim(drv) && access(KIT_RLS, R_OK))
		SKIP(return, KIT_RLS " is not readable: mount debugfs, run as root");
	ASSERT_TRUE(p >= 1 && p <= 16 && k >= p && k <= KIT_MAX_QUEUES);
	owner = open(KFDP_DEV, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, owner);
	for (i = 0; i < p; i++) {
		struct kit_tenant t = { .drv = drv, .kind = is_sim(drv) ?
					KFDP_TARGET_SIM_FD : KFDP_TARGET_KFD_FD };
		int h;

		ASSERT_EQ(0, child_start(drv, &cs[i], k / p + (i < k % p)));
		t.fd = cs[i].fd;
		h = kit_attach(owner, &t);
		ASSERT_LT(0, h);
		for (j = 0; j < cs[i].nq; j++, n++) {
			struct kfdp_queue_info info;

			qs[n] = cs[i].qs[j];
			handles[n] = h;
			refs[n] = (struct kfdp_queue_ref){
				.handle = h, .gpu_id = qs[n].gpu_id, .queue_id = qs[n].queue_id,
			};
			ASSERT_EQ(0, kit_query_one(owner, h, &qs[n], &info));
			mes |= info.gc_ip_version >= 0x0b0000;
		}
	}
	for (i = 0; i < n; i++) {
		for (j = 0; j < nnodes && nodes[j] != qs[i].gpu_id; j++)
			;
		if (j == nnodes)
			nodes[nnodes++] = qs[i].gpu_id;
	}
	before = firmware_mapped(drv, owner, handles, qs, n);
	ASSERT_LE(n, before);
	memset(&b, 0, sizeof(b));
	b.entries_ptr = (__u64)(uintptr_t)refs;
	b.num_entries = n;
	b.entry_size = sizeof(refs[0]);
	ASSERT_EQ(0, ioctl(owner, KFDP_IOC_PREEMPT, &b));
	ASSERT_EQ(n, b.num_ok);
	EXPECT_EQ(mes ? n : nnodes, b.num_runlist_updates);
	EXPECT_EQ(before - n, firmware_mapped(drv, owner, handles, qs, n));
	for (i = 0; i < n; i++) {
		struct kfdp_queue_info info;

		ASSERT_EQ(0, kit_query_one(owner, handles[i], &qs[i], &info));
		EXPECT_EQ(0, info.state & KFDP_QS_ACTIVE);
		EXPECT_TRUE(info.state & KFDP_QS_OWNED);
	}
	b.num_ok = 0;
	ASSERT_EQ(0, ioctl(owner, KFDP_IOC_RESUME, &b));
	ASSERT_EQ(n, b.num_ok);
	EXPECT_EQ(mes ? n : nnodes, b.num_runlist_updates);
	EXPECT_EQ(before, firmware_mapped(drv, owner, handles, qs, n));
	close(owner);
	/* Last first: a child holds the pipes of those forked before it. */
	for (i = p - 1; i >= 0; i--)
		child_stop(&cs[i]);
}

/*
 * FREEZE stops a tenant's running queue and holds back a queue it creates
 * while frozen, until THAW.
 */
TEST_F_TIMEOUT(kit, freeze_holds_back_new_queue, 120)
{
	const struct kit_driver *drv;
	struct kit_queue running, q;
	struct kfdp_freeze f;
	struct setup s;

	drv = self->drv;
	ASSERT_EQ(0, setup_open(&s, drv));
	ASSERT_EQ(0, drv->spin(&s.t, s.owner, s.handle, &running));
	ASSERT_TRUE(moves(&s.t, &running)) TH_LOG("the workload never ran");
	memset(&f, 0, sizeof(f));
	f.handle = s.handle;
	ASSERT_EQ(0, ioctl(s.owner, KFDP_IOC_FREEZE, &f));
	ASSERT_EQ(0, f.status);
	EXPECT_TRUE(stays_still(&s.t, &running)) TH_LOG("a frozen tenant's queue ran");
	ASSERT_EQ(0, drv->spin(&s.t, s.owner, s.handle, &q));
	EXPECT_EQ(0, progress(&s.t, &q));
	EXPECT_TRUE(stays_still(&s.t, &q)) TH_LOG("a queue born frozen ran");
	EXPECT_EQ(0, progress(&s.t, &q));
	memset(&f, 0, sizeof(f));
	f.handle = s.handle;
	ASSERT_EQ(0, ioctl(s.owner, KFDP_IOC_THAW, &f));
	EXPECT_TRUE(moves(&s.t, &q)) TH_LOG("no progress after THAW");
	EXPECT_TRUE(moves(&s.t, &running)) TH_LOG("no progress after THAW");
	setup_close(&s);
}

/*
 * The tenant's own UPDATE_QUEUE and CU mask do not resume a preempted queue.
 * The narrowed mask keeps the first 16 CUs, which amdkfd spreads over every
 * XCC (bit i goes to XCC i % n), so no die is left without CUs; the full
 * mask comes back before the resume.
 */
TEST_F_TIMEOUT(kit, tenant_update_does_not_resume, 120)
{
	__u32 narrow[1] = { 0xffff }, full[32] = { 0 }, cus = 0, i;
	const struct kit_driver *drv;
	struct kfdp_queue_info info;
	struct kit_queue q;
	struct setup s;

	drv = self->drv;
	if (is_sim(drv))
		SKIP(return, "a simulated tenant has no UPDATE_QUEUE or CU mask (kfdp_amdkfd_hws covers both on amdkfd's code)");
	ASSERT_EQ(0, setup_open(&s, drv));
	ASSERT_EQ(HSA_STATUS_SUCCESS, hsa.hsa_agent_get_info(kit_hsa_gpu(&s.t)->agent,
		(hsa_agent_info_t)HSA_AMD_AGENT_INFO_COMPUTE_UNIT_COUNT, &cus));
	ASSERT_TRUE(cus >= 16 && cus <= 32 * 32);
	for (i = 0; i < cus; i++)
		full[i / 32] |= 1u << (i % 32);
	ASSERT_EQ(0, drv->spin(&s.t, s.owner, s.handle, &q));
	ASSERT_TRUE(moves(&s.t, &q));
	ASSERT_EQ(0, kit_batch(s.owner, KFDP_IOC_PREEMPT, s.handle, &q, 1, NULL));
	EXPECT_EQ(HSA_STATUS_SUCCESS,
		  hsa.hsa_amd_queue_set_priority(kit_hsa_queue(&q), HSA_AMD_QUEUE_PRIORITY_HIGH));
	EXPECT_EQ(HSA_STATUS_SUCCESS, hsa.hsa_amd_queue_cu_set_mask(kit_hsa_queue(&q), 32, narrow));
	EXPECT_TRUE(stays_still(&s.t, &q)) TH_LOG("the tenant's update resumed the queue");
	EXPECT_EQ(HSA_STATUS_SUCCESS,
		  hsa.hsa_amd_queue_cu_set_mask(kit_hsa_queue(&q), (cus + 31) / 32 * 32, full));
	EXPECT_TRUE(stays_still(&s.t, &q)) TH_LOG("the tenant's update resumed the queue");
	ASSERT_EQ(0, kit_query_one(s.owner, s.handle, &q, &info));
	EXPECT_TRUE(info.state & KFDP_QS_OWNED);
	ASSERT_EQ(0, kit_batch(s.owner, KFDP_IOC_RESUME, s.handle, &q, 1, NULL));
	EXPECT_TRUE(moves(&s.t, &q));
	setup_close(&s);
}

/* An owner killed while it holds a preemption leaves nothing preempted. */
TEST_F_TIMEOUT(kit, owner_killed_mid_preemption_resumes, 120)
{
	const struct kit_driver *drv;
	struct kit_queue q;
	struct setup s;
	int sync[2], status;
	pid_t pid;
	char b;

	drv = self->drv;
	ASSERT_EQ(0, setup_open(&s, drv));
	ASSERT_EQ(0, drv->spin(&s.t, s.owner, s.handle, &q));
	ASSERT_TRUE(moves(&s.t, &q));
	/* The test's own owner lets go; a child owner (a daemon) takes over. */
	close(s.owner);
	s.owner = -1;
	ASSERT_EQ(0, pipe(sync));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		int owner = open(KFDP_DEV, O_RDWR | O_CLOEXEC);
		int h = owner < 0 ? -1 : kit_attach(owner, &s.t);

		b = h > 0 && !kit_batch(owner, KFDP_IOC_PREEMPT, h, &q, 1, NULL);
		if (write(sync[1], &b, 1) != 1)
			_exit(1);
		for (;;)
			pause();
	}
	close(sync[1]);
	ASSERT_EQ(1, read(sync[0], &b, 1));
	ASSERT_EQ(1, b) TH_LOG("the child owner could not preempt");
	EXPECT_TRUE(stays_still(&s.t, &q));
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	EXPECT_TRUE(moves(&s.t, &q)) TH_LOG("still preempted after its owner died");
	close(sync[0]);
	setup_close(&s);
}

#define PREEMPTION_TIMEOUT "/sys/module/amdgpu/parameters/queue_preemption_timeout_ms"

/*
 * On hardware: a wide checksum dispatch preempted with amdgpu's
 * queue_preemption_timeout_ms at 1 ms (the saved value comes back right
 * after). Returns the PREEMPT's result, or 1 if it could not be set up.
 */
static int preempt_under_short_timeout(struct __test_metadata *_metadata, struct setup *s)
{
	enum { GROUPS = 1024, WG = 256 };
	struct kit_gpu *g = kit_hsa_gpu(&s->t);
	char saved[32] = "", err[256];
	struct kit_kernel k;
	struct kit_queue q;
	hsa_queue_t *hq;
	__u32 *out, *a;
	int fd, n, r;

	fd = open(PREEMPTION_TIMEOUT, O_RDONLY | O_CLOEXEC);
	n = fd < 0 ? -1 : read(fd, saved, sizeof(saved) - 1);
	if (fd >= 0)
		close(fd);
	if (n <= 0 || kit_gpu_kernel(g, "checksum", &k, err, sizeof(err)))
		return 1;
	saved[n] = 0;
	out = kit_gpu_alloc(g, GROUPS * WG * 4);
	a = kit_gpu_kernarg(g, k.kernarg_size);
	hq = kit_gpu_queue(g, HSA_QUEUE_TYPE_MULTI);
	if (!out || !a || !hq || kit_hsa_identify(s->owner, s->handle, hq->base_address, &q))
		return 1;
	memcpy(a, &out, sizeof(out));
	a[2] = k.group_size;
	a[3] = 1 << 24;
	kit_gpu_dispatch(hq, &k, a, GROUPS * WG, WG, WG * 4, (hsa_signal_t){ 0 });
	kit_sleep_ms(50);
	if (write_file(PREEMPTION_TIMEOUT, "1"))
		return 1;
	r = kit_batch(s->owner, KFDP_IOC_PREEMPT, s->handle, &q, 1, NULL);
	write_file(PREEMPTION_TIMEOUT, saved);
	TH_LOG("PREEMPT with a 1 ms preemption timeout: %d (timeout restored to %s)", r, saved);
	return r;
}

/*
 * A preemption the hardware does not complete in time: the node recovers
 * and another tenant's new work runs. On the simulated node the next unmap
 * fails (fail_unmaps). On hardware this needs KFDP_HW_DESTRUCTIVE=1 (amdkfd
 * may reset the queue or the GPU) and SKIPs if the preemption finished
 * within 1 ms anyway.
 */
TEST_F_TIMEOUT(kit, node_recovers_after_preemption_timeout, 120)
{
	const struct kit_driver *drv;
	struct kit_queue q, other;
	struct setup s, s2;
	int r;

	drv = self->drv;
	if (!is_sim(drv) && !getenv("KFDP_HW_DESTRUCTIVE"))
		SKIP(return, "can reset a queue or the GPU: set KFDP_HW_DESTRUCTIVE=1 on a drained host");
	ASSERT_EQ(0, setup_open(&s, drv));
	if (is_sim(drv)) {
		ASSERT_EQ(0, drv->spin(&s.t, s.owner, s.handle, &q));
		ASSERT_TRUE(moves(&s.t, &q));
		ASSERT_EQ(0, kfdp_knob_set(0, "fail_unmaps", 1));
		r = kit_batch(s.owner, KFDP_IOC_PREEMPT, s.handle, &q, 1, NULL);
		EXPECT_EQ(-EIO, r);
	} else {
		r = preempt_under_short_timeout(_metadata, &s);
		ASSERT_NE(1, r) TH_LOG("could not set up the wide dispatch or the timeout");
		if (r == 0)
			SKIP(goto out, "the preemption finished within 1 ms: no timeout to recover from");
	}
	/* Another tenant's new queue runs, and preempts and resumes. */
	ASSERT_EQ(0, setup_open(&s2, drv));
	ASSERT_EQ(0, drv->spin(&s2.t, s2.owner, s2.handle, &other));
	EXPECT_TRUE(moves(&s2.t, &other)) TH_LOG("the node did not recover");
	EXPECT_EQ(0, kit_batch(s2.owner, KFDP_IOC_PREEMPT, s2.handle, &other, 1, NULL));
	EXPECT_TRUE(stays_still(&s2.t, &other));
	EXPECT_EQ(0, kit_batch(s2.owner, KFDP_IOC_RESUME, s2.handle, &other, 1, NULL));
	EXPECT_TRUE(moves(&s2.t, &other));
	setup_close(&s2);
out:
	setup_close(&s);
}

/*
 * A cooperative (GWS) kernel survives preempt/resume cycles: every
 * workgroup finishes every round and none ever passes the barrier early.
 */
TEST_F_TIMEOUT(kit, cooperative_kernel_survives_preemption, 900)
{
	enum { GROUPS = 8, ROUNDS = 200000, CYCLES = 100 };
	const struct kit_driver *drv;
	struct kit_kernel k;
	struct kit_queue q;
	struct kit_gpu *g;
	hsa_signal_t done;
	hsa_queue_t *hq;
	struct setup s;
	char err[256];
	__u32 *out, *init, *a;
	int i;

	drv = self->drv;
	if (is_sim(drv))
		SKIP(return, "the simulated node has no global wave sync (GWS)");
	ASSERT_EQ(0, setup_open(&s, drv));
	g = kit_hsa_gpu(&s.t);
	/* ROCm's own device library avoids GWS barriers on these multi-die parts. */
	if (!strncmp(g->target, "gfx94", 5))
		SKIP(goto out, "%s: GWS barriers do not span its dies (ROCm uses none there)",
		     g->target);
	if (kit_gpu_kernel(g, "coop", &k, err, sizeof(err)))
		SKIP(goto out, "%s (gfx12 has no GWS)", err);
	hq = kit_gpu_queue(g, HSA_QUEUE_TYPE_COOPERATIVE);
	if (!hq)
		SKIP(goto out, "no cooperative queue (GWS) on %s", g->target);
	ASSERT_EQ(0, kit_hsa_identify(s.owner, s.handle, hq->base_address, &q));
	out = kit_gpu_alloc(g, 2 * GROUPS * sizeof(*out));
	init = kit_gpu_kernarg(g, k.kernarg_size);
	a = kit_gpu_kernarg(g, k.kernarg_size);
	ASSERT_TRUE(out && init && a);
	/* out, groups, rounds, init_only: the init dispatch first, alone. */
	memcpy(init, &out, sizeof(out));
	init[2] = GROUPS;
	init[4] = 1;
	memcpy(a, init, 4 * sizeof(*a));
	a[3] = ROUNDS;
	a[4] = 0;
	ASSERT_EQ(HSA_STATUS_SUCCESS, hsa.hsa_signal_create(2, 0, NULL, &done));
	kit_gpu_dispatch(hq, &k, init, 64, 64, 0, done);
	kit_gpu_dispatch(hq, &k, a, GROUPS * 64, 64, 0, done);
	for (i = 0; i < CYCLES && hsa.hsa_signal_load_relaxed(done) >= 1; i++) {
		ASSERT_EQ(0, kit_batch(s.owner, KFDP_IOC_PREEMPT, s.handle, &q, 1, NULL));
		ASSERT_EQ(0, kit_batch(s.owner, KFDP_IOC_RESUME, s.handle, &q, 1, NULL));
	}
	ASSERT_EQ(0, kit_gpu_wait(done, 600000));
	for (i = 0; i < GROUPS; i++) {
		EXPECT_EQ(ROUNDS, out[i]) TH_LOG("workgroup %d", i);
		EXPECT_EQ(0, out[GROUPS + i]) TH_LOG("workgroup %d passed the barrier early", i);
	}
	TH_LOG("%d cycles during the cooperative kernel", i);
	hsa.hsa_signal_destroy(done);
	hsa.hsa_queue_destroy(hq);
	kit_gpu_kernel_free(&k);
out:
	setup_close(&s);
}

TEST_HARNESS_MAIN
