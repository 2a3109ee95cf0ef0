// SPDX-License-Identifier: GPL-2.0
/*
 * Stress on the simulated node: daemon processes (two threads per owner)
 * attach tenants through pidfd_getfd and preempt, resume, lease, freeze,
 * thaw, query and detach at random, while tenant processes create and
 * destroy queues, drop their KFD process and get killed and respawned.
 * Bounded in time (KFDP_STRESS_SECONDS, default 40, at most 120) and in operations
 * (KFDP_STRESS_OPS, ioctls plus queue entries, default 40000). Afterwards, with every owner closed,
 * nothing may be suspended or mapped wrongly, no work may be lost, and
 * every ioctl must have failed only in the documented ways; the VM runner
 * fails the run on any WARN, lockdep or KASAN report.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <sys/mman.h>

#include "kfdp_sim.h"
#include "kselftest_harness.h"

#define TENANTS 4
#define DAEMONS 3
#define TENANT_FD 100 /* where each tenant keeps its sim fd */

struct shared {
	atomic_long ops;	/* ioctls */
	atomic_long entries;	/* queue preemptions and resumes asked for */
	atomic_long unexpected;	/* ioctl outcomes outside the documented set */
	atomic_int last_unexpected;
	atomic_int stop;
	pid_t tenants[TENANTS];
};

static struct shared *sh;

static unsigned int rnd(unsigned int *seed, unsigned int n)
{
	return rand_r(seed) % n;
}

static void unexpected(int what)
{
	atomic_fetch_add(&sh->unexpected, 1);
	atomic_store(&sh->last_unexpected, what);
}

/* A tenant: queues come and go; now and then its KFD process does too. */
static void tenant_loop(unsigned int seed)
{
	int qids[16], nq = 0;

	for (;;) {
		int t = kfdp_tenant_open();

		if (t < 0 || dup2(t, TENANT_FD) < 0)
			_exit(1);
		close(t);
		nq = 0;
		for (int op = 0; op < 200 && !atomic_load(&sh->stop); op++) {
			if (nq < 16 && rnd(&seed, 3)) {
				int q = kfdp_queue_create(TENANT_FD, rnd(&seed, 2),
							  rnd(&seed, 8) ? KFDP_QT_COMPUTE : KFDP_QT_SDMA);
				if (q >= 0)
					qids[nq++] = q;
				else
					unexpected(1000 + q);
			} else if (nq) {
				int i = rnd(&seed, nq);

				if (kfdp_queue_destroy(TENANT_FD, qids[i]))
					unexpected(2000);
				qids[i] = qids[--nq];
			}
			kfdp_sleep_ms(rnd(&seed, 2));
		}
		if (atomic_load(&sh->stop))
			pause();
		close(TENANT_FD); /* the process is torn down; a new one follows */
	}
}

static int allowed_entry(int s)
{
	return s == 0 || s == KFDP_R_ALREADY || s == KFDP_R_DEFERRED || s == KFDP_R_EXTERNAL ||
	       s == -ENOENT || s == -ESRCH || s == -EBUSY || s == -EOPNOTSUPP || s == -EINVAL;
}

struct daemon {
	int owner;
	unsigned int seed;
	int handles[TENANTS];
	atomic_int rotate;	/* this daemon's threads stop for a new owner */
};

static void attach_some(struct daemon *d, unsigned int *seed)
{
	int t = rnd(seed, TENANTS);
	int pidfd = syscall(SYS_pidfd_open, sh->tenants[t], 0), fd, h;

	if (pidfd < 0)
		return;
	fd = syscall(SYS_pidfd_getfd, pidfd, TENANT_FD, 0);
	close(pidfd);
	if (fd < 0)
		return;	/* between two KFD processes */
	h = kfdp_attach_sim(d->owner, fd);
	if (h > 0)
		d->handles[t] = h;
	else if (h != -ESRCH && h != -EINVAL)
		unexpected(3000 - h);
	close(fd);
}

static void one_op(struct daemon *d, unsigned int *seed)
{
	struct kfdp_queue_info qi[32];
	struct kfdp_queue_ref refs[32];
	int t = rnd(seed, TENANTS), h = d->handles[t], n = 0, e;
	struct kfdp_query q = {
		.handle = h, .entries_ptr = (__u64)(uintptr_t)qi,
		.entry_size = sizeof(qi[0]), .capacity = 32,
	};
	struct kfdp_batch b;

	if (!h || !rnd(seed, 20)) {
		attach_some(d, seed);
		return;
	}
	e = kfdp_ioctl_errno(d->owner, KFDP_IOC_QUERY, &q);
	if (e) {
		/*
		 * ESRCH: the tenant exited; EINVAL: the other thread detached;
		 * EAGAIN: the tenant kept creating queues while QUERY sized its
		 * buffer (Documentation/uapi.rst; seen on a loaded host).
		 */
		if (e != ESRCH && e != EINVAL && e != EAGAIN)
			unexpected(4000 + e);
		if (!rnd(seed, 4)) {
			struct kfdp_detach det = { .handle = h };

			e = kfdp_ioctl_errno(d->owner, KFDP_IOC_DETACH, &det);
			if (e && e != EINVAL)
				unexpected(4500 + e);
			d->handles[t] = 0;
		}
		return;
	}
	for (__u32 i = 0; i < q.num_written; i++)
		if (rnd(seed, 2))
			refs[n++] = (struct kfdp_queue_ref){ h, qi[i].gpu_id, qi[i].queue_id, 0 };
	switch (rnd(seed, 8)) {
	case 0: case 1: case 2:
		e = kfdp_batch(d->owner, KFDP_IOC_PREEMPT, refs, n,
			       rnd(seed, 6) ? 0 : KFDP_BATCH_ALL_OR_NOTHING,
			       rnd(seed, 3) ? 0 : 1 + rnd(seed, 20), &b);
		break;
	case 3: case 4: case 5:
		e = kfdp_batch(d->owner, KFDP_IOC_RESUME, refs, n, 0, 0, &b);
		break;
	case 6:
		e = kfdp_freeze(d->owner, KFDP_IOC_FREEZE, h, 0, NULL);
		if (!e && !rnd(seed, 2))
			e = kfdp_freeze(d->owner, KFDP_IOC_THAW, h, 0, NULL);
		/* ESRCH: exited; EINVAL: the other thread detached or thawed. */
		if (e && e != ESRCH && e != EINVAL)
			unexpected(5500 + e);
		return;
	default: {
		struct kfdp_freeze f;

		e = kfdp_freeze(d->owner, KFDP_IOC_THAW, h, 0, &f);
		if (e && e != EINVAL && e != ESRCH)
			unexpected(5000 + e);
		return;
	}
	}
	if (e)
		unexpected(6000 + e);
	atomic_fetch_add(&sh->entries, n);
	for (int i = 0; i < n; i++)
		if (!allowed_entry(refs[i].status) && refs[i].status != -ECANCELED)
			unexpected(7000 - refs[i].status);
}

static void *daemon_thread(void *arg)
{
	struct daemon *d = arg;
	unsigned int seed = d->seed ^ (unsigned int)(uintptr_t)pthread_self();

	while (!atomic_load(&sh->stop) && !atomic_load(&d->rotate)) {
		one_op(d, &seed);
		atomic_fetch_add(&sh->ops, 1);
	}
	return NULL;
}

static void daemon_loop(unsigned int seed)
{
	for (;;) {
		struct daemon d = { .owner = kfdp_owner_open(), .seed = seed++ };
		pthread_t th[2];

		if (d.owner < 0)
			_exit(1);
		/* Two threads on one owner, for a while; then a new owner. */
		for (int i = 0; i < 2; i++)
			pthread_create(&th[i], NULL, daemon_thread, &d);
		kfdp_sleep_ms(300 + rnd(&seed, 300));
		if (atomic_load(&sh->stop)) {
			for (int i = 0; i < 2; i++)
				pthread_join(th[i], NULL);
			_exit(0);
		}
		/* Close this owner with whatever it holds; start a new one. */
		atomic_store(&d.rotate, 1);
		for (int i = 0; i < 2; i++)
			pthread_join(th[i], NULL);
		close(d.owner);
	}
}

static long env_long(const char *name, long def)
{
	const char *v = getenv(name);

	return v ? strtol(v, NULL, 10) : def;
}

FIXTURE(stress) {
	int unused;
};

FIXTURE_SETUP(stress)
{
}

FIXTURE_TEARDOWN(stress)
{
}

/* The harness kills a test after its timeout: leave room past the bound. */
TEST_F_TIMEOUT(stress, random_owners_and_tenants, 180)
{
	long seconds = env_long("KFDP_STRESS_SECONDS", 40);
	long max_ops = env_long("KFDP_STRESS_OPS", 40000);
	pid_t daemons[DAEMONS];
	const char *why = kfdp_sim_absent();
	time_t end;
	int i, respawned = 0;

	if (why)
		SKIP(return, "%s", why);
	if (seconds > 120)
		seconds = 120;
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, sh);
	memset(sh, 0, sizeof(*sh));
	/* The pid goes to shared memory from the parent only. */
	for (i = 0; i < TENANTS; i++) {
		pid_t p = fork();

		if (!p)
			tenant_loop(i + 1);
		sh->tenants[i] = p;
	}
	for (i = 0; i < DAEMONS; i++) {
		daemons[i] = fork();
		if (!daemons[i])
			daemon_loop(100 * (i + 1));
	}
	end = time(NULL) + seconds;
	while (time(NULL) < end &&
	       atomic_load(&sh->ops) + atomic_load(&sh->entries) < max_ops) {
		kfdp_sleep_ms(500);
		pid_t p;

		/* A tenant killed -9 mid-flight, and a new one in its place. */
		i = respawned++ % TENANTS;
		kill(sh->tenants[i], SIGKILL);
		waitpid(sh->tenants[i], NULL, 0);
		p = fork();
		if (!p)
			tenant_loop(1000 + respawned);
		sh->tenants[i] = p;
	}
	/* One daemon dies by SIGKILL, the others stop. */
	kill(daemons[0], SIGKILL);
	atomic_store(&sh->stop, 1);
	for (i = 0; i < DAEMONS; i++)
		waitpid(daemons[i], NULL, 0);
	ksft_print_msg("stress: %ld ioctls (%ld queue entries) by %d daemons on %d tenants in %ld s, %d tenants killed\n",
		       atomic_load(&sh->ops), atomic_load(&sh->entries), DAEMONS, TENANTS,
		       seconds - (long)(end - time(NULL)), respawned);
	EXPECT_LE(1000, atomic_load(&sh->ops)) TH_LOG("the daemons made no progress");
	EXPECT_EQ(0, atomic_load(&sh->unexpected))
		TH_LOG("last unexpected outcome: %d", atomic_load(&sh->last_unexpected));

	/* Every owner is closed: nothing stays suspended. Tenants still live. */
	KFDP_EXPECT_SIM_CLEAN();
	for (i = 0; i < TENANTS; i++) {
		kill(sh->tenants[i], SIGKILL);
		waitpid(sh->tenants[i], NULL, 0);
	}
	EXPECT_EQ(0, kfdp_sim_stat("processes"));
	EXPECT_EQ(0, kfdp_sim_stat("queues"));
}

TEST_HARNESS_MAIN
