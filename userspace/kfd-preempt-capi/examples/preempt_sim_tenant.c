// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * A C scheduler's view of libkfdpreempt: attach a simulated tenant by pid,
 * list its queues, preempt them all in one batch, check that its progress
 * stops, resume them, check that it restarts, and check that errors come
 * with a message. Prints KTAP, so the test VM runs it as a kselftest.
 *
 * The tenant is a child process that opens /dev/kfd_preempt_sim (the
 * module's simulated node, sim_nodes=N) and answers progress requests over
 * a pipe: a scheduler never sees a tenant's progress on real hardware.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <linux/kfd_preempt.h>
#include "kfdpreempt.h"

#define NQUEUES 4

static int test_num;
static int failures;

static void result(int ok, const char *what)
{
	printf("%sok %d %s\n", ok ? "" : "not ", ++test_num, what);
	if (!ok)
		failures++;
}

static void sleep_ms(long ms)
{
	struct timespec t = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&t, NULL);
}

/* The tenant: creates the queues, then answers 's' with its total progress. */
static void tenant(int req, int resp)
{
	uint32_t ids[NQUEUES];
	char c;
	int fd = open("/dev/kfd_preempt_sim", O_RDWR);

	for (int i = 0; fd >= 0 && i < NQUEUES; i++) {
		struct kfdp_sim_queue_create q = { .node = 0, .queue_type = 2 };

		if (ioctl(fd, KFDP_SIM_IOC_CREATE_QUEUE, &q))
			_exit(1);
		ids[i] = q.queue_id;
	}
	c = fd >= 0 ? 'r' : 'x';
	if (write(resp, &c, 1) != 1 || fd < 0)
		_exit(1);
	while (read(req, &c, 1) == 1) {
		uint64_t total = 0;

		for (int i = 0; i < NQUEUES; i++) {
			struct kfdp_sim_queue_status s = { .queue_id = ids[i] };

			if (!ioctl(fd, KFDP_SIM_IOC_QUEUE_STATUS, &s))
				total += s.retired;
		}
		if (write(resp, &total, sizeof(total)) != sizeof(total))
			_exit(1);
	}
	_exit(0);
}

static int req_fd, resp_fd;

static uint64_t progress(void)
{
	uint64_t total = 0;

	if (write(req_fd, "s", 1) != 1 ||
	    read(resp_fd, &total, sizeof(total)) != sizeof(total))
		return 0;
	return total;
}

int main(void)
{
	struct kfdpreempt_queue_info info[16];
	struct kfdpreempt_queue batch[16];
	struct kfdpreempt_batch_result res;
	struct kfdpreempt_device *dev;
	int to_tenant[2], from_tenant[2];
	uint64_t p0, p1, p2;
	uint32_t handle;
	size_t n = 0;
	pid_t child;
	char c = 0;
	int ok;

	printf("TAP version 13\n");
	if (access("/dev/kfd_preempt_sim", F_OK)) {
		printf("1..0 # SKIP no simulated node (load kfd_preempt with sim_nodes=N)\n");
		return 4;
	}
	printf("1..9\n");
	if (pipe(to_tenant) || pipe(from_tenant))
		return 1;
	child = fork();
	if (child == 0) {
		close(to_tenant[1]);
		close(from_tenant[0]);
		tenant(to_tenant[0], from_tenant[1]);
	}
	close(to_tenant[0]);
	close(from_tenant[1]);
	req_fd = to_tenant[1];
	resp_fd = from_tenant[0];
	if (read(resp_fd, &c, 1) != 1 || c != 'r')
		printf("# the tenant did not start\n");

	ok = kfdpreempt_open(&dev) == 0 &&
	     kfdpreempt_attach_pid(dev, child, &handle) == 0;
	if (!ok)
		printf("# %s\n", kfdpreempt_last_error());
	result(ok, "open and attach the tenant by pid");

	ok = ok && kfdpreempt_query(dev, handle, 0, info, sizeof(info[0]), 16, &n) == 0 &&
	     n == NQUEUES;
	result(ok, "query lists the tenant's queues");

	for (size_t i = 0; i < n; i++)
		batch[i] = (struct kfdpreempt_queue){ handle, info[i].gpu_id,
						      info[i].queue_id, -1 };
	ok = kfdpreempt_preempt(dev, batch, n, 0, 0, &res) == 0 &&
	     res.num_ok == n && res.runlist_updates == 1;
	for (size_t i = 0; i < n; i++)
		ok = ok && batch[i].status == 0;
	printf("# preempt: %u/%zu queues, %u runlist update(s), %llu ns in the module\n",
	       res.num_ok, n, res.runlist_updates,
	       (unsigned long long)res.elapsed_ns);
	result(ok, "one batch preempts every queue in one runlist update");

	p0 = progress();
	sleep_ms(100);
	p1 = progress();
	printf("# progress while preempted: %llu -> %llu\n",
	       (unsigned long long)p0, (unsigned long long)p1);
	result(p0 > 0 && p0 == p1, "progress stops while preempted");

	ok = kfdpreempt_resume(dev, batch, n, 0, &res) == 0 && res.num_ok == n;
	result(ok, "resume puts every queue back");

	sleep_ms(100);
	p2 = progress();
	printf("# progress after resume: %llu -> %llu\n",
	       (unsigned long long)p1, (unsigned long long)p2);
	result(p2 > p1, "progress restarts after resume");

	{
		uint64_t took = 0;

		ok = kfdpreempt_freeze(dev, handle, 0, 0, &took) == 0 &&
		     kfdpreempt_freeze(dev, handle, 0, 1, NULL) == 0;
		printf("# freeze: %llu ns in the module\n", (unsigned long long)took);
		result(ok, "freeze and thaw, with the module's time");
	}

	/* The module answers an unknown node and an unknown handle alike. */
	ok = kfdpreempt_query(dev, handle, 0x51ff, info, sizeof(info[0]), 16, &n) == -EINVAL &&
	     strstr(kfdpreempt_last_error(), "gpu_id 0x51ff is not a node");
	printf("# %s\n", kfdpreempt_last_error());
	ok = ok && kfdpreempt_query(dev, 4242, 0x5100, info, sizeof(info[0]), 16, &n) == -EINVAL &&
	     strstr(kfdpreempt_last_error(), "handle 4242");
	printf("# %s\n", kfdpreempt_last_error());
	result(ok, "an unknown gpu_id is told apart from an unknown handle");

	ok = kfdpreempt_attach_pid(dev, 1, &handle) == -ENOENT &&
	     strstr(kfdpreempt_last_error(), "no /dev/kfd open") &&
	     kfdpreempt_preempt(dev, batch, n, 1u << 7, 0, &res) == -EINVAL;
	printf("# %s\n", kfdpreempt_last_error());
	result(ok, "errors are negative errnos with a message");

	kfdpreempt_close(dev);
	close(req_fd);
	waitpid(child, NULL, 0);
	return failures ? 1 : 0;
}
