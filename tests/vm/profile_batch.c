// SPDX-License-Identifier: GPL-2.0
/*
 * The load of `make profile` (scripts/profile.sh): one simulated tenant with
 * K queues on node 0, one owner, and R repetitions of one call, so that a
 * function_graph trace of this process shows where that call's time goes.
 *
 * usage: profile_batch MODE K R
 *   MODE  info | empty (PREEMPT of no entry: the floor of any batch call,
 *         its header and array copies, locks and bookkeeping) |
 *         preempt (PREEMPT of K, then RESUME of K, untimed) |
 *         validate (VALIDATE_ONLY PREEMPT of K) | freeze (FREEZE + THAW) |
 *         query (QUERY of the K queues) |
 *         daemons (K concurrent scheduler processes, each with its own
 *         file and 4 tenants of 16 queues, PREEMPT and RESUME of its 64
 *         queues R times; K = 16 is 1,024 queues over 64 tenants, the
 *         simulated node's limit)
 *
 * Prints "MODE K R median_ns" of the timed call, measured here, for the
 * record beside the trace; the trace itself is the profile. The median,
 * because under QEMU TCG a few calls take many times the rest (the
 * translator at work).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <linux/kfd_preempt.h>

#define MAXQ 1024

static void die(const char *what)
{
	fprintf(stderr, "profile_batch: %s: %s\n", what, strerror(errno));
	exit(1);
}

static long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static struct kfdp_queue_ref refs[MAXQ];
static long long samples[100000];

static int cmp_ll(const void *a, const void *b)
{
	long long x = *(const long long *)a, y = *(const long long *)b;

	return (x > y) - (x < y);
}
static struct kfdp_queue_info infos[MAXQ];

static void batch(int owner, unsigned long cmd, int k, __u32 flags)
{
	struct kfdp_batch b = {
		.entries_ptr = (uintptr_t)refs, .num_entries = k,
		.entry_size = sizeof(refs[0]), .flags = flags,
	};
	int i;

	if (ioctl(owner, cmd, &b))
		die("batch");
	for (i = 0; i < k; i++)
		if (refs[i].status)
			die("an entry failed");
}

#define DAEMON_TENANTS 4
#define TENANT_QUEUES 16
#define DAEMON_QUEUES (DAEMON_TENANTS * TENANT_QUEUES)

/*
 * One scheduler of the daemons mode: its own owner file and tenants, R
 * timed PREEMPTs of its 64 queues (each followed by an untimed RESUME);
 * writes its R samples to @out.
 */
static void one_daemon(int r, int out)
{
	struct kfdp_queue_ref mine[DAEMON_QUEUES];
	int owner = open("/dev/kfd_preempt", O_RDWR | O_CLOEXEC), t, q, i;

	if (owner < 0)
		die("open");
	for (t = 0; t < DAEMON_TENANTS; t++) {
		struct kfdp_attach a = { .kind = KFDP_TARGET_SIM_FD };
		int tenant = open("/dev/kfd_preempt_sim", O_RDWR | O_CLOEXEC);

		if (tenant < 0)
			die("open tenant");
		a.fd = tenant;
		if (ioctl(owner, KFDP_IOC_ATTACH, &a))
			die("attach");
		for (q = 0; q < TENANT_QUEUES; q++) {
			struct kfdp_sim_queue_create c = { .node = 0, .queue_type = 0 };

			if (ioctl(tenant, KFDP_SIM_IOC_CREATE_QUEUE, &c))
				die("create queue");
			mine[t * TENANT_QUEUES + q] = (struct kfdp_queue_ref){
				.handle = a.handle, .gpu_id = 0x5100, .queue_id = c.queue_id,
			};
		}
	}
	for (i = 0; i < r; i++) {
		struct kfdp_batch b = {
			.entries_ptr = (uintptr_t)mine, .num_entries = DAEMON_QUEUES,
			.entry_size = sizeof(mine[0]),
		};
		long long t0 = now_ns();

		if (ioctl(owner, KFDP_IOC_PREEMPT, &b) || b.num_ok != DAEMON_QUEUES)
			die("preempt");
		samples[i] = now_ns() - t0;
		if (ioctl(owner, KFDP_IOC_RESUME, &b) || b.num_ok != DAEMON_QUEUES)
			die("resume");
	}
	if (write(out, samples, r * sizeof(samples[0])) != (ssize_t)(r * sizeof(samples[0])))
		die("write");
	_exit(0);
}

/* K schedulers at once; prints the median and p99 over all their samples. */
static int schedulers(int k, int r)
{
	static long long all[100000];
	int p[2], i, n = 0, status, ok = 1;

	if (k * r > 100000 || pipe(p))
		return fprintf(stderr, "profile_batch: K * R <= 100000\n"), 2;
	for (i = 0; i < k; i++) {
		pid_t pid = fork();

		if (pid < 0)
			die("fork");
		if (pid == 0) {
			close(p[0]);
			one_daemon(r, p[1]);
		}
	}
	close(p[1]);
	while (n < k * r) {
		ssize_t got = read(p[0], (char *)all + n * sizeof(all[0]),
				   (k * r - n) * sizeof(all[0]));

		if (got <= 0)
			break;
		n += got / sizeof(all[0]);
	}
	for (i = 0; i < k; i++)
		ok &= wait(&status) > 0 && WIFEXITED(status) && !WEXITSTATUS(status);
	if (!ok || n != k * r)
		return fprintf(stderr, "profile_batch: a scheduler failed\n"), 1;
	qsort(all, n, sizeof(all[0]), cmp_ll);
	printf("daemons %d %d %lld p99 %lld\n", k, r, all[n / 2], all[n * 99 / 100]);
	return 0;
}

int main(int argc, char **argv)
{
	struct kfdp_attach a = { .kind = KFDP_TARGET_SIM_FD };
	const char *mode;
	long long t;
	int tenant, owner, k, r, i;

	if (argc != 4)
		return fprintf(stderr, "usage: profile_batch MODE K R\n"), 2;
	mode = argv[1];
	k = atoi(argv[2]);
	r = atoi(argv[3]);
	if (k < 1 || k > MAXQ || r < 1 || r > 100000)
		return fprintf(stderr, "profile_batch: 1 <= K <= %d, 1 <= R <= 100000\n", MAXQ), 2;
	if (!strcmp(mode, "daemons"))
		return schedulers(k, r);
	tenant = open("/dev/kfd_preempt_sim", O_RDWR | O_CLOEXEC);
	owner = open("/dev/kfd_preempt", O_RDWR | O_CLOEXEC);
	if (tenant < 0 || owner < 0)
		die("open");
	for (i = 0; i < k; i++) {
		struct kfdp_sim_queue_create c = { .node = 0, .queue_type = 0 };

		if (ioctl(tenant, KFDP_SIM_IOC_CREATE_QUEUE, &c))
			die("create queue");
		refs[i] = (struct kfdp_queue_ref){ .gpu_id = 0x5100, .queue_id = c.queue_id };
	}
	a.fd = tenant;
	if (ioctl(owner, KFDP_IOC_ATTACH, &a))
		die("attach");
	for (i = 0; i < k; i++)
		refs[i].handle = a.handle;

	for (i = 0; i < r; i++) {
		if (!strcmp(mode, "info")) {
			struct kfdp_info info = { 0 };

			t = now_ns();
			if (ioctl(owner, KFDP_IOC_INFO, &info))
				die("info");
			samples[i] = now_ns() - t;
		} else if (!strcmp(mode, "empty")) {
			t = now_ns();
			batch(owner, KFDP_IOC_PREEMPT, 0, 0);
			samples[i] = now_ns() - t;
		} else if (!strcmp(mode, "preempt")) {
			t = now_ns();
			batch(owner, KFDP_IOC_PREEMPT, k, 0);
			samples[i] = now_ns() - t;
			batch(owner, KFDP_IOC_RESUME, k, 0);
		} else if (!strcmp(mode, "validate")) {
			t = now_ns();
			batch(owner, KFDP_IOC_PREEMPT, k, KFDP_BATCH_VALIDATE_ONLY);
			samples[i] = now_ns() - t;
		} else if (!strcmp(mode, "freeze")) {
			struct kfdp_freeze f = { .handle = a.handle, .gpu_id = 0x5100 };

			t = now_ns();
			if (ioctl(owner, KFDP_IOC_FREEZE, &f) || f.status)
				die("freeze");
			samples[i] = now_ns() - t;
			memset(&f, 0, sizeof(f));
			f.handle = a.handle;
			f.gpu_id = 0x5100;
			if (ioctl(owner, KFDP_IOC_THAW, &f))
				die("thaw");
		} else if (!strcmp(mode, "query")) {
			struct kfdp_query q = {
				.handle = a.handle, .entries_ptr = (uintptr_t)infos,
				.capacity = MAXQ, .entry_size = sizeof(infos[0]),
			};

			t = now_ns();
			if (ioctl(owner, KFDP_IOC_QUERY, &q) || q.num_queues != (__u32)k)
				die("query");
			samples[i] = now_ns() - t;
		} else {
			return fprintf(stderr, "profile_batch: unknown mode %s\n", mode), 2;
		}
	}
	qsort(samples, r, sizeof(samples[0]), cmp_ll);
	printf("%s %d %d %lld\n", mode, k, r, samples[r / 2]);
	return 0;
}
