// SPDX-License-Identifier: GPL-2.0
/*
 * Activity detection and workloads on the simulated node (ABI 1.2):
 * ring queues in the test's own memory, the node executing their
 * dispatches under the contention model, WATCH/UNWATCH/SAMPLE/ARM reading
 * the same indices a real queue has, and every bad input of the new
 * ioctls, each answered with its errno and changing nothing.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "kfdp_sim.h"
#include "kselftest_harness.h"

#define MS 1000000ull
#define PACKETS 16

/* One ring queue: its packets, and a page holding its two indices. */
struct ring {
	struct kfdp_sim_packet *pkt;
	__u64 *read_index;	/* written by the node: read with read_index() */
	__u64 *write_index;	/* written by us */
	__u32 queue_id;
};

static __u64 read_index(const struct ring *r)
{
	return __atomic_load_n(r->read_index, __ATOMIC_ACQUIRE);
}

static __u64 now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

/* Creates a ring queue on @node in the two zeroed pages at @mem. */
static int ring_create_at(int tenant, int node, char *mem, struct ring *r)
{
	long page = sysconf(_SC_PAGESIZE);
	struct kfdp_sim_ring_create c = { 0 };

	r->pkt = (struct kfdp_sim_packet *)mem;
	r->read_index = (__u64 *)(mem + page);
	r->write_index = (__u64 *)(mem + page + 64);
	c.node = node;
	c.priority = 7;
	c.ring_address = (__u64)(uintptr_t)r->pkt;
	c.read_index_address = (__u64)(uintptr_t)r->read_index;
	c.write_index_address = (__u64)(uintptr_t)r->write_index;
	c.ring_packets = PACKETS;
	if (ioctl(tenant, KFDP_SIM_IOC_CREATE_RING, &c))
		return -errno;
	r->queue_id = c.queue_id;
	return 0;
}

/* Creates a ring queue on @node; returns 0 or -errno. */
static int ring_create(int tenant, int node, struct ring *r)
{
	long page = sysconf(_SC_PAGESIZE);
	char *mem = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (mem == MAP_FAILED)
		return -errno;
	return ring_create_at(tenant, node, mem, r);
}

/* Unmaps @r's two pages and maps new zeroed ones at the same address. */
static int ring_memory_renew(struct ring *r)
{
	long page = sysconf(_SC_PAGESIZE);
	char *mem = (char *)r->pkt;

	if (munmap(mem, 2 * page))
		return -errno;
	if (mmap(mem, 2 * page, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0) != mem)
		return -EEXIST;
	return 0;
}

static int doorbell(int tenant, __u32 queue_id)
{
	struct kfdp_sim_doorbell d = { .queue_id = queue_id };

	return kfdp_ioctl_errno(tenant, KFDP_SIM_IOC_DOORBELL, &d);
}

/* Publishes one dispatch of @work_ns and rings; returns its index. */
static __u64 submit(int tenant, struct ring *r, __u64 work_ns, int ring_bell)
{
	__u64 i = *r->write_index;
	struct kfdp_sim_packet *p = &r->pkt[i % PACKETS];

	memset(p, 0, sizeof(*p));
	p->header = KFDP_SIM_PKT_DISPATCH;
	p->work_ns = work_ns;
	p->tag = i;
	__atomic_store_n(r->write_index, i + 1, __ATOMIC_RELEASE);
	if (ring_bell)
		doorbell(tenant, r->queue_id);
	return i;
}

/* Waits until the node retired packet @index; false after @ms. */
static int wait_retired(struct ring *r, __u64 index, long ms)
{
	__u64 end = now_ns() + ms * MS;

	while (__atomic_load_n(r->read_index, __ATOMIC_ACQUIRE) <= index) {
		if (now_ns() > end)
			return 0;
		kfdp_sleep_ms(1);
	}
	return 1;
}

static int watch(int owner, unsigned long cmd, struct kfdp_queue_ref *refs, __u32 n,
		 struct kfdp_watch *w)
{
	memset(w, 0, sizeof(*w));
	w->entries_ptr = (__u64)(uintptr_t)refs;
	w->num_entries = n;
	w->entry_size = sizeof(*refs);
	return kfdp_ioctl_errno(owner, cmd, w);
}

/* WATCH or UNWATCH of one queue: the ioctl's errno, else the status. */
static int watch_one(int owner, unsigned long cmd, __u32 handle, int node, __u32 qid)
{
	struct kfdp_queue_ref r = kfdp_ref(handle, node, qid);
	struct kfdp_watch w;
	int e = watch(owner, cmd, &r, 1, &w);

	return e ? -e : r.status;
}

static int sample(int owner, struct kfdp_activity *out, __u32 cap, struct kfdp_sample *s)
{
	memset(s, 0, sizeof(*s));
	s->entries_ptr = (__u64)(uintptr_t)out;
	s->entry_size = sizeof(*out);
	s->capacity = cap;
	return kfdp_ioctl_errno(owner, KFDP_IOC_SAMPLE, s);
}

static int arm(int owner, __u32 cond, int efd, __u32 period_us, __u32 idle_us)
{
	struct kfdp_arm a = {
		.condition = cond, .eventfd = efd, .period_us = period_us, .idle_us = idle_us,
	};

	return kfdp_ioctl_errno(owner, KFDP_IOC_ARM, &a);
}

/* Whether @efd was signalled within @ms (and reads it). */
static int signalled(int efd, int ms)
{
	struct pollfd p = { .fd = efd, .events = POLLIN };
	__u64 v;

	if (poll(&p, 1, ms) != 1)
		return 0;
	return read(efd, &v, sizeof(v)) == sizeof(v) && v == 1;
}

FIXTURE(act) {
	int owner, tenant, handle, efd;
	struct ring r;
};

FIXTURE_SETUP(act)
{
	const char *why = kfdp_sim_absent();

	self->owner = self->tenant = self->efd = -1;
	if (why)
		SKIP(return, "%s", why);
	self->handle = kfdp_owner_and_tenant(&self->owner, &self->tenant);
	ASSERT_LT(0, self->handle) TH_LOG("owner, tenant and ATTACH: %s", strerror(-self->handle));
	ASSERT_EQ(0, ring_create(self->tenant, KFDP_SIM_HWS, &self->r));
	self->efd = eventfd(0, EFD_CLOEXEC);
	ASSERT_LE(0, self->efd);
}

FIXTURE_TEARDOWN(act)
{
	if (self->owner >= 0)
		close(self->owner);
	if (self->tenant >= 0)
		close(self->tenant);
	if (self->efd >= 0)
		close(self->efd);
}

/* A ring queue's dispatches run and retire, with their times written back. */
TEST_F(act, ring_executes_dispatches)
{
	struct ring *r = &self->r;
	__u64 t0 = now_ns(), i;

	i = submit(self->tenant, r, 20 * MS, 1);
	submit(self->tenant, r, 30 * MS, 1);
	ASSERT_TRUE(wait_retired(r, i + 1, 5000));
	EXPECT_LE(t0, r->pkt[0].submit_ns);
	EXPECT_LE(r->pkt[0].submit_ns, r->pkt[0].start_ns);
	EXPECT_LE(r->pkt[0].start_ns + 20 * MS, r->pkt[0].end_ns);
	/* One at a time: the second starts when the first ends. */
	EXPECT_LE(r->pkt[0].end_ns, r->pkt[1].start_ns);
	EXPECT_LE(r->pkt[1].start_ns + 30 * MS, r->pkt[1].end_ns);
	EXPECT_EQ(0, r->pkt[0].tag);
	EXPECT_EQ(1, r->pkt[1].tag);
}

/*
 * The CWSR oracle on a dispatch: preempted mid-way it retires nothing, and
 * resumed it finishes the work it had left rather than starting again.
 */
TEST_F(act, preemption_saves_dispatch_progress)
{
	struct ring *r = &self->r;
	__u64 resumed;

	submit(self->tenant, r, 200 * MS, 1);
	kfdp_sleep_ms(100);
	ASSERT_EQ(0, kfdp_one(self->owner, KFDP_IOC_PREEMPT, self->handle, KFDP_SIM_HWS,
			      r->queue_id));
	kfdp_sleep_ms(300);
	EXPECT_EQ(0, read_index(r)) TH_LOG("retired while preempted");
	resumed = now_ns();
	ASSERT_EQ(0, kfdp_one(self->owner, KFDP_IOC_RESUME, self->handle, KFDP_SIM_HWS,
			      r->queue_id));
	ASSERT_TRUE(wait_retired(r, 0, 5000));
	/* Ran 200 ms in all: about 100 before and 100 after the resume. */
	EXPECT_LE(r->pkt[0].start_ns + 500 * MS, r->pkt[0].end_ns);
	EXPECT_GT(resumed + 190 * MS, r->pkt[0].end_ns) TH_LOG("restarted instead of resumed");
}

/* A doorbell of a preempted queue is dropped; the resume finds the packet. */
TEST_F(act, doorbell_while_preempted_runs_after_resume)
{
	struct ring *r = &self->r;

	ASSERT_EQ(0, kfdp_one(self->owner, KFDP_IOC_PREEMPT, self->handle, KFDP_SIM_HWS,
			      r->queue_id));
	submit(self->tenant, r, 5 * MS, 1);
	kfdp_sleep_ms(50);
	EXPECT_EQ(0, r->pkt[0].submit_ns) TH_LOG("the node saw a preempted queue's doorbell");
	EXPECT_EQ(0, read_index(r));
	ASSERT_EQ(0, kfdp_one(self->owner, KFDP_IOC_RESUME, self->handle, KFDP_SIM_HWS,
			      r->queue_id));
	ASSERT_TRUE(wait_retired(r, 0, 5000));
}

/*
 * The contention model: a short dispatch behind another queue's long one
 * waits for it; preempting the long one lets the short one run at once.
 */
TEST_F(act, contention_and_preemption)
{
	struct ring *be = &self->r, lc;

	ASSERT_EQ(0, ring_create(self->tenant, KFDP_SIM_HWS, &lc));
	submit(self->tenant, be, 300 * MS, 1);
	kfdp_sleep_ms(20);
	submit(self->tenant, &lc, 10 * MS, 1);
	ASSERT_TRUE(wait_retired(&lc, 0, 5000));
	EXPECT_LE(be->pkt[0].end_ns, lc.pkt[0].start_ns) TH_LOG("LC did not wait for BE");
	ASSERT_TRUE(wait_retired(be, 0, 5000));

	submit(self->tenant, be, 300 * MS, 1);
	kfdp_sleep_ms(20);
	submit(self->tenant, &lc, 10 * MS, 1);
	ASSERT_EQ(0, kfdp_one(self->owner, KFDP_IOC_PREEMPT, self->handle, KFDP_SIM_HWS,
			      be->queue_id));
	ASSERT_TRUE(wait_retired(&lc, 1, 5000));
	EXPECT_GT(be->pkt[1].start_ns + 300 * MS, lc.pkt[1].end_ns);
	EXPECT_EQ(1, read_index(be)) TH_LOG("BE retired while preempted");
	ASSERT_EQ(0, kfdp_one(self->owner, KFDP_IOC_RESUME, self->handle, KFDP_SIM_HWS,
			      be->queue_id));
	ASSERT_TRUE(wait_retired(be, 1, 5000));
}

/* SAMPLE reads the indices as the tenant wrote them, and flags pending work. */
TEST_F(act, sample_reports_pending_work)
{
	struct kfdp_activity a[2];
	struct kfdp_sample s;
	struct ring *r = &self->r;

	ASSERT_EQ(0, watch_one(self->owner, KFDP_IOC_WATCH, self->handle, KFDP_SIM_HWS,
			       r->queue_id));
	ASSERT_EQ(0, sample(self->owner, a, 2, &s));
	EXPECT_EQ(1, s.num_watches);
	EXPECT_EQ(0, s.num_pending);
	EXPECT_EQ(0, a[0].flags);
	EXPECT_EQ(r->queue_id, a[0].queue_id);
	EXPECT_LE(s.timestamp_ns, now_ns());

	/* Published but not rung: pending already (the memory leads). */
	submit(self->tenant, r, 50 * MS, 0);
	ASSERT_EQ(0, sample(self->owner, a, 2, &s));
	EXPECT_EQ(1, s.num_pending);
	EXPECT_EQ(KFDP_ACT_PENDING, a[0].flags);
	EXPECT_EQ(0, a[0].read_index);
	EXPECT_EQ(1, a[0].write_index);
	ASSERT_EQ(0, doorbell(self->tenant, r->queue_id));
	ASSERT_TRUE(wait_retired(r, 0, 5000));
	ASSERT_EQ(0, sample(self->owner, a, 2, &s));
	EXPECT_EQ(0, s.num_pending);
	EXPECT_EQ(1, a[0].read_index);

	/* Capacity 0 counts only. */
	ASSERT_EQ(0, sample(self->owner, NULL, 0, &s));
	EXPECT_EQ(1, s.num_watches);

	ASSERT_EQ(0, watch_one(self->owner, KFDP_IOC_UNWATCH, self->handle, KFDP_SIM_HWS,
			       r->queue_id));
	ASSERT_EQ(0, sample(self->owner, a, 2, &s));
	EXPECT_EQ(0, s.num_watches);
}

/* ANY_BUSY wakes the eventfd on the first published packet, and only then. */
TEST_F(act, arm_any_busy_signals_on_demand)
{
	struct ring *r = &self->r;

	ASSERT_EQ(0, watch_one(self->owner, KFDP_IOC_WATCH, self->handle, KFDP_SIM_HWS,
			       r->queue_id));
	ASSERT_EQ(0, arm(self->owner, KFDP_ARM_ANY_BUSY, self->efd, 50, 0));
	EXPECT_FALSE(signalled(self->efd, 200)) TH_LOG("signalled while idle");
	submit(self->tenant, r, 5 * MS, 1);
	EXPECT_TRUE(signalled(self->efd, 2000));
	/* One-shot: no second signal until armed again. */
	EXPECT_FALSE(signalled(self->efd, 100));
	ASSERT_TRUE(wait_retired(r, 0, 5000));
	/* A burst that retired between two samples still counts. */
	ASSERT_EQ(0, arm(self->owner, KFDP_ARM_ANY_BUSY, self->efd, 1000000, 0));
	kfdp_sleep_ms(20);
	submit(self->tenant, r, 1000, 1);
	ASSERT_TRUE(wait_retired(r, 1, 5000));
	EXPECT_TRUE(signalled(self->efd, 3000));
}

/*
 * The condition is checked in the ARM call itself: work already pending has
 * the eventfd signalled when ARM returns, not one period (here a second)
 * later.
 */
TEST_F(act, arm_any_busy_checks_at_once)
{
	struct ring *r = &self->r;

	ASSERT_EQ(0, watch_one(self->owner, KFDP_IOC_WATCH, self->handle, KFDP_SIM_HWS,
			       r->queue_id));
	submit(self->tenant, r, 200 * MS, 1);
	ASSERT_EQ(0, arm(self->owner, KFDP_ARM_ANY_BUSY, self->efd, 1000000, 0));
	EXPECT_TRUE(signalled(self->efd, 0)) TH_LOG("not signalled by the ARM call");
	ASSERT_TRUE(wait_retired(r, 0, 5000));
}

/* ALL_IDLE waits for the work to retire and then for the idle time. */
TEST_F(act, arm_all_idle_waits_for_hysteresis)
{
	struct ring *r = &self->r;
	__u64 armed;

	ASSERT_EQ(0, watch_one(self->owner, KFDP_IOC_WATCH, self->handle, KFDP_SIM_HWS,
			       r->queue_id));
	submit(self->tenant, r, 150 * MS, 1);
	armed = now_ns();
	ASSERT_EQ(0, arm(self->owner, KFDP_ARM_ALL_IDLE, self->efd, 100, 50000));
	ASSERT_TRUE(signalled(self->efd, 3000));
	EXPECT_EQ(1, read_index(r)) TH_LOG("idle signalled with work pending");
	EXPECT_LE(armed + 150 * MS, now_ns());
	/* Disarmed: nothing more. */
	ASSERT_EQ(0, arm(self->owner, KFDP_ARM_OFF, -1, 0, 0));
	EXPECT_FALSE(signalled(self->efd, 100));
}

/* UNWATCH of an armed queue: the sampler stops looking at it at once. */
TEST_F(act, unwatch_while_armed_stops_sampling_it)
{
	struct ring *r = &self->r, other;

	ASSERT_EQ(0, ring_create(self->tenant, KFDP_SIM_HWS, &other));
	ASSERT_EQ(0, watch_one(self->owner, KFDP_IOC_WATCH, self->handle, KFDP_SIM_HWS,
			       r->queue_id));
	ASSERT_EQ(0, watch_one(self->owner, KFDP_IOC_WATCH, self->handle, KFDP_SIM_HWS,
			       other.queue_id));
	ASSERT_EQ(0, arm(self->owner, KFDP_ARM_ANY_BUSY, self->efd, 50, 0));
	ASSERT_EQ(0, watch_one(self->owner, KFDP_IOC_UNWATCH, self->handle, KFDP_SIM_HWS,
			       r->queue_id));
	submit(self->tenant, r, 1 * MS, 1);
	EXPECT_FALSE(signalled(self->efd, 300)) TH_LOG("an unwatched queue woke the owner");
	/* Still armed on the queue that stays watched. */
	submit(self->tenant, &other, 1 * MS, 1);
	EXPECT_TRUE(signalled(self->efd, 2000));
}

/* A ring that starts mid-page spans two pages: every packet runs. */
TEST_F(act, ring_not_page_aligned)
{
	long page = sysconf(_SC_PAGESIZE);
	char *mem = mmap(NULL, 3 * page, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct kfdp_sim_ring_create c = { 0 };
	struct ring r;
	__u64 i;

	ASSERT_NE(MAP_FAILED, mem);
	r.pkt = (struct kfdp_sim_packet *)(mem + page - 64);	/* 1 packet, then the next page */
	r.read_index = (__u64 *)(mem + 2 * page);
	r.write_index = (__u64 *)(mem + 2 * page + 64);
	c.node = KFDP_SIM_HWS;
	c.ring_address = (__u64)(uintptr_t)r.pkt;
	c.read_index_address = (__u64)(uintptr_t)r.read_index;
	c.write_index_address = (__u64)(uintptr_t)r.write_index;
	c.ring_packets = 4;
	ASSERT_EQ(0, ioctl(self->tenant, KFDP_SIM_IOC_CREATE_RING, &c));
	r.queue_id = c.queue_id;
	/* With PACKETS (16) > 4 slots, submit() would wrap wrongly: by hand. */
	for (i = 0; i < 4; i++) {
		memset(&r.pkt[i], 0, sizeof(r.pkt[i]));
		r.pkt[i].header = KFDP_SIM_PKT_DISPATCH;
		r.pkt[i].work_ns = 2 * MS;
	}
	__atomic_store_n(r.write_index, 4, __ATOMIC_RELEASE);
	ASSERT_EQ(0, doorbell(self->tenant, r.queue_id));
	ASSERT_TRUE(wait_retired(&r, 3, 5000));
	for (i = 0; i < 4; i++)
		EXPECT_LE(r.pkt[i].start_ns + 2 * MS, r.pkt[i].end_ns) TH_LOG("packet %llu", i);
}

/* A tenant that moves its write index back cannot wedge the node. */
TEST_F(act, write_index_moved_back_is_ignored)
{
	struct ring *r = &self->r;

	submit(self->tenant, r, 50 * MS, 1);
	__atomic_store_n(r->write_index, 0, __ATOMIC_RELEASE);
	ASSERT_EQ(0, doorbell(self->tenant, r->queue_id));
	ASSERT_TRUE(wait_retired(r, 0, 5000));
	kfdp_sleep_ms(20);
	EXPECT_EQ(1, read_index(r)) TH_LOG("ran more than was published");
	/* The queue still works once the tenant behaves again. */
	__atomic_store_n(r->write_index, 1, __ATOMIC_RELEASE);
	submit(self->tenant, r, 1 * MS, 1);
	ASSERT_TRUE(wait_retired(r, 1, 5000));
}

/* The tenant file used by another process (a fork): EBADF, as amdkfd. */
TEST_F(act, ring_from_another_process_is_refused)
{
	int status;
	pid_t pid = fork();

	ASSERT_LE(0, pid);
	if (pid == 0) {
		struct ring r;

		_exit(ring_create(self->tenant, KFDP_SIM_HWS, &r) == -EBADF ? 0 : 1);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/*
 * A forked child holds its parent's tenant descriptor, as a DataLoader
 * worker holds its parent's /dev/kfd: every tenant ioctl through it but the
 * simulator's read-only QUEUE_STATUS fails with EBADF (amdkfd's
 * kfd_ioctl()), and ATTACH through a copy of it
 * attaches the parent, whose tgid it returns. The child's exit changes
 * nothing for the parent's attachment.
 */
TEST_F(act, inherited_descriptor_names_the_parent)
{
	struct kfdp_attach a = { .kind = KFDP_TARGET_SIM_FD };
	int up[2], down[2], status, pidfd, copy;
	struct kfdp_sim_queue_status st;
	pid_t pid;
	char b;

	ASSERT_EQ(0, pipe(up));
	ASSERT_EQ(0, pipe(down));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		struct kfdp_sim_doorbell d = { .queue_id = self->r.queue_id };
		int fails = 0;

		close(up[0]);
		close(down[1]);
		fails += kfdp_queue_create(self->tenant, KFDP_SIM_HWS, KFDP_QT_COMPUTE) != -EBADF;
		fails += kfdp_ioctl_errno(self->tenant, KFDP_SIM_IOC_DOORBELL, &d) != EBADF;
		fails += kfdp_queue_destroy(self->tenant, self->r.queue_id) != EBADF;
		if (write(up[1], &fails, sizeof(fails)) != sizeof(fails))
			_exit(2);
		while (read(down[0], &b, 1) < 0 && errno == EINTR)
			;
		_exit(0);
	}
	close(up[1]);
	close(down[0]);
	ASSERT_EQ(sizeof(status), read(up[0], &status, sizeof(status)));
	EXPECT_EQ(0, status) TH_LOG("%d tenant ioctls from the child did not fail EBADF", status);
	pidfd = syscall(SYS_pidfd_open, pid, 0);
	ASSERT_LE(0, pidfd);
	copy = syscall(SYS_pidfd_getfd, pidfd, self->tenant, 0);
	ASSERT_LE(0, copy);
	a.fd = copy;
	ASSERT_EQ(0, ioctl(self->owner, KFDP_IOC_ATTACH, &a));
	EXPECT_EQ(getpid(), a.tgid) TH_LOG("the child's copy attaches its parent");
	EXPECT_EQ((__u32)self->handle, a.handle) TH_LOG("the parent's attachment");
	close(copy);
	close(pidfd);
	close(down[1]);
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	close(up[0]);
	/* The parent's queue and attachment are untouched by the exit. */
	st.queue_id = self->r.queue_id;
	EXPECT_EQ(0, kfdp_queue_status(self->tenant, self->r.queue_id, &st));
	EXPECT_EQ(0, kfdp_one(self->owner, KFDP_IOC_PREEMPT, self->handle, KFDP_SIM_HWS,
			      self->r.queue_id));
	EXPECT_EQ(0, kfdp_one(self->owner, KFDP_IOC_RESUME, self->handle, KFDP_SIM_HWS,
			      self->r.queue_id));
}

/*
 * A destroyed queue's id comes back with the next queue (the lowest free
 * id, as amdkfd) at a new ring: a watch is of the queue, not of its id.
 * WATCH of the id watches the new ring in the old one's place, and WATCH
 * of an id whose queue is gone drops the watch.
 */
TEST_F(act, watch_follows_a_recreated_queue)
{
	struct kfdp_activity act[2];
	struct kfdp_sample s;
	struct ring r2;
	__u32 qid = self->r.queue_id;

	ASSERT_EQ(0, watch_one(self->owner, KFDP_IOC_WATCH, self->handle, KFDP_SIM_HWS, qid));
	ASSERT_EQ(KFDP_R_ALREADY,
		  watch_one(self->owner, KFDP_IOC_WATCH, self->handle, KFDP_SIM_HWS, qid));
	ASSERT_EQ(0, kfdp_queue_destroy(self->tenant, qid));
	ASSERT_EQ(0, ring_create(self->tenant, KFDP_SIM_HWS, &r2));
	ASSERT_EQ(qid, r2.queue_id) TH_LOG("the lowest free id comes back");
	ASSERT_NE(self->r.pkt, r2.pkt);
	/* Work published on the new ring but not rung: pending, not retired. */
	__atomic_store_n(r2.write_index, 5, __ATOMIC_RELEASE);
	EXPECT_EQ(0, watch_one(self->owner, KFDP_IOC_WATCH, self->handle, KFDP_SIM_HWS, qid))
		TH_LOG("a re-created queue is watched anew, not ALREADY");
	ASSERT_EQ(0, sample(self->owner, act, 2, &s));
	ASSERT_EQ(1, s.num_watches);
	EXPECT_EQ(5, act[0].write_index) TH_LOG("the new ring's index, not the old one's");
	/* Gone for good: WATCH says so and the watch goes. */
	ASSERT_EQ(0, kfdp_queue_destroy(self->tenant, qid));
	EXPECT_EQ(-ENOENT, watch_one(self->owner, KFDP_IOC_WATCH, self->handle, KFDP_SIM_HWS, qid));
	ASSERT_EQ(0, sample(self->owner, act, 2, &s));
	EXPECT_EQ(0, s.num_watches);
}

/* SAMPLEs until the first watch's write index is @want; false after @ms. */
static int sampled_write_index(int owner, __u64 want, long ms)
{
	struct kfdp_activity act[2];
	struct kfdp_sample s;
	__u64 end = now_ns() + ms * MS;

	do {
		if (!sample(owner, act, 2, &s) && s.num_watches && act[0].write_index == want)
			return 1;
		kfdp_sleep_ms(5);
	} while (now_ns() < end);
	return 0;
}

/*
 * A queue made again in memory mapped anew at the old addresses, as an
 * allocator hands a freed range back, looks the same to QUERY: the watch
 * notices the unmap, and the module pins it again by itself, so that
 * SAMPLE and an armed sampler read the new memory, not the old page.
 */
TEST_F(act, watch_follows_memory_mapped_again_at_its_address)
{
	struct kfdp_activity act[2];
	struct kfdp_sample s;
	struct ring r2;
	__u32 qid = self->r.queue_id;

	ASSERT_EQ(0, watch_one(self->owner, KFDP_IOC_WATCH, self->handle, KFDP_SIM_HWS, qid));
	ASSERT_EQ(0, arm(self->owner, KFDP_ARM_ANY_BUSY, self->efd, 1000, 0));
	ASSERT_EQ(0, kfdp_queue_destroy(self->tenant, qid));
	ASSERT_EQ(0, ring_memory_renew(&self->r));
	ASSERT_EQ(0, ring_create_at(self->tenant, KFDP_SIM_HWS, (char *)self->r.pkt, &r2));
	ASSERT_EQ(qid, r2.queue_id) TH_LOG("the lowest free id comes back");
	ASSERT_EQ(self->r.write_index, r2.write_index);
	/* Work published in the new memory but not rung: pending. */
	__atomic_store_n(r2.write_index, 5, __ATOMIC_RELEASE);
	EXPECT_TRUE(signalled(self->efd, 3000)) TH_LOG("the armed sampler reads the new memory");
	EXPECT_TRUE(sampled_write_index(self->owner, 5, 3000))
		TH_LOG("SAMPLE reads the new memory's index, not the old page's");
	ASSERT_EQ(0, sample(self->owner, act, 2, &s));
	EXPECT_EQ(1, s.num_watches);
	EXPECT_EQ(1, s.num_pending);
	EXPECT_EQ(KFDP_R_ALREADY,
		  watch_one(self->owner, KFDP_IOC_WATCH, self->handle, KFDP_SIM_HWS, qid));
}

/*
 * A watched ring unmapped while its queue lives (a hostile or broken
 * tenant): the watch reads as idle, not as the old page's pending work,
 * SAMPLE keeps working, and an armed sampler is not woken for it.
 */
TEST_F(act, watch_of_unmapped_memory_reads_idle)
{
	long page = sysconf(_SC_PAGESIZE);
	struct kfdp_activity act[2];
	struct kfdp_sample s;
	__u32 qid = self->r.queue_id;

	ASSERT_EQ(0, watch_one(self->owner, KFDP_IOC_WATCH, self->handle, KFDP_SIM_HWS, qid));
	__atomic_store_n(self->r.write_index, 3, __ATOMIC_RELEASE);
	ASSERT_EQ(0, sample(self->owner, act, 2, &s));
	ASSERT_EQ(1, s.num_pending);
	ASSERT_EQ(0, munmap(self->r.pkt, 2 * page));
	ASSERT_EQ(0, sample(self->owner, act, 2, &s));
	EXPECT_EQ(1, s.num_watches);
	EXPECT_EQ(0, s.num_pending) TH_LOG("the old page's pending work is not the queue's");
	ASSERT_EQ(0, arm(self->owner, KFDP_ARM_ANY_BUSY, self->efd, 1000, 0));
	EXPECT_FALSE(signalled(self->efd, 300)) TH_LOG("nothing pending: no wakeup");
	ASSERT_EQ(0, sample(self->owner, act, 2, &s));
	EXPECT_EQ(0, s.num_pending);
}

/* A ring whose write index is the first word of @file. */
static int ring_create_file_index(int tenant, char *mem, char *file, __u32 *queue_id)
{
	long page = sysconf(_SC_PAGESIZE);
	struct kfdp_sim_ring_create c = { 0 };

	c.node = KFDP_SIM_HWS;
	c.priority = 7;
	c.ring_address = (__u64)(uintptr_t)mem;
	c.read_index_address = (__u64)(uintptr_t)(mem + page);
	c.write_index_address = (__u64)(uintptr_t)file;
	c.ring_packets = PACKETS;
	if (ioctl(tenant, KFDP_SIM_IOC_CREATE_RING, &c))
		return -errno;
	*queue_id = c.queue_id;
	return 0;
}

/*
 * A write index in a file mapping, not resident: WATCH does not fault it in
 * from the caller (a FUSE server that never answers would block a daemon's
 * SCHED_FIFO thread with the owner's lock held) but answers EAGAIN, and
 * watches it once the tenant has touched it. ramfs, as a file system that
 * is neither anonymous nor shmem memory. Nothing after the mount may
 * return early: the mount goes at the end.
 */
TEST_F(act, watch_does_not_fault_in_a_file_mapping)
{
	long page = sysconf(_SC_PAGESIZE);
	char dir[] = "/tmp/kfdp-ramfs-XXXXXX";
	char path[64];
	char *mem = MAP_FAILED, *file = MAP_FAILED;
	__u32 qid = 0;
	int fd, e = 0;

	mem = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, mem);
	ASSERT_NE(NULL, mkdtemp(dir));
	if (mount("kfdp", dir, "ramfs", 0, NULL)) {
		e = errno;
		rmdir(dir);
		SKIP(return, "no ramfs to map a file from: %s", strerror(e));
	}
	snprintf(path, sizeof(path), "%s/indices", dir);
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	EXPECT_LE(0, fd);
	if (fd >= 0 && !ftruncate(fd, page))
		file = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	EXPECT_NE(MAP_FAILED, file);
	if (file != MAP_FAILED) {
		/* Resident for CREATE_RING, which pins it as WATCH does. */
		__atomic_store_n((__u64 *)file, 0, __ATOMIC_RELEASE);
		e = ring_create_file_index(self->tenant, mem, file, &qid);
		EXPECT_EQ(0, e);
		/*
		 * Mapped again at the same address: the same page of the file,
		 * not in the page tables, as one the tenant has not used yet.
		 */
		EXPECT_EQ(0, munmap(file, page));
		if (mmap(file, page, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED_NOREPLACE,
			 fd, 0) != file)
			file = MAP_FAILED;
		EXPECT_NE(MAP_FAILED, file);
	}
	if (file != MAP_FAILED && !e) {
		EXPECT_EQ(-EAGAIN,
			  watch_one(self->owner, KFDP_IOC_WATCH, self->handle, KFDP_SIM_HWS, qid));
		EXPECT_EQ(0, __atomic_load_n((__u64 *)file, __ATOMIC_ACQUIRE));
		EXPECT_EQ(0, watch_one(self->owner, KFDP_IOC_WATCH, self->handle, KFDP_SIM_HWS,
				       qid)) TH_LOG("resident again: watched");
		EXPECT_EQ(0, watch_one(self->owner, KFDP_IOC_UNWATCH, self->handle, KFDP_SIM_HWS,
				       qid));
		EXPECT_EQ(0, kfdp_queue_destroy(self->tenant, qid));
	}
	if (file != MAP_FAILED)
		munmap(file, page);
	munmap(mem, 2 * page);
	if (fd >= 0)
		close(fd);
	unlink(path);
	umount2(dir, MNT_DETACH);
	rmdir(dir);
}

/* A watch outlives the tenant's exit safely, and says so. */
TEST_F(act, watch_of_exited_tenant_is_gone)
{
	struct kfdp_activity a[1];
	struct kfdp_sample s;
	int sv[2], child_tenant = -1, handle;
	struct ring cr;
	pid_t pid;
	char c;

	ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		int t = kfdp_tenant_open();

		if (t < 0 || ring_create(t, KFDP_SIM_HWS, &cr))
			_exit(1);
		/* Hand over the tenant fd and the queue id, then wait. */
		{
			char buf[CMSG_SPACE(sizeof(int))] = { 0 };
			struct iovec iov = { &cr.queue_id, sizeof(cr.queue_id) };
			struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1,
					    .msg_control = buf, .msg_controllen = sizeof(buf) };
			struct cmsghdr *cm = CMSG_FIRSTHDR(&m);

			cm->cmsg_level = SOL_SOCKET;
			cm->cmsg_type = SCM_RIGHTS;
			cm->cmsg_len = CMSG_LEN(sizeof(int));
			memcpy(CMSG_DATA(cm), &t, sizeof(int));
			if (sendmsg(sv[1], &m, 0) < 0)
				_exit(1);
		}
		_exit(read(sv[1], &c, 1) == 1 ? 0 : 1);
	}
	{
		char buf[CMSG_SPACE(sizeof(int))] = { 0 };
		struct iovec iov = { &cr.queue_id, sizeof(cr.queue_id) };
		struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1,
				    .msg_control = buf, .msg_controllen = sizeof(buf) };

		ASSERT_LT(0, recvmsg(sv[0], &m, 0));
		memcpy(&child_tenant, CMSG_DATA(CMSG_FIRSTHDR(&m)), sizeof(int));
	}
	handle = kfdp_attach_sim(self->owner, child_tenant);
	ASSERT_LT(0, handle);
	/* Only the child's mm holds the tenant once we close our copy. */
	close(child_tenant);
	ASSERT_EQ(0, watch_one(self->owner, KFDP_IOC_WATCH, handle, KFDP_SIM_HWS,
			       cr.queue_id));
	ASSERT_EQ(1, write(sv[0], "x", 1));
	waitpid(pid, NULL, 0);
	/* Housekeeping notices the exit within SWEEP_MS (100 ms). */
	for (int i = 0; i < 100; i++) {
		ASSERT_EQ(0, sample(self->owner, a, 1, &s));
		if (a[0].flags & KFDP_ACT_GONE)
			break;
		kfdp_sleep_ms(10);
	}
	EXPECT_EQ(1, s.num_watches);
	EXPECT_EQ(KFDP_ACT_GONE, a[0].flags & KFDP_ACT_GONE);
	/* New watches of the dead target: ESRCH. */
	EXPECT_EQ(KFDP_R_ALREADY, watch_one(self->owner, KFDP_IOC_WATCH, handle,
					    KFDP_SIM_HWS, cr.queue_id));
	EXPECT_EQ(0, watch_one(self->owner, KFDP_IOC_UNWATCH, handle, KFDP_SIM_HWS,
			       cr.queue_id));
	EXPECT_EQ(-ESRCH, watch_one(self->owner, KFDP_IOC_WATCH, handle, KFDP_SIM_HWS,
				    cr.queue_id));
	close(sv[0]);
	close(sv[1]);
}

/* At most max_watches per owner: the next is ENOSPC, nothing else changes. */
TEST_F(act, watch_limit)
{
	long page = sysconf(_SC_PAGESIZE);
	char *mem = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct kfdp_info info = { 0 };
	struct kfdp_sample s;
	__u32 i, n;
	int st = 0;

	ASSERT_NE(MAP_FAILED, mem);
	ASSERT_EQ(0, ioctl(self->owner, KFDP_IOC_INFO, &info));
	n = info.max_watches + 1;
	for (i = 0; i < n; i++) {
		struct kfdp_sim_ring_create c = {
			.node = KFDP_SIM_HWS,
			.ring_address = (__u64)(uintptr_t)(mem + (i % (page / 64)) * 64),
			.read_index_address = (__u64)(uintptr_t)(mem + page + (i % 256) * 16),
			.write_index_address = (__u64)(uintptr_t)(mem + page + (i % 256) * 16 + 8),
			.ring_packets = 1,
		};

		ASSERT_EQ(0, ioctl(self->tenant, KFDP_SIM_IOC_CREATE_RING, &c));
		st = watch_one(self->owner, KFDP_IOC_WATCH, self->handle, KFDP_SIM_HWS,
			       c.queue_id);
		if (i == n - 1)
			break;
		ASSERT_EQ(0, st);
	}
	EXPECT_EQ(-ENOSPC, st);
	ASSERT_EQ(0, sample(self->owner, NULL, 0, &s));
	EXPECT_EQ(info.max_watches, s.num_watches);
}

/* Bad WATCH, UNWATCH and SAMPLE input: the errno, and nothing watched. */
TEST_F(act, watch_and_sample_bad_input)
{
	struct kfdp_queue_ref refs[2];
	struct kfdp_activity a[1];
	struct kfdp_sample s;
	struct kfdp_watch w;
	int plain = kfdp_queue_create(self->tenant, KFDP_SIM_HWS, KFDP_QT_COMPUTE);

	ASSERT_LE(0, plain);
	refs[0] = kfdp_ref(self->handle, KFDP_SIM_HWS, self->r.queue_id);

	memset(&w, 0, sizeof(w));
	w.entries_ptr = (__u64)(uintptr_t)refs;
	w.num_entries = 1;
	w.entry_size = sizeof(refs[0]);
	w.flags = 1;
	EXPECT_EQ(EINVAL, kfdp_ioctl_errno(self->owner, KFDP_IOC_WATCH, &w)) TH_LOG("flags");
	w.flags = 0;
	w.reserved = 1;
	EXPECT_EQ(EINVAL, kfdp_ioctl_errno(self->owner, KFDP_IOC_WATCH, &w)) TH_LOG("reserved");
	w.reserved = 0;
	w.entry_size = 8;
	EXPECT_EQ(EINVAL, kfdp_ioctl_errno(self->owner, KFDP_IOC_WATCH, &w)) TH_LOG("entry_size");
	w.entry_size = sizeof(refs[0]);
	w.num_entries = KFDP_MAX_BATCH + 1;
	EXPECT_EQ(E2BIG, kfdp_ioctl_errno(self->owner, KFDP_IOC_WATCH, &w));
	w.num_entries = 1;
	w.entries_ptr = 8;
	EXPECT_EQ(EFAULT, kfdp_ioctl_errno(self->owner, KFDP_IOC_WATCH, &w));

	EXPECT_EQ(-EINVAL, watch_one(self->owner, KFDP_IOC_WATCH, self->handle + 100,
				     KFDP_SIM_HWS, self->r.queue_id)) TH_LOG("handle");
	EXPECT_EQ(-EINVAL, watch_one(self->owner, KFDP_IOC_WATCH, self->handle,
				     kfdp_sim_nodes(), self->r.queue_id)) TH_LOG("gpu_id");
	EXPECT_EQ(-ENOENT, watch_one(self->owner, KFDP_IOC_WATCH, self->handle,
				     KFDP_SIM_HWS, 999)) TH_LOG("queue");
	EXPECT_EQ(-EOPNOTSUPP, watch_one(self->owner, KFDP_IOC_WATCH, self->handle,
					 KFDP_SIM_HWS, plain)) TH_LOG("queue without a ring");
	EXPECT_EQ(KFDP_R_ALREADY, watch_one(self->owner, KFDP_IOC_UNWATCH, self->handle,
					    KFDP_SIM_HWS, self->r.queue_id));

	/* Nothing was watched by any of it. */
	ASSERT_EQ(0, sample(self->owner, a, 1, &s));
	EXPECT_EQ(0, s.num_watches);

	/* A duplicate in one call: the second entry is ALREADY. */
	refs[1] = refs[0];
	ASSERT_EQ(0, watch(self->owner, KFDP_IOC_WATCH, refs, 2, &w));
	EXPECT_EQ(0, refs[0].status);
	EXPECT_EQ(KFDP_R_ALREADY, refs[1].status);
	EXPECT_EQ(1, w.num_ok);

	memset(&s, 0, sizeof(s));
	s.reserved = 1;
	EXPECT_EQ(EINVAL, kfdp_ioctl_errno(self->owner, KFDP_IOC_SAMPLE, &s));
	memset(&s, 0, sizeof(s));
	s.entries_ptr = (__u64)(uintptr_t)a;
	s.capacity = 1;
	s.entry_size = 16;
	EXPECT_EQ(EINVAL, kfdp_ioctl_errno(self->owner, KFDP_IOC_SAMPLE, &s));
	s.entry_size = sizeof(a[0]);
	s.entries_ptr = 8;
	EXPECT_EQ(EFAULT, kfdp_ioctl_errno(self->owner, KFDP_IOC_SAMPLE, &s));
}

/* Bad ARM input: the errno, and nothing armed (the eventfd stays quiet). */
TEST_F(act, arm_bad_input)
{
	struct kfdp_arm a = { .condition = KFDP_ARM_ANY_BUSY, .eventfd = self->efd,
			      .period_us = 100 };

	ASSERT_EQ(0, watch_one(self->owner, KFDP_IOC_WATCH, self->handle, KFDP_SIM_HWS,
			       self->r.queue_id));
	EXPECT_EQ(EINVAL, arm(self->owner, 3, self->efd, 100, 0)) TH_LOG("condition");
	EXPECT_EQ(EINVAL, arm(self->owner, KFDP_ARM_ANY_BUSY, self->efd, 9, 0));
	EXPECT_EQ(EINVAL, arm(self->owner, KFDP_ARM_ANY_BUSY, self->efd, 1000001, 0));
	EXPECT_EQ(EINVAL, arm(self->owner, KFDP_ARM_ANY_BUSY, self->efd, 100, 5));
	EXPECT_EQ(EINVAL, arm(self->owner, KFDP_ARM_ALL_IDLE, self->efd, 100, 10000001));
	EXPECT_EQ(EINVAL, arm(self->owner, KFDP_ARM_ANY_BUSY, self->owner, 100, 0))
		TH_LOG("not an eventfd");
	EXPECT_EQ(EBADF, arm(self->owner, KFDP_ARM_ANY_BUSY, -1, 100, 0));
	EXPECT_EQ(EBADF, arm(self->owner, KFDP_ARM_ANY_BUSY, 9999, 100, 0));
	EXPECT_EQ(EINVAL, arm(self->owner, KFDP_ARM_OFF, self->efd, 0, 0));
	a.reserved[1] = 1;
	EXPECT_EQ(EINVAL, kfdp_ioctl_errno(self->owner, KFDP_IOC_ARM, &a));
	/* None of it armed anything. */
	submit(self->tenant, &self->r, 1 * MS, 1);
	EXPECT_FALSE(signalled(self->efd, 200));
}

/* Bad CREATE_RING and DOORBELL input: the errno, and no queue created. */
TEST_F(act, ring_bad_input)
{
	long page = sysconf(_SC_PAGESIZE);
	char *mem = mmap(NULL, 3 * page, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct kfdp_sim_ring_create good = {
		.node = KFDP_SIM_HWS,
		.ring_address = (__u64)(uintptr_t)mem,
		.read_index_address = (__u64)(uintptr_t)(mem + page),
		.write_index_address = (__u64)(uintptr_t)(mem + page + 64),
		.ring_packets = 4,
	}, c;
	struct kfdp_sim_doorbell d = { 0 };
	long long queues = kfdp_sim_stat("node0:queues");
	int plain;

	ASSERT_NE(MAP_FAILED, mem);
	ASSERT_EQ(0, mprotect(mem + 2 * page, page, PROT_NONE));
#define BAD(errno_, field, value) do {						\
		c = good;							\
		c.field = value;						\
		EXPECT_EQ(errno_, kfdp_ioctl_errno(self->tenant,		\
						   KFDP_SIM_IOC_CREATE_RING, &c)) \
			TH_LOG(#field " = " #value);				\
	} while (0)
	BAD(EINVAL, ring_packets, 0);
	BAD(EINVAL, ring_packets, 3);
	BAD(EINVAL, ring_packets, 2048);
	BAD(EINVAL, node, kfdp_sim_nodes());
	BAD(EINVAL, priority, 16);
	BAD(EINVAL, reserved, 1);
	BAD(EINVAL, queue_id, 1);
	BAD(EINVAL, ring_address, good.ring_address + 8);
	BAD(EINVAL, read_index_address, good.read_index_address + 4);
	BAD(EINVAL, write_index_address, good.read_index_address);
	BAD(EINVAL, read_index_address, good.ring_address + 64);
	BAD(EFAULT, ring_address, (__u64)(uintptr_t)(mem + 2 * page));
	BAD(EFAULT, read_index_address, (__u64)(uintptr_t)(mem + 2 * page));
	BAD(EFAULT, ring_address, 0x800000000000ull);	/* above user space */
#undef BAD
	EXPECT_EQ(queues, kfdp_sim_stat("node0:queues")) TH_LOG("a refused ring created a queue");

	d.queue_id = 999;
	EXPECT_EQ(ENOENT, kfdp_ioctl_errno(self->tenant, KFDP_SIM_IOC_DOORBELL, &d));
	plain = kfdp_queue_create(self->tenant, KFDP_SIM_HWS, KFDP_QT_COMPUTE);
	ASSERT_LE(0, plain);
	d.queue_id = plain;
	EXPECT_EQ(EINVAL, kfdp_ioctl_errno(self->tenant, KFDP_SIM_IOC_DOORBELL, &d));
	d.queue_id = self->r.queue_id;
	d.reserved = 1;
	EXPECT_EQ(EINVAL, kfdp_ioctl_errno(self->tenant, KFDP_SIM_IOC_DOORBELL, &d));
	d.reserved = 0;
	EXPECT_EQ(0, kfdp_ioctl_errno(self->tenant, KFDP_SIM_IOC_DOORBELL, &d));
}

TEST_HARNESS_MAIN
