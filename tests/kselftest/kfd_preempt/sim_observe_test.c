// SPDX-License-Identifier: GPL-2.0
/*
 * What an operator can see, on the simulated node: the kfd_preempt:* trace
 * events (one batch, its per-queue outcomes, attach, freeze, lease expiry,
 * target exit) and the debugfs files kfd_preempt/stats and
 * kfd_preempt/attachments (Documentation/admin-guide.rst, "Statistics and
 * tracing").
 */
#define _GNU_SOURCE
#include <sys/mount.h>

#include "kfdp_sim.h"
#include "kselftest_harness.h"

#define TRACEFS "/sys/kernel/tracing"
#define KFDP_DBG "/sys/kernel/debug/kfd_preempt"
#define NQ 3

/* Mounts tracefs if it is not; returns why the events cannot be read. */
static const char *tracefs_absent(void)
{
	if (access(TRACEFS "/trace", W_OK) &&
	    mount("nodev", TRACEFS, "tracefs", 0, NULL) && errno != EBUSY)
		return "tracefs cannot be mounted at " TRACEFS;
	if (access(TRACEFS "/events/kfd_preempt", F_OK))
		return "no kfd_preempt events in tracefs (CONFIG_EVENT_TRACING?)";
	return NULL;
}

/* The whole of a (small) text file, NUL-terminated; free() it. */
static char *read_file(const char *path)
{
	size_t cap = 1 << 16, len = 0;
	char *buf = malloc(cap);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (!buf || fd < 0) {
		free(buf);
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	while ((n = read(fd, buf + len, cap - len - 1)) > 0) {
		len += n;
		if (len + 1 == cap) {
			char *more = realloc(buf, cap * 2);

			if (!more)
				break;
			buf = more;
			cap *= 2;
		}
	}
	close(fd);
	buf[len] = 0;
	return buf;
}

/* How many lines of @text contain every one of the NULL-ended needles. */
static int count_lines(const char *text, ...)
{
	const char *line = text;
	int count = 0;

	while (line && *line) {
		const char *end = strchr(line, '\n');
		size_t len = end ? (size_t)(end - line) : strlen(line);
		char one[512];
		const char *needle;
		va_list ap;
		int all = 1;

		snprintf(one, sizeof(one), "%.*s", (int)len, line);
		va_start(ap, text);
		while ((needle = va_arg(ap, const char *)))
			all &= strstr(one, needle) != NULL;
		va_end(ap);
		count += all;
		line = end ? end + 1 : NULL;
	}
	return count;
}

/* A module-wide counter of kfd_preempt/stats, or -1. */
static long long module_stat(const char *key)
{
	return kfdp_stat_in(KFDP_DBG "/stats", key);
}

/* This process's owner number, from the "owner N tgid P" lines, or -1. */
static long long my_owner(void)
{
	char *s = read_file(KFDP_DBG "/stats"), want[32];
	long long id = -1;
	const char *line = s;

	snprintf(want, sizeof(want), " tgid %d ", getpid());
	while (line && *line) {
		const char *end = strchr(line, '\n');

		if (!strncmp(line, "owner ", 6) && strstr(line, want) &&
		    (!end || strstr(line, want) < end)) {
			id = strtoll(line + 6, NULL, 10);
			break;
		}
		line = end ? end + 1 : NULL;
	}
	free(s);
	return id;
}

FIXTURE(observe) {
	int owner, tenant, handle;
	int qids[NQ];
	long long id;		/* this owner's number */
	char owner_tag[32];	/* "owner=N " as the events print it */
};

FIXTURE_SETUP(observe)
{
	const char *why = kfdp_sim_absent();
	int i;

	self->owner = self->tenant = -1;
	if (!why && access(KFDP_DBG "/stats", R_OK))
		why = "no " KFDP_DBG "/stats";
	if (!why)
		why = tracefs_absent();
	if (why)
		SKIP(return, "%s", why);
	/* Events on, and an empty buffer: only this test's events count. */
	ASSERT_EQ(0, kfdp_write_file(TRACEFS "/events/kfd_preempt/enable", "1"));
	ASSERT_EQ(0, kfdp_write_file(TRACEFS "/trace", ""));
	self->handle = kfdp_owner_and_tenant(&self->owner, &self->tenant);
	ASSERT_LT(0, self->handle);
	for (i = 0; i < NQ; i++) {
		self->qids[i] = kfdp_queue_create(self->tenant, KFDP_SIM_HWS, KFDP_QT_COMPUTE);
		ASSERT_LE(0, self->qids[i]);
	}
	self->id = my_owner();
	ASSERT_LT(0, self->id) TH_LOG("stats lists no owner of tgid %d", getpid());
	snprintf(self->owner_tag, sizeof(self->owner_tag), "owner=%lld ", self->id);
}

FIXTURE_TEARDOWN(observe)
{
	if (self->owner >= 0)
		close(self->owner);
	if (self->tenant >= 0)
		close(self->tenant);
	kfdp_write_file(TRACEFS "/events/kfd_preempt/enable", "0");
	KFDP_EXPECT_SIM_CLEAN();
}

static int preempt_all(struct _test_data_observe *self, unsigned long cmd, __u32 lease_ms)
{
	struct kfdp_queue_ref r[NQ];
	int i;

	for (i = 0; i < NQ; i++)
		r[i] = kfdp_ref(self->handle, KFDP_SIM_HWS, self->qids[i]);
	return kfdp_batch(self->owner, cmd, r, NQ, 0, lease_ms, NULL);
}

/* Every event the admin guide lists exists in tracefs. */
TEST_F(observe, events_are_in_tracefs)
{
	static const char *const events[] = {
		"kfdp_attach", "kfdp_detach", "kfdp_target_exit", "kfdp_batch",
		"kfdp_queue", "kfdp_freeze", "kfdp_lease_expired",
	};
	char path[128];
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(events); i++) {
		snprintf(path, sizeof(path), TRACEFS "/events/kfd_preempt/%s/format", events[i]);
		EXPECT_EQ(0, access(path, R_OK)) TH_LOG("%s", path);
	}
}

/* One batch: its event, one event per entry, and the ATTACH before it. */
TEST_F(observe, one_batch_is_traced)
{
	char q[64], h[32];
	char *t;
	int i;

	ASSERT_EQ(0, preempt_all(self, KFDP_IOC_PREEMPT, 0));
	ASSERT_EQ(0, preempt_all(self, KFDP_IOC_RESUME, 0));
	t = read_file(TRACEFS "/trace");
	ASSERT_NE(NULL, t);
	snprintf(h, sizeof(h), "handle=%d ", self->handle);
	EXPECT_EQ(1, count_lines(t, "kfdp_attach:", self->owner_tag, h, (char *)NULL));
	EXPECT_EQ(1, count_lines(t, "kfdp_batch:", self->owner_tag, "op=preempt",
				 "entries=3 ok=3 nodes=1 runlist_updates=1 ", (char *)NULL))
		TH_LOG("%s", t);
	EXPECT_EQ(1, count_lines(t, "kfdp_batch:", self->owner_tag, "op=resume",
				 "entries=3 ok=3 nodes=1 runlist_updates=1 ", (char *)NULL));
	for (i = 0; i < NQ; i++) {
		snprintf(q, sizeof(q), "gpu_id=%u queue_id=%d status=0", KFDP_SIM_GPU0,
			 self->qids[i]);
		EXPECT_EQ(1, count_lines(t, "kfdp_queue:", self->owner_tag, "op=preempt",
					 q, (char *)NULL));
		EXPECT_EQ(1, count_lines(t, "kfdp_queue:", self->owner_tag, "op=resume",
					 q, (char *)NULL));
	}
	free(t);
}

/* A refused entry is traced with its status; the batch counts it as not ok. */
TEST_F(observe, refused_entry_is_traced_with_its_status)
{
	struct kfdp_queue_ref r = kfdp_ref(self->handle, KFDP_SIM_HWS, 999);
	char want[64];
	char *t;

	ASSERT_EQ(0, kfdp_batch(self->owner, KFDP_IOC_PREEMPT, &r, 1, 0, 0, NULL));
	ASSERT_EQ(-ENOENT, r.status);
	t = read_file(TRACEFS "/trace");
	ASSERT_NE(NULL, t);
	snprintf(want, sizeof(want), "queue_id=999 status=%d", -ENOENT);
	EXPECT_EQ(1, count_lines(t, "kfdp_queue:", self->owner_tag, want, (char *)NULL));
	EXPECT_EQ(1, count_lines(t, "kfdp_batch:", self->owner_tag,
				 "entries=1 ok=0 nodes=1 runlist_updates=0 ", (char *)NULL));
	free(t);
}

/* FREEZE and THAW of a node, and a lease that ends. */
TEST_F(observe, freeze_and_lease_expiry_are_traced)
{
	char *t;

	ASSERT_EQ(0, kfdp_freeze(self->owner, KFDP_IOC_FREEZE, self->handle,
				 KFDP_SIM_GPU0, NULL));
	ASSERT_EQ(0, kfdp_freeze(self->owner, KFDP_IOC_THAW, self->handle,
				 KFDP_SIM_GPU0, NULL));
	ASSERT_EQ(0, preempt_all(self, KFDP_IOC_PREEMPT, 20));
	kfdp_sleep_ms(300);
	t = read_file(TRACEFS "/trace");
	ASSERT_NE(NULL, t);
	EXPECT_EQ(1, count_lines(t, "kfdp_freeze:", self->owner_tag, " freeze status=0",
				 (char *)NULL));
	EXPECT_EQ(1, count_lines(t, "kfdp_freeze:", self->owner_tag, " thaw status=0",
				 (char *)NULL));
	EXPECT_EQ(1, count_lines(t, "kfdp_lease_expired:", self->owner_tag, "queues=3",
				 (char *)NULL)) TH_LOG("%s", t);
	free(t);
}

/* A target that exits is dropped by housekeeping, and traced. */
TEST_F(observe, target_exit_is_traced)
{
	struct kfdp_child c;
	char h[32];
	char *t;
	int handle;

	ASSERT_EQ(0, kfdp_child_start(&c, KFDP_SIM_HWS, 1));
	handle = kfdp_attach_sim(self->owner, c.fd);
	ASSERT_LT(0, handle);
	close(c.fd);
	kfdp_child_stop(&c, 1);
	/* Housekeeping sweeps exited targets every 100 ms. */
	kfdp_sleep_ms(400);
	t = read_file(TRACEFS "/trace");
	ASSERT_NE(NULL, t);
	snprintf(h, sizeof(h), "handle=%d", handle);
	EXPECT_EQ(1, count_lines(t, "kfdp_target_exit:", self->owner_tag, h, (char *)NULL))
		TH_LOG("%s", t);
	free(t);
}

/*
 * A scheduler that renews a lease every 20 ms re-arms housekeeping at every
 * call: that must not postpone the periodic sweep, which is what drops the
 * pin of a target that exited (PREEMPT and RESUME do not sweep).
 */
TEST_F(observe, sweep_runs_while_leases_are_renewed)
{
	struct kfdp_queue_ref r = kfdp_ref(self->handle, KFDP_SIM_HWS, self->qids[0]);
	struct kfdp_child c;
	char h[32];
	char *t;
	int handle, i;

	ASSERT_EQ(0, kfdp_child_start(&c, KFDP_SIM_HWS, 1));
	handle = kfdp_attach_sim(self->owner, c.fd);
	ASSERT_LT(0, handle);
	close(c.fd);
	kfdp_child_stop(&c, 1);
	for (i = 0; i < 30; i++) {
		ASSERT_EQ(0, kfdp_batch(self->owner, KFDP_IOC_PREEMPT, &r, 1, 0, 1000, NULL));
		kfdp_sleep_ms(20);
	}
	t = read_file(TRACEFS "/trace");
	ASSERT_NE(NULL, t);
	snprintf(h, sizeof(h), "handle=%d", handle);
	EXPECT_EQ(1, count_lines(t, "kfdp_target_exit:", self->owner_tag, h, (char *)NULL))
		TH_LOG("no sweep in 600 ms of lease renewals");
	free(t);
	ASSERT_EQ(0, kfdp_batch(self->owner, KFDP_IOC_RESUME, &r, 1, 0, 0, NULL));
}

/* The module-wide counters and the hardware-phase histogram move by one batch. */
TEST_F(observe, stats_count_a_batch)
{
	long long batches = module_stat("preempt_batches"), queues = module_stat("queues_preempted");
	long long updates = module_stat("runlist_updates");
	char *before = read_file(KFDP_DBG "/stats"), *after;
	long long in_hist[2] = { 0, 0 };
	char *s[2];
	int k;

	ASSERT_LE(0, batches);
	ASSERT_EQ(0, preempt_all(self, KFDP_IOC_PREEMPT, 0));
	after = read_file(KFDP_DBG "/stats");
	EXPECT_EQ(batches + 1, module_stat("preempt_batches"));
	EXPECT_EQ(queues + NQ, module_stat("queues_preempted"));
	EXPECT_EQ(updates + 1, module_stat("runlist_updates"));
	/* The histogram holds one more PREEMPT batch, in some bucket. */
	s[0] = before;
	s[1] = after;
	for (k = 0; k < 2; k++) {
		char *line = s[k] ? strstr(s[k], "preempt_hw_phase_us") : NULL;
		char *end = line ? strchr(line, '\n') : NULL;
		char *p = line;

		ASSERT_NE(NULL, line);
		while ((p = strchr(p, ':')) && (!end || p < end)) {
			in_hist[k] += strtoll(p + 1, NULL, 10);
			p++;
		}
	}
	EXPECT_EQ(in_hist[0] + 1, in_hist[1]);
	free(before);
	free(after);
	ASSERT_EQ(0, preempt_all(self, KFDP_IOC_RESUME, 0));
}

/* attachments: this owner, its target, and the queues it holds with leases. */
TEST_F(observe, attachments_show_what_is_held)
{
	char want[96], h[32];
	char *a;
	int i;

	ASSERT_EQ(0, preempt_all(self, KFDP_IOC_PREEMPT, 60000));
	a = read_file(KFDP_DBG "/attachments");
	ASSERT_NE(NULL, a);
	snprintf(want, sizeof(want), "tgid %d attachments 1 marks %d freezes 0", getpid(), NQ);
	EXPECT_EQ(1, count_lines(a, "owner ", want, (char *)NULL)) TH_LOG("%s", a);
	snprintf(h, sizeof(h), "  handle %d tgid %d gpus ", self->handle, getpid());
	EXPECT_EQ(1, count_lines(a, h, (char *)NULL));
	for (i = 0; i < NQ; i++) {
		snprintf(want, sizeof(want), "    queue gpu_id %#x queue_id %d lease_left_ms ",
			 KFDP_SIM_GPU0, self->qids[i]);
		EXPECT_EQ(1, count_lines(a, want, (char *)NULL));
	}
	free(a);
	ASSERT_EQ(0, preempt_all(self, KFDP_IOC_RESUME, 0));
	a = read_file(KFDP_DBG "/attachments");
	ASSERT_NE(NULL, a);
	snprintf(want, sizeof(want), "tgid %d attachments 1 marks 0 freezes 0", getpid());
	EXPECT_EQ(1, count_lines(a, "owner ", want, (char *)NULL));
	EXPECT_EQ(0, count_lines(a, "    queue ", (char *)NULL));
	free(a);
}

/* A closed file is gone from both files. */
TEST_F(observe, closed_owner_is_not_listed)
{
	char want[48];
	char *a;

	close(self->owner);
	self->owner = -1;
	EXPECT_EQ(-1, my_owner());
	a = read_file(KFDP_DBG "/attachments");
	ASSERT_NE(NULL, a);
	snprintf(want, sizeof(want), "owner %lld tgid ", self->id);
	EXPECT_EQ(0, count_lines(a, want, (char *)NULL));
	free(a);
}

TEST_HARNESS_MAIN
