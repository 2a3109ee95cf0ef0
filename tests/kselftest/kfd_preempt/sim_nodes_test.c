// SPDX-License-Identifier: GPL-2.0
/*
 * Many simulated nodes (an MI300X host in CPX mode has 64) and each node's
 * reaction log, debugfs nodeN/preempt_log and nodeN/suspended_queues
 * (Documentation/simulated-node.rst): one record per runlist cycle or MES
 * call that took queues off the node for a PREEMPT, with when the oldest
 * dispatch still waiting on a queue that stayed mapped became visible.
 */
#define _GNU_SOURCE
#include <sys/mman.h>

#include "kfdp_sim.h"
#include "kselftest_harness.h"

#define MS 1000000ull
#define PACKETS 16
#define LOG_MAX 64

/* One ring queue: its packets, and a page holding its two indices. */
struct ring {
	struct kfdp_sim_packet *pkt;
	__u64 *read_index;	/* written by the node */
	__u64 *write_index;	/* written by us */
	__u32 queue_id;
};

struct log_record {
	long long unmap_ns, queues, doorbell_ns;
};

static __u64 now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

/* Creates a ring queue on @node; returns 0 or -errno. */
static int ring_create(int tenant, int node, struct ring *r)
{
	long page = sysconf(_SC_PAGESIZE);
	char *mem = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct kfdp_sim_ring_create c = { 0 };

	if (mem == MAP_FAILED)
		return -errno;
	memset(mem, 0, 2 * page);
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

/* Publishes one dispatch of @work_ns and rings the doorbell. */
static int submit(int tenant, struct ring *r, __u64 work_ns)
{
	__u64 i = *r->write_index;
	struct kfdp_sim_packet *p = &r->pkt[i % PACKETS];
	struct kfdp_sim_doorbell d = { .queue_id = r->queue_id };

	memset(p, 0, sizeof(*p));
	p->header = KFDP_SIM_PKT_DISPATCH;
	p->work_ns = work_ns;
	p->tag = i;
	__atomic_store_n(r->write_index, i + 1, __ATOMIC_RELEASE);
	return kfdp_ioctl_errno(tenant, KFDP_SIM_IOC_DOORBELL, &d);
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

/*
 * Reads node @node's preempt_log: the dropped count into *dropped and up
 * to @cap records into @out. Returns the number of records, or -1 if the
 * file is missing or malformed.
 */
static int log_read(int node, long long *dropped, struct log_record *out, int cap)
{
	char path[128], line[256];
	int n = 0;
	FILE *f;

	snprintf(path, sizeof(path), KFDP_SIM_DBG "/node%d/preempt_log", node);
	f = fopen(path, "r");
	if (!f)
		return -1;
	if (!fgets(line, sizeof(line), f) || sscanf(line, "# dropped %lld", dropped) != 1) {
		fclose(f);
		return -1;
	}
	while (fgets(line, sizeof(line), f)) {
		struct log_record r;

		if (sscanf(line, "%lld %lld %lld", &r.unmap_ns, &r.queues, &r.doorbell_ns) != 3) {
			n = -1;
			break;
		}
		if (n < cap)
			out[n] = r;
		n++;
	}
	fclose(f);
	return n;
}

static int log_clear(int node)
{
	char file[64];

	snprintf(file, sizeof(file), "node%d/preempt_log", node);
	return kfdp_dbg_write(file, "clear");
}

/* A node's nodeN/suspended_queues, or -1. */
static long long node_suspended(int node)
{
	char path[128], line[64];
	long long v = -1;
	FILE *f;

	snprintf(path, sizeof(path), KFDP_SIM_DBG "/node%d/suspended_queues", node);
	f = fopen(path, "r");
	if (!f)
		return -1;
	if (fgets(line, sizeof(line), f))
		v = strtoll(line, NULL, 10);
	fclose(f);
	return v;
}

FIXTURE(nodes) {
	int owner, tenant, handle;
};

FIXTURE_SETUP(nodes)
{
	const char *why = kfdp_sim_absent();

	self->owner = self->tenant = -1;
	if (why)
		SKIP(return, "%s", why);
	self->handle = kfdp_owner_and_tenant(&self->owner, &self->tenant);
	ASSERT_LT(0, self->handle) TH_LOG("owner, tenant and ATTACH: %s", strerror(-self->handle));
}

FIXTURE_TEARDOWN(nodes)
{
	if (self->owner >= 0)
		close(self->owner);
	if (self->tenant >= 0)
		close(self->tenant);
	KFDP_EXPECT_SIM_CLEAN();
}

/*
 * An MI300X host in CPX mode: a queue on the highest node works like one
 * on node 0, and that node has its own knobs and log.
 */
TEST_F(nodes, queue_on_highest_node)
{
	int nodes = kfdp_sim_nodes(), top, qid;
	struct kfdp_sim_queue_create c = { .queue_type = KFDP_QT_COMPUTE, .priority = 7 };
	struct kfdp_queue_info info[2];
	struct kfdp_query q = { 0 };
	struct log_record rec[LOG_MAX];
	long long dropped, before;
	char path[128];

	ASSERT_LT(0, nodes) TH_LOG("no nodeN line in status");
	if (nodes < 16)
		SKIP(return, "the module has %d simulated nodes; this needs >= 16 (sim_nodes=16)",
		     nodes);
	top = nodes - 1;

	/* The node past the last does not exist. */
	c.node = nodes;
	EXPECT_EQ(EINVAL, kfdp_ioctl_errno(self->tenant, KFDP_SIM_IOC_CREATE_QUEUE, &c));
	snprintf(path, sizeof(path), KFDP_SIM_DBG "/node%d", nodes);
	EXPECT_NE(0, access(path, F_OK));

	qid = kfdp_queue_create(self->tenant, top, KFDP_QT_COMPUTE);
	ASSERT_LE(0, qid) TH_LOG("create on node %d: %s", top, strerror(-qid));
	EXPECT_EQ(KFDP_QS_ACTIVE, kfdp_queue_state(self->tenant, qid));

	q.handle = self->handle;
	q.gpu_id = KFDP_SIM_GPU0 + top;
	q.entries_ptr = (__u64)(uintptr_t)info;
	q.entry_size = sizeof(info[0]);
	q.capacity = 2;
	ASSERT_EQ(0, kfdp_ioctl_errno(self->owner, KFDP_IOC_QUERY, &q));
	ASSERT_EQ(1, q.num_queues);
	EXPECT_EQ(KFDP_SIM_GPU0 + top, info[0].gpu_id);
	EXPECT_EQ(qid, info[0].queue_id);

	ASSERT_EQ(0, log_clear(top));
	before = node_suspended(top);
	ASSERT_LE(0, before);
	ASSERT_EQ(0, kfdp_one(self->owner, KFDP_IOC_PREEMPT, self->handle, top, qid));
	EXPECT_EQ(KFDP_QS_SUSPENDED, kfdp_queue_state(self->tenant, qid));
	EXPECT_EQ(before + 1, node_suspended(top));
	ASSERT_EQ(1, log_read(top, &dropped, rec, LOG_MAX));
	EXPECT_EQ(1, rec[0].queues);
	EXPECT_EQ(0, rec[0].doorbell_ns);
	ASSERT_EQ(0, kfdp_one(self->owner, KFDP_IOC_RESUME, self->handle, top, qid));
	EXPECT_EQ(KFDP_QS_ACTIVE, kfdp_queue_state(self->tenant, qid));
	EXPECT_EQ(1, log_read(top, &dropped, rec, LOG_MAX)) TH_LOG("RESUME was logged");
	EXPECT_EQ(0, log_clear(top));
}

/* The log tests run on an HWS node (one cycle) and a MES node (per queue). */
FIXTURE(rlog) {
	int owner, tenant, handle;
	struct ring be, lc;
};

FIXTURE_VARIANT(rlog) {
	int node;
};

FIXTURE_VARIANT_ADD(rlog, hws) {
	.node = KFDP_SIM_HWS,
};

FIXTURE_VARIANT_ADD(rlog, mes) {
	.node = KFDP_SIM_MES,
};

FIXTURE_SETUP(rlog)
{
	const char *why = kfdp_sim_absent();

	self->owner = self->tenant = -1;
	if (why)
		SKIP(return, "%s", why);
	self->handle = kfdp_owner_and_tenant(&self->owner, &self->tenant);
	ASSERT_LT(0, self->handle) TH_LOG("owner, tenant and ATTACH: %s", strerror(-self->handle));
	/* The best-effort tenant's queue, and the latency-critical one. */
	ASSERT_EQ(0, ring_create(self->tenant, variant->node, &self->be));
	ASSERT_EQ(0, ring_create(self->tenant, variant->node, &self->lc));
	ASSERT_EQ(0, log_clear(variant->node));
}

FIXTURE_TEARDOWN(rlog)
{
	if (self->owner >= 0)
		close(self->owner);
	if (self->tenant >= 0)
		close(self->tenant);
	KFDP_EXPECT_SIM_CLEAN();
}

/*
 * The reaction a daemon is measured by: LC's dispatch waits behind BE's
 * long one; the PREEMPT of BE is logged once, with LC's doorbell (the
 * submit_ns the node wrote into LC's packet) and the time the unmap took
 * effect, which is when LC's dispatch starts. A clear empties the log.
 */
TEST_F(rlog, preempt_logs_pending_doorbell)
{
	int node = variant->node;
	struct log_record rec[LOG_MAX];
	long long dropped, before = node_suspended(node);
	__u64 t0, t1;

	ASSERT_LE(0, before);
	ASSERT_EQ(0, submit(self->tenant, &self->be, 5000 * MS));
	kfdp_sleep_ms(20);
	ASSERT_EQ(0, submit(self->tenant, &self->lc, 10 * MS));
	kfdp_sleep_ms(20);
	ASSERT_EQ(0, __atomic_load_n(self->lc.read_index, __ATOMIC_ACQUIRE))
		TH_LOG("LC ran before BE's dispatch ended");
	ASSERT_EQ(0, log_read(node, &dropped, rec, LOG_MAX)) TH_LOG("creates and doorbells logged");

	t0 = now_ns();
	ASSERT_EQ(0, kfdp_one(self->owner, KFDP_IOC_PREEMPT, self->handle, node,
			      self->be.queue_id));
	t1 = now_ns();
	ASSERT_TRUE(wait_retired(&self->lc, 0, 5000));

	ASSERT_EQ(1, log_read(node, &dropped, rec, LOG_MAX));
	EXPECT_EQ(0, dropped);
	EXPECT_EQ(1, rec[0].queues);
	EXPECT_EQ(before + 1, node_suspended(node));
	/* The LC dispatch's own visibility time, not BE's older one. */
	EXPECT_EQ((long long)self->lc.pkt[0].submit_ns, rec[0].doorbell_ns);
	EXPECT_LE(rec[0].doorbell_ns, rec[0].unmap_ns);
	/* Within the PREEMPT call, and before LC ran. */
	EXPECT_LE((long long)t0, rec[0].unmap_ns);
	EXPECT_GE((long long)t1, rec[0].unmap_ns);
	EXPECT_LE(rec[0].unmap_ns, (long long)self->lc.pkt[0].start_ns);

	/* RESUME is not a preemption. */
	ASSERT_EQ(0, kfdp_one(self->owner, KFDP_IOC_RESUME, self->handle, node,
			      self->be.queue_id));
	EXPECT_EQ(1, log_read(node, &dropped, rec, LOG_MAX));

	ASSERT_EQ(0, log_clear(node));
	EXPECT_EQ(0, log_read(node, &dropped, rec, LOG_MAX));
	EXPECT_EQ(0, dropped);
	EXPECT_EQ(before + 1, node_suspended(node)) TH_LOG("the clear reset the counter");
}

/*
 * Nothing waits on a queue that stays mapped: doorbell_ns is 0, even though
 * the preempted queue itself had a visible dispatch pending.
 */
TEST_F(rlog, preempt_without_mapped_pending_logs_zero)
{
	int node = variant->node;
	struct log_record rec[LOG_MAX];
	long long dropped;

	ASSERT_EQ(0, submit(self->tenant, &self->be, 5000 * MS));
	kfdp_sleep_ms(20);
	ASSERT_EQ(0, kfdp_one(self->owner, KFDP_IOC_PREEMPT, self->handle, node,
			      self->be.queue_id));
	ASSERT_EQ(1, log_read(node, &dropped, rec, LOG_MAX));
	EXPECT_EQ(1, rec[0].queues);
	EXPECT_EQ(0, rec[0].doorbell_ns);
	EXPECT_LT(0, rec[0].unmap_ns);
}

/*
 * One batch preempting two queues: one cycle on an HWS node (one record of
 * 2 queues), one MES remove per queue (two records of 1). The dispatch
 * waiting on the second queue is no reaction to measure: that queue does
 * not stay mapped, even between the two MES calls.
 */
TEST_F(rlog, batch_of_two)
{
	int node = variant->node;
	struct kfdp_queue_ref refs[2] = {
		kfdp_ref(self->handle, node, self->be.queue_id),
		kfdp_ref(self->handle, node, self->lc.queue_id),
	};
	struct log_record rec[LOG_MAX];
	long long dropped, before = node_suspended(node);
	int n;

	ASSERT_EQ(0, submit(self->tenant, &self->be, 5000 * MS));
	kfdp_sleep_ms(20);
	ASSERT_EQ(0, submit(self->tenant, &self->lc, 10 * MS));
	ASSERT_EQ(0, kfdp_batch(self->owner, KFDP_IOC_PREEMPT, refs, 2, 0, 0, NULL));
	EXPECT_EQ(0, refs[0].status);
	EXPECT_EQ(0, refs[1].status);
	n = log_read(node, &dropped, rec, LOG_MAX);
	if (node == KFDP_SIM_HWS) {
		ASSERT_EQ(1, n);
		EXPECT_EQ(2, rec[0].queues);
		EXPECT_EQ(0, rec[0].doorbell_ns);
	} else {
		ASSERT_EQ(2, n);
		EXPECT_EQ(1, rec[0].queues);
		EXPECT_EQ(1, rec[1].queues);
		EXPECT_LE(rec[0].unmap_ns, rec[1].unmap_ns);
		EXPECT_EQ(0, rec[0].doorbell_ns) TH_LOG("counted the queue removed next");
		EXPECT_EQ(0, rec[1].doorbell_ns);
	}
	EXPECT_EQ(before + 2, node_suspended(node));
	/* Already suspended: nothing leaves the node, nothing is logged. */
	ASSERT_EQ(0, kfdp_batch(self->owner, KFDP_IOC_PREEMPT, refs, 2, 0, 0, NULL));
	EXPECT_EQ(n, log_read(node, &dropped, rec, LOG_MAX));
}

/* FREEZE, eviction and a tenant's destroy unmap queues, but are no PREEMPT. */
TEST_F(rlog, freeze_evict_destroy_not_logged)
{
	int node = variant->node;
	struct log_record rec[LOG_MAX];
	long long dropped, before = node_suspended(node);

	ASSERT_EQ(0, kfdp_freeze(self->owner, KFDP_IOC_FREEZE, self->handle,
				 KFDP_SIM_GPU0 + node, NULL));
	ASSERT_EQ(0, kfdp_freeze(self->owner, KFDP_IOC_THAW, self->handle,
				 KFDP_SIM_GPU0 + node, NULL));
	ASSERT_EQ(0, kfdp_control("evict %d %d", getpid(), node));
	ASSERT_EQ(0, kfdp_control("restore %d %d", getpid(), node));
	ASSERT_EQ(0, kfdp_queue_destroy(self->tenant, self->be.queue_id));
	EXPECT_EQ(0, log_read(node, &dropped, rec, LOG_MAX));
	EXPECT_EQ(before, node_suspended(node));
}

/* The log keeps its newest records and counts what it dropped. */
TEST_F(rlog, bounded_with_dropped_count)
{
	int node = variant->node, i, n;
	struct log_record rec[LOG_MAX];
	long long dropped;
	static struct log_record all[1100];

	for (i = 0; i < 1030; i++) {
		ASSERT_EQ(0, kfdp_one(self->owner, KFDP_IOC_PREEMPT, self->handle, node,
				      self->be.queue_id));
		ASSERT_EQ(0, kfdp_one(self->owner, KFDP_IOC_RESUME, self->handle, node,
				      self->be.queue_id));
	}
	n = log_read(node, &dropped, all, 1100);
	EXPECT_EQ(1024, n);
	EXPECT_EQ(6, dropped);
	for (i = 1; i < n && i < 1100; i++)
		EXPECT_LE(all[i - 1].unmap_ns, all[i].unmap_ns);
	ASSERT_EQ(0, log_clear(node));
	EXPECT_EQ(0, log_read(node, &dropped, rec, LOG_MAX));
	EXPECT_EQ(0, dropped);
}

TEST_HARNESS_MAIN
