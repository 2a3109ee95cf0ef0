// SPDX-License-Identifier: GPL-2.0
/*
 * The main-job demo (make demo): on the simulated node, a tenant process
 * runs six queues (four on an HWS node, two on a MES node); a scheduler
 * daemon takes its /dev/kfd_preempt_sim fd with pidfd_getfd, attaches it,
 * lists its queues, preempts all six in one batch, shows that their
 * progress stops, resumes them, and shows that it continues with nothing
 * lost. Every number comes from the simulated node, not from a GPU.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <linux/kfd_preempt.h>

#define NQ 6

static void die(const char *what)
{
	fprintf(stderr, "sim_demo: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

static void progress(const char *when, int tenant, const int *qids)
{
	__u64 total = 0;
	int i;

	printf("  %-26s", when);
	for (i = 0; i < NQ; i++) {
		struct kfdp_sim_queue_status s = { .queue_id = qids[i] };

		if (ioctl(tenant, KFDP_SIM_IOC_QUEUE_STATUS, &s))
			die("QUEUE_STATUS");
		printf(" %7llu%s", (unsigned long long)s.retired,
		       s.state & KFDP_QS_SUSPENDED ? "*" : " ");
		total += s.retired + s.in_flight;
	}
	printf("  | retired+in-flight %llu\n", (unsigned long long)total);
}

static void batch(int owner, unsigned long cmd, const char *name,
		  struct kfdp_queue_ref *refs)
{
	struct kfdp_batch b = {
		.entries_ptr = (__u64)(uintptr_t)refs, .num_entries = NQ,
		.entry_size = sizeof(*refs),
	};

	if (ioctl(owner, cmd, &b))
		die(name);
	/* HWS: one update for the node; MES: one call per queue. */
	printf("%s: %u/%d queues in one call, %u runlist update(s), %llu ns (simulated)\n",
	       name, b.num_ok, NQ, b.num_runlist_updates,
	       (unsigned long long)b.elapsed_ns);
}

int main(void)
{
	int up[2], msg[1 + NQ], qids[NQ], owner, pidfd, tenant, i;
	struct kfdp_attach a = { .kind = KFDP_TARGET_SIM_FD };
	struct kfdp_queue_info qi[NQ];
	struct kfdp_queue_ref refs[NQ];
	struct kfdp_query q = { .entries_ptr = (__u64)(uintptr_t)qi,
				.entry_size = sizeof(qi[0]), .capacity = NQ };
	pid_t child;

	if (pipe(up))
		die("pipe");
	child = fork();
	if (child == 0) {
		/* The tenant: a "ROCm process" with six queues. */
		msg[0] = open("/dev/kfd_preempt_sim", O_RDWR);
		for (i = 0; i < NQ && msg[0] >= 0; i++) {
			struct kfdp_sim_queue_create c = { .node = i < 4 ? 0 : 1 };

			if (ioctl(msg[0], KFDP_SIM_IOC_CREATE_QUEUE, &c))
				die("CREATE_QUEUE");
			msg[1 + i] = c.queue_id;
		}
		if (write(up[1], msg, sizeof(msg)) != sizeof(msg))
			_exit(1);
		pause();
		_exit(0);
	}
	if (read(up[0], msg, sizeof(msg)) != sizeof(msg) || msg[0] < 0)
		die("tenant start");
	memcpy(qids, msg + 1, sizeof(qids));

	/* The scheduler daemon. */
	owner = open("/dev/kfd_preempt", O_RDWR);
	if (owner < 0)
		die("open /dev/kfd_preempt");
	pidfd = syscall(SYS_pidfd_open, child, 0);
	tenant = syscall(SYS_pidfd_getfd, pidfd, msg[0], 0);
	if (tenant < 0)
		die("pidfd_getfd");
	a.fd = tenant;
	if (ioctl(owner, KFDP_IOC_ATTACH, &a))
		die("ATTACH");
	printf("attached tenant pid %d: handle %u, %u GPU nodes\n", a.tgid, a.handle, a.num_gpus);

	q.handle = a.handle;
	if (ioctl(owner, KFDP_IOC_QUERY, &q))
		die("QUERY");
	printf("%-6s %-6s %-5s %-8s %-18s %s\n", "gpu", "queue", "type", "gc", "ring", "doorbell");
	for (i = 0; i < (int)q.num_written; i++) {
		printf("%-6x %-6u %-5s %-8x 0x%-16llx %u\n", qi[i].gpu_id, qi[i].queue_id,
		       qi[i].queue_type == 1 ? "sdma" : "comp", qi[i].gc_ip_version,
		       (unsigned long long)qi[i].ring_base_address, qi[i].doorbell_id);
		refs[i] = (struct kfdp_queue_ref){ a.handle, qi[i].gpu_id, qi[i].queue_id, 0 };
	}

	printf("work units retired per queue (* = preempted):\n");
	progress("running", tenant, qids);
	sleep_ms(100);
	progress("running, 100 ms later", tenant, qids);
	batch(owner, KFDP_IOC_PREEMPT, "PREEMPT", refs);
	progress("preempted", tenant, qids);
	sleep_ms(100);
	progress("preempted, 100 ms later", tenant, qids);
	batch(owner, KFDP_IOC_RESUME, "RESUME", refs);
	sleep_ms(100);
	progress("resumed, 100 ms later", tenant, qids);

	close(owner);
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	printf("the tenant's progress stopped while preempted and continued after; "
	       "closing the daemon's file would have resumed it too\n");
	return 0;
}
