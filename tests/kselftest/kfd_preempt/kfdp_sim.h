/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Helpers for the tests that run on the simulated node (sim_nodes=N):
 * the tenant device, the debugfs knobs, owners and batches
 * (Documentation/simulated-node.rst).
 */
#ifndef KFDP_SIM_H
#define KFDP_SIM_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>

#include "kfdp_test.h"

#define KFDP_SIM_DEV "/dev/kfd_preempt_sim"
#define KFDP_SIM_DBG "/sys/kernel/debug/kfd_preempt/sim"
#define KFDP_SIM_GPU0 0x5100 /* gpu_id of simulated node 0 */
#define KFDP_SIM_HWS 0 /* the VM loads node 0 as HWS... */
#define KFDP_SIM_MES 1 /* ...and node 1 as MES (sim_mes_nodes=2) */
#define KFDP_QT_COMPUTE 0
#define KFDP_QT_SDMA 1

/* Why the simulated tests cannot run here, or NULL if they can. */
static inline const char *kfdp_sim_absent(void)
{
	if (access(KFDP_DEV, F_OK))
		return KFDP_DEV " does not exist: kfd_preempt is not loaded";
	if (access(KFDP_SIM_DEV, F_OK))
		return "no simulated node: load kfd_preempt with sim_nodes=2 sim_mes_nodes=2";
	if (access(KFDP_SIM_DBG "/status", R_OK))
		return "debugfs is not mounted at /sys/kernel/debug";
	return NULL;
}

static inline void kfdp_sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* A tenant: one simulated KFD process (an open /dev/kfd_preempt_sim). */
static inline int kfdp_tenant_open(void)
{
	return open(KFDP_SIM_DEV, O_RDWR | O_CLOEXEC);
}

/* Creates a queue; returns its id, or -errno. */
static inline int kfdp_queue_create(int tenant, __u32 node, __u32 type)
{
	struct kfdp_sim_queue_create c = { .node = node, .queue_type = type, .priority = 7 };

	if (ioctl(tenant, KFDP_SIM_IOC_CREATE_QUEUE, &c))
		return -errno;
	return c.queue_id;
}

static inline int kfdp_queue_destroy(int tenant, __u32 queue_id)
{
	struct kfdp_sim_queue_destroy d = { .queue_id = queue_id };

	return kfdp_ioctl_errno(tenant, KFDP_SIM_IOC_DESTROY_QUEUE, &d);
}

/* Reads a queue's status; returns 0 or an errno. */
static inline int kfdp_queue_status(int tenant, __u32 queue_id,
				    struct kfdp_sim_queue_status *s)
{
	memset(s, 0, sizeof(*s));
	s->queue_id = queue_id;
	return kfdp_ioctl_errno(tenant, KFDP_SIM_IOC_QUEUE_STATUS, s);
}

/* A queue's state bits, or 0 if it cannot be read. */
static inline __u32 kfdp_queue_state(int tenant, __u32 queue_id)
{
	struct kfdp_sim_queue_status s;

	return kfdp_queue_status(tenant, queue_id, &s) ? 0 : s.state;
}

/* Writes a string to a file (debugfs, tracefs); returns 0 or an errno. */
static inline int kfdp_write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC), r = 0;

	if (fd < 0)
		return errno;
	if (write(fd, text, strlen(text)) < 0)
		r = errno;
	close(fd);
	return r;
}

/* Writes a string to a file of the sim's debugfs; returns 0 or an errno. */
static inline int kfdp_dbg_write(const char *file, const char *text)
{
	char path[128];

	snprintf(path, sizeof(path), KFDP_SIM_DBG "/%s", file);
	return kfdp_write_file(path, text);
}

/* Sends a command to the sim's control file, e.g. "evict 123 0". */
static inline int kfdp_control(const char *fmt, ...)
{
	char cmd[96];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	return kfdp_dbg_write("control", cmd);
}

static inline int kfdp_knob_set(int node, const char *knob, unsigned long long v)
{
	char file[64], text[32];

	snprintf(file, sizeof(file), "node%d/%s", node, knob);
	snprintf(text, sizeof(text), "%llu", v);
	return kfdp_dbg_write(file, text);
}

/*
 * A value of a file of "key value" pairs (debugfs): "key" for the first
 * line that has it, or "PREFIX:key" for a line that starts with the word
 * PREFIX (the sim's "nodeN:runlist_updates"). Returns -1 if it cannot be
 * read.
 */
static inline long long kfdp_stat_in(const char *path, const char *key)
{
	char line[256], want_node[16] = "", word[64];
	const char *colon = strchr(key, ':');
	long long v = -1;
	FILE *f = fopen(path, "r");

	if (!f)
		return -1;
	if (colon) {
		snprintf(want_node, sizeof(want_node), "%.*s", (int)(colon - key), key);
		key = colon + 1;
	}
	while (fgets(line, sizeof(line), f)) {
		char *p = line;
		int n;

		if (want_node[0]) {
			if (sscanf(p, "%63s%n", word, &n) != 1 || strcmp(word, want_node))
				continue;
			p += n;
		}
		while (sscanf(p, "%63s%n", word, &n) == 1) {
			p += n;
			if (!strcmp(word, key)) {
				v = strtoll(p, NULL, 10);
				goto out;
			}
			if (sscanf(p, "%63s%n", word, &n) == 1)
				p += n;
		}
	}
out:
	fclose(f);
	return v;
}

/*
 * A value of the sim's status file: "key" for the global counters, or
 * "nodeN:key" for a node's (runlist_updates, resets, queues, mapped).
 */
static inline long long kfdp_sim_stat(const char *key)
{
	return kfdp_stat_in(KFDP_SIM_DBG "/status", key);
}

/*
 * The number of simulated nodes (the "nodeN gpu_id" lines of status), or
 * -1. Node N, one past the last, is the first that does not exist.
 */
static inline int kfdp_sim_nodes(void)
{
	char line[256];
	int n = 0, node;
	FILE *f = fopen(KFDP_SIM_DBG "/status", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "node%d gpu_id", &node) == 1)
			n++;
	fclose(f);
	return n;
}

static inline long long kfdp_node_updates(int node)
{
	char key[32];

	snprintf(key, sizeof(key), "node%d:runlist_updates", node);
	return kfdp_sim_stat(key);
}

static inline int kfdp_owner_open(void)
{
	return open(KFDP_DEV, O_RDWR | O_CLOEXEC);
}

/* ATTACHes a simulated tenant fd; returns the handle, or -errno. */
static inline int kfdp_attach_sim(int owner, int tenant_fd)
{
	struct kfdp_attach a = { .kind = KFDP_TARGET_SIM_FD, .fd = tenant_fd };

	if (ioctl(owner, KFDP_IOC_ATTACH, &a))
		return -errno;
	return a.handle;
}

/*
 * The setup of most simulated tests: a new owner, a tenant of this process,
 * and the tenant attached to the owner. Returns the handle, or -errno of
 * the step that failed; whatever was opened is in *owner and *tenant (-1
 * if not) for the test's teardown to close.
 */
static inline int kfdp_owner_and_tenant(int *owner, int *tenant)
{
	*tenant = -1;
	*owner = kfdp_owner_open();
	if (*owner < 0)
		return -errno;
	*tenant = kfdp_tenant_open();
	if (*tenant < 0)
		return -errno;
	return kfdp_attach_sim(*owner, *tenant);
}

static inline struct kfdp_queue_ref kfdp_ref(__u32 handle, int node, __u32 queue_id)
{
	struct kfdp_queue_ref r = {
		.handle = handle, .gpu_id = KFDP_SIM_GPU0 + node, .queue_id = queue_id,
	};

	return r;
}

/*
 * PREEMPT or RESUME of @n entries; fills @b (may be NULL). Returns 0 or the
 * ioctl's errno.
 */
static inline int kfdp_batch(int owner, unsigned long cmd, struct kfdp_queue_ref *refs,
			     __u32 n, __u32 flags, __u32 lease_ms, struct kfdp_batch *b)
{
	struct kfdp_batch local;

	if (!b)
		b = &local;
	memset(b, 0, sizeof(*b));
	b->entries_ptr = (__u64)(uintptr_t)refs;
	b->num_entries = n;
	b->entry_size = sizeof(*refs);
	b->flags = flags;
	b->lease_ms = lease_ms;
	return kfdp_ioctl_errno(owner, cmd, b);
}

/* PREEMPT/RESUME of one queue; returns the ioctl errno, or the entry status. */
static inline int kfdp_one(int owner, unsigned long cmd, __u32 handle, int node, __u32 qid)
{
	struct kfdp_queue_ref r = kfdp_ref(handle, node, qid);
	int e = kfdp_batch(owner, cmd, &r, 1, 0, 0, NULL);

	return e ? -e : r.status;
}

static inline int kfdp_freeze(int owner, unsigned long cmd, __u32 handle, __u32 gpu_id,
			      struct kfdp_freeze *f)
{
	struct kfdp_freeze local;

	if (!f)
		f = &local;
	memset(f, 0, sizeof(*f));
	f->handle = handle;
	f->gpu_id = gpu_id;
	return kfdp_ioctl_errno(owner, cmd, f);
}

/* The queue's work counters: retired + in flight (never decreases). */
static inline __u64 kfdp_queue_total(int tenant, __u32 qid)
{
	struct kfdp_sim_queue_status s;

	if (kfdp_queue_status(tenant, qid, &s))
		return 0;
	return s.retired + s.in_flight;
}

/*
 * A tenant in a child process: it opens the sim device, creates @nq
 * compute queues on @node, writes its fd number and queue ids to the pipe,
 * then waits until killed (or until the pipe to it closes).
 */
struct kfdp_child {
	pid_t pid;
	int pidfd;
	int fd;		/* the child's tenant fd, duplicated with pidfd_getfd */
	int qids[64];
	int nq;
	int ctl;	/* write end: closing it makes the child exit */
};

static inline int kfdp_child_start(struct kfdp_child *c, int node, int nq)
{
	int up[2], down[2];
	int msg[66];

	memset(c, 0, sizeof(*c));
	c->fd = c->pidfd = -1;
	if (nq > 64 || pipe(up) || pipe(down))
		return -1;
	c->pid = fork();
	if (c->pid < 0)
		return -1;
	if (c->pid == 0) {
		char b;
		int t = kfdp_tenant_open(), i;

		close(up[0]);
		close(down[1]);
		msg[0] = t;
		msg[1] = nq;
		for (i = 0; i < nq && t >= 0; i++)
			msg[2 + i] = kfdp_queue_create(t, node, KFDP_QT_COMPUTE);
		if (write(up[1], msg, sizeof(msg)) != sizeof(msg))
			_exit(1);
		while (read(down[0], &b, 1) < 0 && errno == EINTR)
			;
		_exit(0);
	}
	close(up[1]);
	close(down[0]);
	c->ctl = down[1];
	if (read(up[0], msg, sizeof(msg)) != sizeof(msg) || msg[0] < 0) {
		close(up[0]);
		return -1;
	}
	close(up[0]);
	c->nq = nq;
	memcpy(c->qids, &msg[2], nq * sizeof(int));
	for (int i = 0; i < nq; i++)
		if (c->qids[i] < 0)
			return -1;
	c->pidfd = syscall(SYS_pidfd_open, c->pid, 0);
	if (c->pidfd < 0)
		return -1;
	c->fd = syscall(SYS_pidfd_getfd, c->pidfd, msg[0], 0);
	return c->fd < 0 ? -1 : 0;
}

/* Ends the child: with SIGKILL if @kill, else by closing its pipe. */
static inline int kfdp_child_stop(struct kfdp_child *c, int kill_it)
{
	int status = 0;

	if (c->pid <= 0)
		return 0;
	if (kill_it)
		kill(c->pid, SIGKILL);
	close(c->ctl);
	waitpid(c->pid, &status, 0);
	c->pid = 0;
	if (c->pidfd >= 0)
		close(c->pidfd);
	c->pidfd = -1;
	return status;
}

/*
 * After a test closed its files: nothing suspended, nothing on the hardware
 * that should not be, no work lost. A macro, for the harness's EXPECT_EQ.
 */
#define KFDP_EXPECT_SIM_CLEAN() do {					\
	if (!kfdp_sim_absent()) {					\
		EXPECT_EQ(0, kfdp_sim_stat("suspended"));		\
		EXPECT_EQ(0, kfdp_sim_stat("misplaced"));		\
		EXPECT_EQ(0, kfdp_sim_stat("conservation_errors"));	\
	}								\
} while (0)

/* Waits until the module's housekeeping (100 ms) has had time to run. */
#define KFDP_HOUSEKEEPING_MS 250

#endif /* KFDP_SIM_H */
