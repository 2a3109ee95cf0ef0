// SPDX-License-Identifier: GPL-2.0
/*
 * KUnit: kfd_preempt's glue driving amdkfd's own device queue manager on an
 * emulated MI300 HWS. Processes and queues are created through amdkfd's
 * functions; PREEMPT, RESUME, FREEZE and THAW go through the glue's
 * kfdp_apply()/kfdp_freeze(); every assertion is on what amdkfd's state
 * says and what the emulated firmware was sent (emu_hws.c): one
 * UNMAP_QUEUES and one RUN_LIST per node per batch, preempted MQDs absent
 * from the runlist and every other active queue present, amdkfd's counters
 * equal to its active queues, MQD bytes unchanged.
 */

#include <kunit/test.h>
#include <linux/seq_file.h>
#include <linux/slab.h>

#include <linux/kfd_preempt.h>

#include "emu.h"
#include "v9_structs.h"

#define GPU_A 0xa300
#define GPU_B 0xb300

struct emu_snap {
	unsigned int unmaps, runlists, query_status;
};

static struct emu_snap snap(struct emu_node *en)
{
	return (struct emu_snap){
		.unmaps = en->hws.unmaps,
		.runlists = en->hws.runlists,
		.query_status = en->hws.query_status,
	};
}

static void node_release(void *data)
{
	emu_node_destroy(data);
}

static struct emu_node *new_node_xcc(struct kunit *test, u32 gpu_id, u32 xcc_mask, bool mes)
{
	struct emu_node *en = emu_node_create(gpu_id, xcc_mask, mes);

	KUNIT_ASSERT_FALSE_MSG(test, IS_ERR(en), "bring-up failed: %ld", PTR_ERR(en));
	KUNIT_ASSERT_EQ(test, 0, kunit_add_action_or_reset(test, node_release, en));
	return en;
}

static struct emu_node *new_node(struct kunit *test, u32 gpu_id, bool mes)
{
	return new_node_xcc(test, gpu_id, 0x1, mes);
}

/* An MI300 node: amdkfd's own start sent SET_RESOURCES, no runlist yet. */
static struct emu_node *node(struct kunit *test, u32 gpu_id)
{
	struct emu_node *en = new_node(test, gpu_id, false);

	KUNIT_EXPECT_EQ(test, 1, en->hws.hiq_loads);
	KUNIT_EXPECT_EQ(test, 1, en->hws.set_resources);
	KUNIT_EXPECT_EQ(test, 0, en->hws.runlists);
	return en;
}

/* A GC 11 node: no HIQ, nothing sent to MES before the first queue. */
static struct emu_node *mes_node(struct kunit *test, u32 gpu_id)
{
	struct emu_node *en = new_node(test, gpu_id, true);

	KUNIT_EXPECT_EQ(test, 0, en->hws.hiq_loads);
	KUNIT_EXPECT_EQ(test, 0, en->hws.mes_adds);
	return en;
}

static void proc_release(void *data)
{
	emu_proc_destroy(data);
}

static struct emu_proc *proc(struct kunit *test, struct emu_node *en, u16 pasid, int nq)
{
	struct emu_proc *ep = emu_proc_create(en, pasid);
	int i;

	KUNIT_ASSERT_FALSE(test, IS_ERR(ep));
	KUNIT_ASSERT_EQ(test, 0, kunit_add_action_or_reset(test, proc_release, ep));
	for (i = 0; i < nq; i++)
		KUNIT_ASSERT_EQ(test, 0, emu_queue_create(ep, i));
	return ep;
}

/*
 * The invariants after every call: amdkfd's counters equal its active
 * queues, and the firmware runs exactly the active queues (or nothing,
 * when @mapped is false).
 */
static void expect_consistent(struct kunit *test, struct emu_node *en, bool mapped)
{
	struct device_queue_manager *dqm = en->node.dqm;
	unsigned int active = emu_count_active(en), gws = 0;
	struct device_process_node *cur;
	struct queue *q;

	KUNIT_EXPECT_EQ(test, active, dqm->active_queue_count);
	KUNIT_EXPECT_EQ(test, active, dqm->active_cp_queue_count);
	KUNIT_EXPECT_EQ(test, 0, en->hws.errors);
	if (!en->kfd.shared_resources.enable_mes)	/* MES has no runlist */
		KUNIT_EXPECT_EQ(test, mapped && active, en->hws.runlist_active);
	KUNIT_EXPECT_EQ(test, mapped ? active : 0, en->hws.n_mapped);
	dqm_lock(dqm);
	list_for_each_entry(cur, &dqm->queues, list)
		list_for_each_entry(q, &cur->qpd->queues_list, list) {
			KUNIT_EXPECT_EQ_MSG(test, mapped && q->properties.is_active,
					    emu_hws_is_mapped(en, q), "queue %u",
					    q->properties.queue_id);
			gws += q->properties.is_active && q->properties.is_gws;
		}
	KUNIT_EXPECT_EQ(test, gws, dqm->gws_queue_count);
	dqm_unlock(dqm);
}

/* Items for queues @first..@first+@count-1 of each of @procs. */
static struct kfdp_glue_item *items(struct kunit *test, struct emu_proc **procs, int np,
				    int first, int count, u32 *n)
{
	struct kfdp_glue_item *it = kunit_kcalloc(test, np * count, sizeof(*it), GFP_KERNEL);
	int i, j, k = 0;

	KUNIT_ASSERT_NOT_NULL(test, it);
	for (i = 0; i < np; i++)
		for (j = first; j < first + count; j++, k++) {
			it[k].target = &procs[i]->t;
			it[k].gpu_id = procs[i]->pdd->user_gpu_id;
			it[k].queue_id = j;
		}
	*n = k;
	return it;
}

/* The glue call, and what the engine does with `marked`. */
static void apply(u32 op, struct kfdp_glue_item *it, u32 n, struct kfdp_glue_result *res)
{
	u32 i;

	kfdp_apply(op, false, it, n, res);
	for (i = 0; i < n; i++)
		it[i].flags = it[i].marked ? KFDP_GLUE_ITEM_OWNED : 0;
}

static void expect_status(struct kunit *test, struct kfdp_glue_item *it, u32 n, int status)
{
	u32 i;

	for (i = 0; i < n; i++)
		KUNIT_EXPECT_EQ_MSG(test, status, it[i].status, "item %u", i);
}

/* A call that must succeed for every entry. */
static void apply_ok(struct kunit *test, u32 op, struct kfdp_glue_item *it, u32 n,
		     struct kfdp_glue_result *res)
{
	apply(op, it, n, res);
	expect_status(test, it, n, 0);
}

static void hws_starts_with_runlist(struct kunit *test)
{
	struct emu_node *en = node(test, GPU_A);
	struct emu_proc *a = proc(test, en, 1, 4);

	/* Each create_queue ran execute_queues_cpsch: the firmware runs all four. */
	KUNIT_EXPECT_EQ(test, 4, en->hws.runlists);
	KUNIT_EXPECT_EQ(test, 4, en->hws.map_process);	/* one process per runlist */
	KUNIT_EXPECT_EQ(test, 4, en->node.dqm->active_queue_count);
	KUNIT_EXPECT_TRUE(test, emu_hws_is_mapped(en, a->q[3]));
	expect_consistent(test, en, true);
}

/*
 * QUERY of amdkfd's own queues: an AQL queue (type COMPUTE, format AQL
 * inside amdkfd) reports KFD_IOC_QUEUE_TYPE_COMPUTE_AQL and its read and
 * write pointers, which is what WATCH requires.
 */
static void hws_query_reports_aql_and_pointers(struct kunit *test)
{
	struct emu_node *en = node(test, GPU_A);
	struct emu_proc *a = proc(test, en, 1, 2);
	struct kfdp_queue_info qi[2];
	u32 total = 0;

	u32 i;

	KUNIT_ASSERT_EQ(test, 0, kfdp_target_query(&a->t, 0, qi, 2, &total));
	KUNIT_ASSERT_EQ(test, 2, total);
	for (i = 0; i < 2; i++) {
		const struct queue_properties *qp;

		KUNIT_ASSERT_LT(test, qi[i].queue_id, 2);
		qp = &a->q[qi[i].queue_id]->properties;
		KUNIT_EXPECT_EQ(test, KFD_IOC_QUEUE_TYPE_COMPUTE_AQL, qi[i].queue_type);
		KUNIT_EXPECT_EQ(test, (u64)(uintptr_t)qp->read_ptr, qi[i].read_pointer_address);
		KUNIT_EXPECT_EQ(test, (u64)(uintptr_t)qp->write_ptr, qi[i].write_pointer_address);
	}
}

/* 8 of 16 queues over 4 processes: one unmap and one runlist, both ways. */
static void hws_batch_costs_one_cycle(struct kunit *test)
{
	struct emu_node *en = node(test, GPU_A);
	struct emu_proc *procs[4];
	struct kfdp_glue_result res;
	struct kfdp_glue_item *it;
	struct emu_snap s;
	u32 n;
	int i;

	for (i = 0; i < 4; i++)
		procs[i] = proc(test, en, i + 1, 4);
	it = items(test, procs, 4, 1, 2, &n);
	KUNIT_ASSERT_EQ(test, 8, n);

	s = snap(en);
	apply_ok(test, KFDP_GLUE_PREEMPT, it, n, &res);
	KUNIT_EXPECT_EQ(test, 1, res.runlist_updates);
	KUNIT_EXPECT_EQ(test, s.unmaps + 1, en->hws.unmaps);
	KUNIT_EXPECT_EQ(test, s.runlists + 1, en->hws.runlists);
	KUNIT_EXPECT_EQ(test, 8, en->hws.n_mapped);
	for (i = 0; i < 4; i++) {
		KUNIT_EXPECT_TRUE(test, emu_hws_is_mapped(en, procs[i]->q[0]));
		KUNIT_EXPECT_FALSE(test, emu_hws_is_mapped(en, procs[i]->q[1]));
		KUNIT_EXPECT_FALSE(test, emu_hws_is_mapped(en, procs[i]->q[2]));
		KUNIT_EXPECT_TRUE(test, emu_hws_is_mapped(en, procs[i]->q[3]));
		KUNIT_EXPECT_TRUE(test, procs[i]->q[1]->properties.is_suspended);
	}
	expect_consistent(test, en, true);

	s = snap(en);
	apply_ok(test, KFDP_GLUE_RESUME, it, n, &res);
	KUNIT_EXPECT_EQ(test, 1, res.runlist_updates);
	KUNIT_EXPECT_EQ(test, s.unmaps + 1, en->hws.unmaps);
	KUNIT_EXPECT_EQ(test, s.runlists + 1, en->hws.runlists);
	KUNIT_EXPECT_EQ(test, 16, en->hws.n_mapped);
	for (i = 0; i < 4; i++)
		KUNIT_EXPECT_FALSE(test, procs[i]->q[1]->properties.is_suspended);
	expect_consistent(test, en, true);
}

/*
 * amdkfd's own kfd/rls view of a runlist (pm_debugfs_runlist(), what the
 * hardware kit's tests/hw/rls.c parses on a GPU host), with two processes
 * and one queue preempted, printed between markers with each queue's
 * doorbell offset and whether the firmware maps it. The host runs rls.c
 * on it after the VM (tests/hw/rls_test.c).
 */
static void hws_runlist_debugfs_dump(struct kunit *test)
{
	struct emu_node *en = node(test, GPU_A);
	struct emu_proc *procs[2] = { proc(test, en, 1, 3), proc(test, en, 2, 2) };
	struct seq_file m = { .size = 4 * PAGE_SIZE };
	struct kfdp_glue_result res;
	struct kfdp_glue_item *it;
	char *line, *next;
	u32 n;
	int i, j;

	it = items(test, procs, 1, 1, 1, &n);
	apply_ok(test, KFDP_GLUE_PREEMPT, it, n, &res);
	m.buf = kunit_kzalloc(test, m.size, GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, m.buf);
	KUNIT_ASSERT_EQ(test, 0, pm_debugfs_runlist(&m, &en->node.dqm->packet_mgr));
	KUNIT_ASSERT_LT(test, m.count, m.size);	/* not truncated */
	m.buf[m.count] = 0;
	pr_info("kfdp-rls-begin\n");
	/* kfd_debugfs_rls_by_device()'s header, then the packet manager's dump. */
	pr_info("Node 0, gpu_id %x:\n", en->node.id);
	for (line = m.buf; line && *line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = 0;
		pr_info("%s\n", line);
	}
	for (i = 0; i < 2; i++)
		for (j = 0; j < procs[i]->nq; j++)
			pr_info("kfdp-rls-expect %x %u %d\n", en->node.id,
				procs[i]->q[j]->properties.doorbell_off,
				emu_hws_is_mapped(en, procs[i]->q[j]));
	pr_info("kfdp-rls-end\n");
	KUNIT_EXPECT_FALSE(test, emu_hws_is_mapped(en, procs[0]->q[1]));
	KUNIT_EXPECT_TRUE(test, emu_hws_is_mapped(en, procs[0]->q[0]));
	apply_ok(test, KFDP_GLUE_RESUME, it, n, &res);
}

/* A batch over two nodes: one cycle on each, none twice. */
static void hws_batch_over_two_nodes(struct kunit *test)
{
	struct emu_node *a = node(test, GPU_A), *b = node(test, GPU_B);
	struct emu_proc *procs[3] = { proc(test, a, 1, 3), proc(test, b, 2, 3), proc(test, a, 3, 2) };
	struct emu_snap sa = snap(a), sb = snap(b);
	struct kfdp_glue_result res;
	struct kfdp_glue_item *it;
	u32 n;

	it = items(test, procs, 3, 0, 2, &n);
	apply_ok(test, KFDP_GLUE_PREEMPT, it, n, &res);
	KUNIT_EXPECT_EQ(test, 2, res.runlist_updates);
	KUNIT_EXPECT_EQ(test, sa.unmaps + 1, a->hws.unmaps);
	KUNIT_EXPECT_EQ(test, sa.runlists + 1, a->hws.runlists);
	KUNIT_EXPECT_EQ(test, sb.unmaps + 1, b->hws.unmaps);
	KUNIT_EXPECT_EQ(test, sb.runlists + 1, b->hws.runlists);
	KUNIT_EXPECT_EQ(test, 1, a->hws.n_mapped);	/* procs[0]->q[2] */
	KUNIT_EXPECT_EQ(test, 1, b->hws.n_mapped);	/* procs[1]->q[2] */
	expect_consistent(test, a, true);
	expect_consistent(test, b, true);

	apply_ok(test, KFDP_GLUE_RESUME, it, n, &res);
	KUNIT_EXPECT_EQ(test, 5, a->hws.n_mapped);
	KUNIT_EXPECT_EQ(test, 3, b->hws.n_mapped);
	expect_consistent(test, a, true);
	expect_consistent(test, b, true);
}

/*
 * The MQD and CWSR state of a preempted queue survive: amdkfd never frees
 * or rewrites them while the mark is held, and a resume maps the same MQD.
 */
static void hws_mqd_preserved(struct kunit *test)
{
	struct emu_node *en = node(test, GPU_A);
	struct emu_proc *procs[1] = { proc(test, en, 1, 4) };
	struct v9_mqd *before[4];
	struct kfdp_glue_result res;
	struct kfdp_glue_item *it;
	u64 addr[4];
	u32 n, i;

	for (i = 0; i < 4; i++) {
		before[i] = kunit_kmalloc(test, sizeof(struct v9_mqd), GFP_KERNEL);
		KUNIT_ASSERT_NOT_NULL(test, before[i]);
		memcpy(before[i], procs[0]->q[i]->mqd, sizeof(struct v9_mqd));
		addr[i] = procs[0]->q[i]->gart_mqd_addr;
	}
	it = items(test, procs, 1, 0, 4, &n);
	apply_ok(test, KFDP_GLUE_PREEMPT, it, n, &res);
	KUNIT_EXPECT_EQ(test, 0, en->hws.n_mapped);
	apply_ok(test, KFDP_GLUE_RESUME, it, n, &res);
	for (i = 0; i < 4; i++) {
		struct v9_mqd *m = procs[0]->q[i]->mqd;

		KUNIT_EXPECT_EQ(test, addr[i], procs[0]->q[i]->gart_mqd_addr);
		KUNIT_EXPECT_TRUE(test, emu_hws_is_mapped(en, procs[0]->q[i]));
		/* The CWSR save area and control stack the CP restores from. */
		KUNIT_EXPECT_EQ(test, before[i]->cp_hqd_ctx_save_base_addr_lo,
				m->cp_hqd_ctx_save_base_addr_lo);
		KUNIT_EXPECT_EQ(test, before[i]->cp_hqd_ctx_save_base_addr_hi,
				m->cp_hqd_ctx_save_base_addr_hi);
		KUNIT_EXPECT_EQ(test, before[i]->cp_hqd_cntl_stack_size, m->cp_hqd_cntl_stack_size);
		KUNIT_EXPECT_EQ(test, before[i]->cp_hqd_wg_state_offset, m->cp_hqd_wg_state_offset);
		/* Nothing else either: the trigger's update_mqd rewrote the same values. */
		KUNIT_EXPECT_MEMEQ(test, before[i], m, sizeof(struct v9_mqd));
	}
	expect_consistent(test, en, true);
}

/* The tenant's own UPDATE_QUEUE rebuilds the runlist but cannot undo a preemption. */
static void hws_tenant_update_keeps_preemption(struct kunit *test)
{
	struct emu_node *en = node(test, GPU_A);
	struct emu_proc *procs[1] = { proc(test, en, 1, 2) };
	struct kfdp_glue_result res;
	struct kfdp_glue_item *it;
	struct emu_snap s;
	u32 n;

	it = items(test, procs, 1, 0, 1, &n);
	apply_ok(test, KFDP_GLUE_PREEMPT, it, n, &res);

	s = snap(en);
	KUNIT_EXPECT_EQ(test, 0, emu_queue_set_percent(procs[0], 0, 50));
	KUNIT_EXPECT_EQ(test, s.runlists + 1, en->hws.runlists);
	KUNIT_EXPECT_FALSE(test, emu_hws_is_mapped(en, procs[0]->q[0]));
	KUNIT_EXPECT_FALSE(test, procs[0]->q[0]->properties.is_active);
	expect_consistent(test, en, true);

	apply_ok(test, KFDP_GLUE_RESUME, it, n, &res);
	KUNIT_EXPECT_TRUE(test, emu_hws_is_mapped(en, procs[0]->q[0]));
	expect_consistent(test, en, true);
}

/* The tenant destroys a preempted queue: amdkfd frees it; RESUME says ENOENT. */
static void hws_destroy_while_preempted(struct kunit *test)
{
	struct emu_node *en = node(test, GPU_A);
	struct emu_proc *procs[1] = { proc(test, en, 1, 3) };
	struct kfdp_glue_result res;
	struct kfdp_glue_item *it;
	u32 n;

	it = items(test, procs, 1, 1, 1, &n);
	apply_ok(test, KFDP_GLUE_PREEMPT, it, n, &res);
	KUNIT_EXPECT_EQ(test, 0, emu_queue_destroy(procs[0], 1));
	KUNIT_EXPECT_EQ(test, 2, en->node.dqm->total_queue_count);
	expect_consistent(test, en, true);

	apply(KFDP_GLUE_RESUME, it, n, &res);
	expect_status(test, it, n, -ENOENT);
	KUNIT_EXPECT_FALSE(test, it[0].marked);
	KUNIT_EXPECT_EQ(test, 0, res.runlist_updates);
	expect_consistent(test, en, true);
}

/* FREEZE is amdkfd's nesting eviction; a preemption stays in force across THAW. */
static void hws_freeze_thaw(struct kunit *test)
{
	struct emu_node *en = node(test, GPU_A);
	struct emu_proc *procs[2] = { proc(test, en, 1, 3), proc(test, en, 2, 2) };
	struct kfdp_glue_result res;
	struct kfdp_glue_item *it;
	bool applied;
	u64 ns;
	u32 n;

	it = items(test, procs, 1, 0, 1, &n);
	apply_ok(test, KFDP_GLUE_PREEMPT, it, n, &res);

	KUNIT_EXPECT_EQ(test, 0, kfdp_freeze(&procs[0]->t, GPU_A, false, &ns, &applied));
	KUNIT_EXPECT_TRUE(test, applied);
	KUNIT_EXPECT_EQ(test, 1, procs[0]->pdd->qpd.evicted);
	KUNIT_EXPECT_EQ(test, 2, en->hws.n_mapped);	/* procs[1] only */
	expect_consistent(test, en, true);

	/* amdkfd's own eviction nests (TTM, userptr). */
	KUNIT_EXPECT_EQ(test, 0, en->node.dqm->ops.evict_process_queues(en->node.dqm,
									 &procs[0]->pdd->qpd));
	KUNIT_EXPECT_EQ(test, 0, kfdp_freeze(&procs[0]->t, GPU_A, true, &ns, &applied));
	KUNIT_EXPECT_TRUE(test, applied);
	KUNIT_EXPECT_EQ(test, 1, procs[0]->pdd->qpd.evicted);
	KUNIT_EXPECT_EQ(test, 2, en->hws.n_mapped);
	KUNIT_EXPECT_EQ(test, 0, en->node.dqm->ops.restore_process_queues(en->node.dqm,
									   &procs[0]->pdd->qpd));
	/* Restored, except the queue we hold. */
	KUNIT_EXPECT_EQ(test, 4, en->hws.n_mapped);
	KUNIT_EXPECT_FALSE(test, emu_hws_is_mapped(en, procs[0]->q[0]));
	expect_consistent(test, en, true);

	apply_ok(test, KFDP_GLUE_RESUME, it, n, &res);
	KUNIT_EXPECT_EQ(test, 5, en->hws.n_mapped);
	expect_consistent(test, en, true);
}

/* The tenant's CU mask change while preempted: applied, queue stays off. */
static void hws_cu_mask_while_preempted(struct kunit *test)
{
	struct emu_node *en = node(test, GPU_A);
	struct emu_proc *procs[1] = { proc(test, en, 1, 2) };
	u32 mask[2] = { 0x0f0f0f0f, 0x0f0f0f0f };
	struct mqd_update_info minfo = {
		.cu_mask = { .count = 64, .ptr = mask },	/* as pqm_update_mqd passes it */
	};
	struct kfdp_glue_result res;
	struct kfdp_glue_item *it;
	u32 n;

	it = items(test, procs, 1, 0, 1, &n);
	apply_ok(test, KFDP_GLUE_PREEMPT, it, n, &res);
	KUNIT_EXPECT_EQ(test, 0, emu_queue_update(procs[0], 0, &minfo));
	KUNIT_EXPECT_FALSE(test, emu_hws_is_mapped(en, procs[0]->q[0]));
	KUNIT_EXPECT_TRUE(test, procs[0]->q[0]->properties.is_suspended);
	expect_consistent(test, en, true);

	apply_ok(test, KFDP_GLUE_RESUME, it, n, &res);
	KUNIT_EXPECT_TRUE(test, emu_hws_is_mapped(en, procs[0]->q[0]));
	expect_consistent(test, en, true);
}

/*
 * GWS given to a preempted queue (pqm_set_gws on 9.4.3): amdkfd counts it
 * only while active, so the glue's resume must count it: gws_queue_count
 * and mapped_gws_queue follow, and the runlist carries it.
 */
static void hws_gws_while_preempted(struct kunit *test)
{
	struct emu_node *en = node(test, GPU_A);
	struct emu_proc *procs[1] = { proc(test, en, 1, 2) };
	struct mqd_update_info minfo = { .update_flag = UPDATE_FLAG_IS_GWS };
	struct kfdp_glue_result res;
	struct kfdp_glue_item *it;
	u32 n;

	it = items(test, procs, 1, 0, 1, &n);
	apply_ok(test, KFDP_GLUE_PREEMPT, it, n, &res);
	procs[0]->q[0]->gws = ERR_PTR(-ENOMEM);	/* what pqm_set_gws stores on 9.4.3 */
	procs[0]->pdd->qpd.num_gws = 64;
	KUNIT_EXPECT_EQ(test, 0, emu_queue_update(procs[0], 0, &minfo));
	KUNIT_EXPECT_TRUE(test, procs[0]->q[0]->properties.is_gws);
	KUNIT_EXPECT_EQ(test, 0, en->node.dqm->gws_queue_count);
	expect_consistent(test, en, true);

	apply_ok(test, KFDP_GLUE_RESUME, it, n, &res);
	KUNIT_EXPECT_EQ(test, 1, en->node.dqm->gws_queue_count);
	KUNIT_EXPECT_TRUE(test, procs[0]->pdd->qpd.mapped_gws_queue);
	expect_consistent(test, en, true);

	/* Preempted again, then GWS taken away: the counts stay exact. */
	apply_ok(test, KFDP_GLUE_PREEMPT, it, n, &res);
	KUNIT_EXPECT_EQ(test, 0, en->node.dqm->gws_queue_count);
	procs[0]->q[0]->gws = NULL;
	procs[0]->pdd->qpd.num_gws = 0;
	minfo.update_flag = 0;
	KUNIT_EXPECT_EQ(test, 0, emu_queue_update(procs[0], 0, &minfo));
	apply_ok(test, KFDP_GLUE_RESUME, it, n, &res);
	KUNIT_EXPECT_EQ(test, 0, en->node.dqm->gws_queue_count);
	expect_consistent(test, en, true);
}

/* amdkfd's own eviction and restore (TTM, userptr) while we hold a queue. */
static void hws_eviction_while_preempted(struct kunit *test)
{
	struct emu_node *en = node(test, GPU_A);
	struct emu_proc *procs[1] = { proc(test, en, 1, 3) };
	struct device_queue_manager *dqm = en->node.dqm;
	struct kfdp_glue_result res;
	struct kfdp_glue_item *it;
	u32 n;

	it = items(test, procs, 1, 0, 1, &n);
	apply_ok(test, KFDP_GLUE_PREEMPT, it, n, &res);
	KUNIT_EXPECT_EQ(test, 0, dqm->ops.evict_process_queues(dqm, &procs[0]->pdd->qpd));
	KUNIT_EXPECT_EQ(test, 0, en->hws.n_mapped);
	expect_consistent(test, en, true);

	/* RESUME while evicted: DEFERRED to amdkfd's restore, mark dropped. */
	apply(KFDP_GLUE_RESUME, it, n, &res);
	expect_status(test, it, n, KFDP_R_DEFERRED);
	KUNIT_EXPECT_FALSE(test, it[0].marked);
	KUNIT_EXPECT_EQ(test, 0, en->hws.n_mapped);
	KUNIT_EXPECT_EQ(test, 0, dqm->ops.restore_process_queues(dqm, &procs[0]->pdd->qpd));
	KUNIT_EXPECT_EQ(test, 3, en->hws.n_mapped);
	expect_consistent(test, en, true);

	/* Preempted across an eviction: the restore leaves it off. */
	apply_ok(test, KFDP_GLUE_PREEMPT, it, n, &res);
	KUNIT_EXPECT_EQ(test, 0, dqm->ops.evict_process_queues(dqm, &procs[0]->pdd->qpd));
	KUNIT_EXPECT_EQ(test, 0, dqm->ops.restore_process_queues(dqm, &procs[0]->pdd->qpd));
	KUNIT_EXPECT_EQ(test, 2, en->hws.n_mapped);
	KUNIT_EXPECT_FALSE(test, emu_hws_is_mapped(en, procs[0]->q[0]));
	apply_ok(test, KFDP_GLUE_RESUME, it, n, &res);
	KUNIT_EXPECT_EQ(test, 3, en->hws.n_mapped);
	expect_consistent(test, en, true);
}

/*
 * A tenant exits while preempted: amdkfd's teardown frees its queues and
 * builds a runlist without them; the glue answers ESRCH and touches nothing.
 */
static void hws_exit_while_preempted(struct kunit *test)
{
	struct emu_node *en = node(test, GPU_A);
	struct emu_proc *gone = proc(test, en, 1, 2), *other = proc(test, en, 2, 2);
	struct emu_proc *procs[1] = { gone };
	struct kfdp_glue_result res;
	struct kfdp_glue_item *it;
	u32 n;

	it = items(test, procs, 1, 0, 2, &n);
	apply_ok(test, KFDP_GLUE_PREEMPT, it, n, &res);
	emu_proc_exit(gone);
	KUNIT_EXPECT_EQ(test, 2, en->hws.n_mapped);
	KUNIT_EXPECT_TRUE(test, emu_hws_is_mapped(en, other->q[0]));

	apply(KFDP_GLUE_RESUME, it, n, &res);
	expect_status(test, it, n, -ESRCH);
	KUNIT_EXPECT_FALSE(test, it[0].marked);
	KUNIT_EXPECT_EQ(test, 0, res.runlist_updates);
	expect_consistent(test, en, true);
}

/*
 * The scheduler halted (amdgpu's stop_sched, around isolation or a
 * partition switch): no trigger, DEFERRED; amdkfd's unhalt builds the
 * runlist from our marks.
 */
static void hws_halted_scheduler(struct kunit *test)
{
	struct emu_node *en = node(test, GPU_A);
	struct emu_proc *procs[1] = { proc(test, en, 1, 2) };
	struct device_queue_manager *dqm = en->node.dqm;
	struct kfdp_glue_result res;
	struct kfdp_glue_item *it;
	u32 n;

	it = items(test, procs, 1, 0, 1, &n);
	KUNIT_EXPECT_EQ(test, 0, dqm->ops.halt(dqm));
	KUNIT_EXPECT_EQ(test, 0, en->hws.n_mapped);
	apply(KFDP_GLUE_PREEMPT, it, n, &res);
	expect_status(test, it, n, KFDP_R_DEFERRED);
	KUNIT_EXPECT_TRUE(test, it[0].marked);
	KUNIT_EXPECT_EQ(test, 0, res.runlist_updates);
	KUNIT_EXPECT_EQ(test, 0, dqm->ops.unhalt(dqm));
	KUNIT_EXPECT_FALSE(test, emu_hws_is_mapped(en, procs[0]->q[0]));
	KUNIT_EXPECT_TRUE(test, emu_hws_is_mapped(en, procs[0]->q[1]));
	expect_consistent(test, en, true);

	apply_ok(test, KFDP_GLUE_RESUME, it, n, &res);
	expect_consistent(test, en, true);
}

/* What the glue refuses, with amdkfd's state untouched. */
static void hws_refusals(struct kunit *test)
{
	struct emu_node *en = node(test, GPU_A);
	struct emu_proc *procs[1] = { proc(test, en, 1, 1) };
	struct device_queue_manager *dqm = en->node.dqm;
	struct kfdp_glue_result res;
	struct kfdp_glue_item *it;
	struct emu_snap s = snap(en);
	u32 n;

	it = items(test, procs, 1, 0, 1, &n);
	/* Without CWSR, preemption would drain the queue, not save it. */
	en->kfd.cwsr_enabled = false;
	apply(KFDP_GLUE_PREEMPT, it, n, &res);
	expect_status(test, it, n, -EOPNOTSUPP);
	en->kfd.cwsr_enabled = true;

	/* The debugger owns debugged processes. */
	procs[0]->p->debug_trap_enabled = true;
	apply(KFDP_GLUE_PREEMPT, it, n, &res);
	expect_status(test, it, n, -EBUSY);
	procs[0]->p->debug_trap_enabled = false;

	/* NO_HWS cannot be driven across processes. */
	dqm->sched_policy = KFD_SCHED_POLICY_NO_HWS;
	apply(KFDP_GLUE_PREEMPT, it, n, &res);
	expect_status(test, it, n, -EOPNOTSUPP);
	dqm->sched_policy = KFD_SCHED_POLICY_HWS;

	/* Unknown queue id. */
	it[0].queue_id = 7;
	apply(KFDP_GLUE_PREEMPT, it, n, &res);
	expect_status(test, it, n, -ENOENT);

	KUNIT_EXPECT_FALSE(test, procs[0]->q[0]->properties.is_suspended);
	KUNIT_EXPECT_EQ(test, s.unmaps, en->hws.unmaps);
	KUNIT_EXPECT_EQ(test, s.runlists, en->hws.runlists);
	expect_consistent(test, en, true);
}

/*
 * The unmap fence never comes (a hung HWS): amdkfd's own hang path runs.
 * The glue reports EIO, keeps its marks, and refuses to take more off a
 * node about to be reset; after the reset the runlist honours the marks.
 */
static void hws_lost_fence(struct kunit *test)
{
	struct emu_node *en = node(test, GPU_A);
	struct emu_proc *procs[1] = { proc(test, en, 1, 3) };
	struct kfdp_glue_result res;
	struct kfdp_glue_item *it, *more;
	u32 n, m;

	it = items(test, procs, 1, 0, 1, &n);
	more = items(test, procs, 1, 1, 1, &m);
	en->hws.drop_next_fence = true;
	apply(KFDP_GLUE_PREEMPT, it, n, &res);
	expect_status(test, it, n, -EIO);
	KUNIT_EXPECT_TRUE(test, it[0].marked);
	KUNIT_EXPECT_EQ(test, 1, en->gpu_resets);
	KUNIT_EXPECT_TRUE(test, procs[0]->pdd->has_reset_queue);
	/* Counters still exact: the mark's decrement stands. */
	KUNIT_EXPECT_EQ(test, emu_count_active(en), en->node.dqm->active_queue_count);

	apply(KFDP_GLUE_PREEMPT, more, m, &res);
	expect_status(test, more, m, -EIO);
	KUNIT_EXPECT_EQ(test, 0, res.runlist_updates);

	/* amdgpu resets the GPU: the firmware restarts and gets the runlist. */
	KUNIT_EXPECT_EQ(test, 0, emu_node_reset(en));
	KUNIT_EXPECT_FALSE(test, emu_hws_is_mapped(en, procs[0]->q[0]));
	KUNIT_EXPECT_EQ(test, 0, en->hws.errors);
	KUNIT_EXPECT_EQ(test, emu_count_active(en), en->node.dqm->active_queue_count);
}

/*
 * Reset during our unmap: a queue of the trigger's process ignores
 * preemption during our own unmap. amdkfd resets it and update_queue() returns
 * -EACCES without mapping anything. The glue must not leave the node without a
 * runlist: another process's queues must run again.
 */
static void hws_queue_reset_during_unmap(struct kunit *test)
{
	struct emu_node *en = node(test, GPU_A);
	struct emu_proc *victim = proc(test, en, 1, 2), *other = proc(test, en, 2, 2);
	struct emu_proc *procs[1] = { victim };
	struct kfdp_glue_result res;
	struct kfdp_glue_item *it;
	u32 n;

	it = items(test, procs, 1, 0, 1, &n);
	en->hws.fail_next_unmap_doorbell = victim->q[1]->properties.doorbell_off;
	en->hws.hung_queue_address = victim->q[1]->properties.queue_address;
	en->hws.hung_pipe = 0;
	en->hws.hung_queue = 2;	/* the first slot KFD may use */
	apply(KFDP_GLUE_PREEMPT, it, n, &res);

	KUNIT_EXPECT_EQ(test, 1, en->reset_events);
	KUNIT_EXPECT_EQ(test, 0, en->gpu_resets);
	KUNIT_EXPECT_TRUE(test, victim->q[1]->properties.is_reset);
	KUNIT_EXPECT_TRUE(test, it[0].marked);
	expect_status(test, it, n, 0);
	/* The other tenant runs again, the reset queue does not. */
	KUNIT_EXPECT_TRUE(test, emu_hws_is_mapped(en, other->q[0]));
	KUNIT_EXPECT_TRUE(test, emu_hws_is_mapped(en, other->q[1]));
	KUNIT_EXPECT_FALSE(test, emu_hws_is_mapped(en, victim->q[0]));
	KUNIT_EXPECT_FALSE(test, emu_hws_is_mapped(en, victim->q[1]));
	expect_consistent(test, en, true);
}

/*
 * Reset during our unmap with no other process on the node: nothing can map it
 * (amdkfd's own update_queue refuses every process with a reset queue), so the
 * glue says EIO rather than success, and amdkfd's state stays exact.
 */
static void hws_queue_reset_alone(struct kunit *test)
{
	struct emu_node *en = node(test, GPU_A);
	struct emu_proc *victim = proc(test, en, 1, 3);
	struct emu_proc *procs[1] = { victim };
	struct kfdp_glue_result res;
	struct kfdp_glue_item *it;
	u32 n;

	it = items(test, procs, 1, 0, 1, &n);
	en->hws.fail_next_unmap_doorbell = victim->q[1]->properties.doorbell_off;
	en->hws.hung_queue_address = victim->q[1]->properties.queue_address;
	en->hws.hung_pipe = 0;
	en->hws.hung_queue = 2;
	apply(KFDP_GLUE_PREEMPT, it, n, &res);

	KUNIT_EXPECT_TRUE(test, victim->q[1]->properties.is_reset);
	expect_status(test, it, n, -EIO);
	KUNIT_EXPECT_TRUE(test, it[0].marked);
	expect_consistent(test, en, false);
}

/*
 * The reset-during-our-unmap fallback uses only processes it can hold
 * safely: not one whose p->mutex is busy, not a secondary context (torn down at
 * its fd's close, without p->mutex or mm_users). With only those left, EIO.
 */
static void hws_queue_reset_skips_unusable(struct kunit *test)
{
	struct emu_node *en = node(test, GPU_A);
	struct emu_proc *victim = proc(test, en, 1, 2);
	struct emu_proc *busy = proc(test, en, 2, 1), *secondary = proc(test, en, 3, 1);
	struct emu_proc *procs[1] = { victim };
	struct kfdp_glue_result res;
	struct kfdp_glue_item *it;
	u32 n;

	it = items(test, procs, 1, 0, 1, &n);
	secondary->p->context_id = 1;
	en->hws.fail_next_unmap_doorbell = victim->q[1]->properties.doorbell_off;
	en->hws.hung_queue_address = victim->q[1]->properties.queue_address;
	en->hws.hung_pipe = 0;
	en->hws.hung_queue = 2;
	mutex_lock(&busy->p->mutex);
	apply(KFDP_GLUE_PREEMPT, it, n, &res);
	mutex_unlock(&busy->p->mutex);
	secondary->p->context_id = KFD_CONTEXT_ID_PRIMARY;

	expect_status(test, it, n, -EIO);
	KUNIT_EXPECT_EQ(test, 1, res.runlist_updates);	/* the victim's only */
	expect_consistent(test, en, false);
}

/*
 * Failed thaw restore: a THAW whose restore fails. amdkfd has already dropped
 * the eviction count (restore_process_queues_cpsch sets evicted = 0 before it
 * returns the error), so the glue must report the freeze consumed, never to be
 * retried: a retry would consume an eviction amdkfd holds.
 */
static void hws_failed_thaw_consumes_freeze(struct kunit *test)
{
	struct emu_node *en = node(test, GPU_A);
	struct emu_proc *procs[1] = { proc(test, en, 1, 2) };
	bool applied;
	u64 ns;
	int r;

	KUNIT_EXPECT_EQ(test, 0, kfdp_freeze(&procs[0]->t, GPU_A, false, &ns, &applied));
	KUNIT_EXPECT_EQ(test, 1, procs[0]->pdd->qpd.evicted);
	emu_mem_fail_next(1);	/* the runlist IB */
	r = kfdp_freeze(&procs[0]->t, GPU_A, true, &ns, &applied);
	KUNIT_EXPECT_LT(test, r, 0);
	KUNIT_EXPECT_TRUE(test, applied);
	KUNIT_EXPECT_EQ(test, 0, procs[0]->pdd->qpd.evicted);
	KUNIT_EXPECT_EQ(test, emu_count_active(en), en->node.dqm->active_queue_count);
	KUNIT_EXPECT_EQ(test, 0, en->hws.errors);
}

/*
 * The glue's call into amdkfd's restore, watched through dqm->ops (which
 * kfdp_freeze() calls): how often it is called and, with
 * @evict_after_failure, amdkfd's own eviction taken as soon as a failed
 * restore has dropped dqm_lock, before the glue's next step. That is where
 * a retry would land, and where amdkfd's eviction can arrive: the GPU reset
 * kfd_hws_hang() asks for (its pre-reset suspends every process, its
 * post-reset restores none) or a TTM eviction, from another thread.
 */
struct restore_spy {
	int (*restore)(struct device_queue_manager *dqm, struct qcm_process_device *qpd);
	struct device_queue_manager *dqm;
	bool evict_after_failure;
	unsigned int calls;
	int evict_r;
};

static struct restore_spy spy;

static int spy_restore(struct device_queue_manager *dqm, struct qcm_process_device *qpd)
{
	int r = spy.restore(dqm, qpd);

	spy.calls++;
	if (r && spy.evict_after_failure)
		spy.evict_r = dqm->ops.evict_process_queues(dqm, qpd);
	return r;
}

static void spy_release(void *unused)
{
	spy.dqm->ops.restore_process_queues = spy.restore;
}

static void spy_on_restore(struct kunit *test, struct emu_node *en, bool evict_after_failure)
{
	struct device_queue_manager *dqm = en->node.dqm;

	spy = (struct restore_spy){
		.restore = dqm->ops.restore_process_queues,
		.dqm = dqm,
		.evict_after_failure = evict_after_failure,
	};
	dqm->ops.restore_process_queues = spy_restore;
	KUNIT_ASSERT_EQ(test, 0, kunit_add_action_or_reset(test, spy_release, NULL));
}

/*
 * Failed thaw restore on MES: MES refuses the add of the middle of three queues
 * during THAW. restore_process_queues_cpsch() has added the queues before it,
 * leaves the ones after it evicted, keeps qpd->evicted at 1 (only a failed
 * runlist zeroes it) and asks for a GPU reset. One restore consumed the one
 * freeze: the glue reports the error and calls amdkfd no more. A retry would
 * add the first queue to MES twice and zero the count; with @reset_evicts, the
 * reset's eviction is in the count by then and a retry would consume it.
 */
static void mes_failed_thaw(struct kunit *test, bool reset_evicts)
{
	struct emu_node *en = mes_node(test, GPU_A);
	struct emu_proc *a = proc(test, en, 1, 3), *b = proc(test, en, 2, 1);
	struct device_queue_manager *dqm = en->node.dqm;
	struct qcm_process_device *qpd = &a->pdd->qpd;
	struct queue *first, *failed = a->q[1], *last;
	unsigned int adds;
	bool applied;
	u64 ns;
	int r;

	/* amdkfd keeps a process's queues newest first; restore walks them so. */
	first = list_first_entry(&qpd->queues_list, struct queue, list);
	last = list_last_entry(&qpd->queues_list, struct queue, list);
	KUNIT_ASSERT_TRUE(test, first != failed && last != failed);
	KUNIT_ASSERT_NE(test, 0, failed->properties.doorbell_off);

	KUNIT_EXPECT_EQ(test, 0, kfdp_freeze(&a->t, GPU_A, false, &ns, &applied));
	KUNIT_EXPECT_EQ(test, 1, qpd->evicted);
	KUNIT_EXPECT_EQ(test, 1, en->hws.n_mapped);	/* b's queue */
	expect_consistent(test, en, true);

	spy_on_restore(test, en, reset_evicts);
	en->hws.fail_next_add_doorbell = failed->properties.doorbell_off;
	adds = en->hws.mes_adds;
	r = kfdp_freeze(&a->t, GPU_A, true, &ns, &applied);
	KUNIT_EXPECT_EQ(test, -ETIMEDOUT, r);
	KUNIT_EXPECT_TRUE(test, applied);
	KUNIT_EXPECT_EQ(test, 1, spy.calls);
	KUNIT_EXPECT_EQ(test, 0, spy.evict_r);
	/* The first queue, then the refused one; no add twice, none after. */
	KUNIT_EXPECT_EQ(test, adds + 2, en->hws.mes_adds);
	KUNIT_EXPECT_EQ(test, 1, en->hws.mes_add_failures);
	KUNIT_EXPECT_EQ(test, 0, en->hws.errors);
	KUNIT_EXPECT_EQ(test, 1, en->gpu_resets);	/* kfd_hws_hang() */
	/* The count the refused add left, and the reset's eviction if it came. */
	KUNIT_EXPECT_EQ(test, reset_evicts ? 2 : 1, qpd->evicted);
	KUNIT_EXPECT_TRUE(test, emu_hws_is_mapped(en, first));
	KUNIT_EXPECT_FALSE(test, emu_hws_is_mapped(en, failed));
	KUNIT_EXPECT_FALSE(test, emu_hws_is_mapped(en, last));
	KUNIT_EXPECT_TRUE(test, emu_hws_is_mapped(en, b->q[0]));
	KUNIT_EXPECT_EQ(test, 2, en->hws.n_mapped);
	/*
	 * amdkfd's own state after the refusal: the refused queue counted
	 * active though MES does not run it (restore counts before it adds),
	 * the counters equal to the active queues.
	 */
	KUNIT_EXPECT_TRUE(test, failed->properties.is_active);
	KUNIT_EXPECT_FALSE(test, last->properties.is_active);
	KUNIT_EXPECT_EQ(test, emu_count_active(en), dqm->active_queue_count);
	KUNIT_EXPECT_EQ(test, emu_count_active(en), dqm->active_cp_queue_count);

	if (!reset_evicts) {
		/*
		 * The count stays up for good, as the glue's warning says:
		 * amdkfd's own eviction and restore (TTM) nest inside it and
		 * re-add nothing.
		 */
		adds = en->hws.mes_adds;
		KUNIT_EXPECT_EQ(test, 0, dqm->ops.evict_process_queues(dqm, qpd));
		KUNIT_EXPECT_EQ(test, 0, dqm->ops.restore_process_queues(dqm, qpd));
		KUNIT_EXPECT_EQ(test, 1, qpd->evicted);
		KUNIT_EXPECT_EQ(test, adds, en->hws.mes_adds);
		KUNIT_EXPECT_FALSE(test, emu_hws_is_mapped(en, last));
	}

	/*
	 * amdkfd gives the queue MES lost up as reset; then the counters
	 * match MES again, and the teardown removes only what MES runs.
	 */
	emu_queue_set_reset(a->pdd, failed);
	expect_consistent(test, en, true);
}

static void mes_failed_thaw_add_not_retried(struct kunit *test)
{
	mes_failed_thaw(test, false);
}

static void mes_failed_thaw_add_keeps_reset_eviction(struct kunit *test)
{
	mes_failed_thaw(test, true);
}

/*
 * Failed thaw restore on HWS, with amdkfd's own eviction arriving as soon as
 * the failed restore drops dqm_lock. THAW's runlist cannot be sent (its IB is
 * not allocated: amdkfd never waits for a RUN_LIST's outcome, so a map fails in
 * restore_process_queues_cpsch() only in pm_send_runlist()), and the restore
 * has already zeroed qpd->evicted. The count then holds amdkfd's eviction only:
 * a retry would consume it and map the queues amdkfd keeps off.
 */
static void hws_failed_thaw_map_keeps_amdkfd_eviction(struct kunit *test)
{
	struct emu_node *en = node(test, GPU_A);
	struct emu_proc *a = proc(test, en, 1, 2), *b = proc(test, en, 2, 2);
	struct device_queue_manager *dqm = en->node.dqm;
	struct qcm_process_device *qpd = &a->pdd->qpd;
	struct emu_snap s;
	bool applied;
	u64 ns;
	int r;

	KUNIT_EXPECT_EQ(test, 0, kfdp_freeze(&a->t, GPU_A, false, &ns, &applied));
	KUNIT_EXPECT_EQ(test, 1, qpd->evicted);
	KUNIT_EXPECT_EQ(test, 2, en->hws.n_mapped);	/* b's queues */
	expect_consistent(test, en, true);

	spy_on_restore(test, en, true);
	s = snap(en);
	emu_mem_fail_next(1);	/* the runlist IB */
	r = kfdp_freeze(&a->t, GPU_A, true, &ns, &applied);
	KUNIT_EXPECT_LT(test, r, 0);
	KUNIT_EXPECT_TRUE(test, applied);
	KUNIT_EXPECT_EQ(test, 1, spy.calls);
	KUNIT_EXPECT_EQ(test, 0, spy.evict_r);
	KUNIT_EXPECT_EQ(test, 1, qpd->evicted);	/* amdkfd's, not consumed */
	/* The failed restore sent no runlist; amdkfd's eviction sent b's. */
	KUNIT_EXPECT_EQ(test, s.runlists + 1, en->hws.runlists);
	KUNIT_EXPECT_FALSE(test, emu_hws_is_mapped(en, a->q[0]));
	KUNIT_EXPECT_FALSE(test, emu_hws_is_mapped(en, a->q[1]));
	KUNIT_EXPECT_TRUE(test, emu_hws_is_mapped(en, b->q[0]));
	KUNIT_EXPECT_TRUE(test, emu_hws_is_mapped(en, b->q[1]));
	expect_consistent(test, en, true);

	/* amdkfd's restore ends its eviction: everything runs again. */
	KUNIT_EXPECT_EQ(test, 0, dqm->ops.restore_process_queues(dqm, qpd));
	KUNIT_EXPECT_EQ(test, 0, qpd->evicted);
	KUNIT_EXPECT_EQ(test, 4, en->hws.n_mapped);
	expect_consistent(test, en, true);
}

/*
 * The debugger's resume of every suspended queue (amdkfd's own
 * resume_queues(), as kfd_dbg_trap_disable calls it) resumes ours too:
 * the runlist maps it, and our RESUME says EXTERNAL and drops the mark.
 */
static void hws_debugger_resumes_behind_us(struct kunit *test)
{
	struct emu_node *en = node(test, GPU_A);
	struct emu_proc *procs[1] = { proc(test, en, 1, 2) };
	struct kfdp_glue_result res;
	struct kfdp_glue_item *it;
	u32 n;

	it = items(test, procs, 1, 0, 1, &n);
	apply_ok(test, KFDP_GLUE_PREEMPT, it, n, &res);
	mutex_lock(&procs[0]->p->mutex);
	/* It counts every queue it went through, suspended or not. */
	KUNIT_EXPECT_EQ(test, 2, resume_queues(procs[0]->p, 0, NULL));
	mutex_unlock(&procs[0]->p->mutex);
	KUNIT_EXPECT_TRUE(test, emu_hws_is_mapped(en, procs[0]->q[0]));
	expect_consistent(test, en, true);

	apply(KFDP_GLUE_RESUME, it, n, &res);
	expect_status(test, it, n, KFDP_R_EXTERNAL);
	KUNIT_EXPECT_FALSE(test, it[0].marked);
	KUNIT_EXPECT_EQ(test, 0, res.runlist_updates);
	expect_consistent(test, en, true);
}

/*
 * The KFD debugger attaches to a tenant we hold: it suspends its own queue
 * and ours through amdkfd's suspend_single_queue(); while it is attached
 * the glue refuses both (EBUSY) and gives ours up to it; its resume at
 * detach maps everything again.
 */
static void hws_debugger_suspends_ours_and_its_own(struct kunit *test)
{
	struct emu_node *en = node(test, GPU_A);
	struct emu_proc *procs[1] = { proc(test, en, 1, 2) };
	struct kfd_process *p = procs[0]->p;
	struct kfdp_glue_item *ours, *its;
	struct kfdp_glue_result res;
	u32 n, m;

	ours = items(test, procs, 1, 0, 1, &n);
	its = items(test, procs, 1, 1, 1, &m);
	apply_ok(test, KFDP_GLUE_PREEMPT, ours, n, &res);

	/* Runtime enable clears EC_QUEUE_NEW; then the debugger suspends. */
	p->debug_trap_enabled = true;
	procs[0]->q[0]->properties.exception_status = 0;
	procs[0]->q[1]->properties.exception_status = 0;
	KUNIT_EXPECT_EQ(test, 0, emu_debugger_suspend(procs[0]->pdd, procs[0]->q[1]));
	KUNIT_EXPECT_EQ(test, 0, emu_debugger_suspend(procs[0]->pdd, procs[0]->q[0]));
	KUNIT_EXPECT_EQ(test, 0, en->hws.n_mapped);
	expect_consistent(test, en, true);

	apply(KFDP_GLUE_PREEMPT, its, m, &res);
	expect_status(test, its, m, -EBUSY);
	KUNIT_EXPECT_FALSE(test, its[0].marked);
	apply(KFDP_GLUE_RESUME, ours, n, &res);
	expect_status(test, ours, n, -EBUSY);
	KUNIT_EXPECT_FALSE(test, ours[0].marked);	/* the debugger owns it now */
	KUNIT_EXPECT_TRUE(test, procs[0]->q[0]->properties.is_suspended);

	/* Detach: the debugger resumes everything it holds. */
	mutex_lock(&p->mutex);
	resume_queues(p, 0, NULL);
	mutex_unlock(&p->mutex);
	p->debug_trap_enabled = false;
	KUNIT_EXPECT_EQ(test, 2, en->hws.n_mapped);
	expect_consistent(test, en, true);
}

/* A queue created while its process is frozen is held back until THAW. */
static void hws_queue_created_while_frozen(struct kunit *test)
{
	struct emu_node *en = node(test, GPU_A);
	struct emu_proc *ep = proc(test, en, 1, 1);
	bool applied;
	u64 ns;

	KUNIT_EXPECT_EQ(test, 0, kfdp_freeze(&ep->t, GPU_A, false, &ns, &applied));
	KUNIT_EXPECT_EQ(test, 0, emu_queue_create(ep, 1));
	KUNIT_EXPECT_FALSE(test, emu_hws_is_mapped(en, ep->q[1]));
	expect_consistent(test, en, true);
	KUNIT_EXPECT_EQ(test, 0, kfdp_freeze(&ep->t, GPU_A, true, &ns, &applied));
	KUNIT_EXPECT_EQ(test, 2, en->hws.n_mapped);
	expect_consistent(test, en, true);
}

/*
 * MI300X in SPX mode: one node of 8 XCCs. amdkfd writes 8 MQDs per queue
 * and 8 HIQ MQDs, and checks every HIQ MQD for a failed preemption; the
 * batch still costs one cycle and the MQDs survive.
 */
static void hws_eight_xccs(struct kunit *test)
{
	struct emu_node *en = new_node_xcc(test, GPU_A, 0xff, false);
	struct emu_proc *procs[2] = { proc(test, en, 1, 3), proc(test, en, 2, 3) };
	struct kfdp_glue_result res;
	struct kfdp_glue_item *it;
	struct emu_snap s;
	u32 n;

	KUNIT_EXPECT_EQ(test, 6, en->hws.n_mapped);
	it = items(test, procs, 2, 0, 2, &n);
	s = snap(en);
	apply_ok(test, KFDP_GLUE_PREEMPT, it, n, &res);
	KUNIT_EXPECT_EQ(test, 1, res.runlist_updates);
	KUNIT_EXPECT_EQ(test, s.unmaps + 1, en->hws.unmaps);
	KUNIT_EXPECT_EQ(test, s.runlists + 1, en->hws.runlists);
	KUNIT_EXPECT_EQ(test, 2, en->hws.n_mapped);
	expect_consistent(test, en, true);
	apply_ok(test, KFDP_GLUE_RESUME, it, n, &res);
	KUNIT_EXPECT_EQ(test, 6, en->hws.n_mapped);
	expect_consistent(test, en, true);
}

/* More processes than a quantum holds: amdkfd chains the runlist; marks still hold. */
static void hws_oversubscribed(struct kunit *test)
{
	struct emu_node *en = node(test, GPU_A);
	struct emu_proc *procs[14];
	struct kfdp_glue_result res;
	struct kfdp_glue_item *it;
	u32 n;
	int i;

	for (i = 0; i < 14; i++)
		procs[i] = proc(test, en, i + 1, 2);
	KUNIT_EXPECT_GT(test, en->hws.chained, 0);
	it = items(test, procs, 14, 0, 1, &n);
	apply_ok(test, KFDP_GLUE_PREEMPT, it, n, &res);
	KUNIT_EXPECT_EQ(test, 1, res.runlist_updates);
	KUNIT_EXPECT_EQ(test, 14, en->hws.n_mapped);
	expect_consistent(test, en, true);
	apply_ok(test, KFDP_GLUE_RESUME, it, n, &res);
	KUNIT_EXPECT_EQ(test, 28, en->hws.n_mapped);
	expect_consistent(test, en, true);
}

/*
 * Deferred trigger: a PREEMPT whose trigger is DEFERRED (here: every queue of
 * the node awaits its MQD repin, as after S4) keeps its marks while the
 * firmware still runs the queues. The next PREEMPT of them must trigger, not
 * answer ALREADY and leave them running.
 */
static void hws_deferred_then_preempt_triggers(struct kunit *test)
{
	struct emu_node *en = node(test, GPU_A);
	struct emu_proc *procs[1] = { proc(test, en, 1, 2) };
	struct kfdp_glue_result res;
	struct kfdp_glue_item *it;
	void *mqd0, *mqd1;
	u32 n;

	it = items(test, procs, 1, 0, 1, &n);
	/* As 7.3's dqm_evict_mqd_bo leaves them at S4 (7.2 has no such state). */
	mqd0 = procs[0]->q[0]->mqd;
	mqd1 = procs[0]->q[1]->mqd;
	procs[0]->q[0]->mqd = NULL;
	procs[0]->q[1]->mqd = NULL;
	apply(KFDP_GLUE_PREEMPT, it, n, &res);
	expect_status(test, it, n, KFDP_R_DEFERRED);
	KUNIT_EXPECT_TRUE(test, it[0].marked);
	KUNIT_EXPECT_TRUE(test, emu_hws_is_mapped(en, procs[0]->q[0]));	/* still running */

	procs[0]->q[0]->mqd = mqd0;
	procs[0]->q[1]->mqd = mqd1;
	apply(KFDP_GLUE_PREEMPT, it, n, &res);
	expect_status(test, it, n, KFDP_R_ALREADY);
	KUNIT_EXPECT_EQ(test, 1, res.runlist_updates);
	KUNIT_EXPECT_FALSE(test, emu_hws_is_mapped(en, procs[0]->q[0]));
	expect_consistent(test, en, true);

	/* Applied: a third PREEMPT costs nothing. */
	apply(KFDP_GLUE_PREEMPT, it, n, &res);
	expect_status(test, it, n, KFDP_R_ALREADY);
	KUNIT_EXPECT_EQ(test, 0, res.runlist_updates);

	apply_ok(test, KFDP_GLUE_RESUME, it, n, &res);
	expect_consistent(test, en, true);
}

/*
 * The rate limit: a second PREEMPT or FREEZE of a node within
 * min_preempt_interval_us is refused with EAGAIN and changes nothing;
 * RESUME and THAW are never refused; another node is not affected.
 */
static void hws_rate_limit(struct kunit *test)
{
	struct emu_node *a = node(test, GPU_A), *b = node(test, GPU_B);
	struct emu_proc *pa[1] = { proc(test, a, 1, 2) }, *pb[1] = { proc(test, b, 2, 1) };
	struct kfdp_glue_item *first, *second, *other;
	struct kfdp_glue_result res;
	struct emu_snap s;
	bool applied;
	u32 n, m, k;
	u64 ns;

	kfdp_min_preempt_interval_us = USEC_PER_SEC;	/* never reached in a test */
	first = items(test, pa, 1, 0, 1, &n);
	second = items(test, pa, 1, 1, 1, &m);
	other = items(test, pb, 1, 0, 1, &k);

	/* A dry run only looks: it does not use the node's turn. */
	kfdp_apply(KFDP_GLUE_PREEMPT, true, first, n, &res);
	expect_status(test, first, n, 0);
	apply_ok(test, KFDP_GLUE_PREEMPT, first, n, &res);
	KUNIT_EXPECT_EQ(test, 1, res.runlist_updates);

	/* Held already, no hardware needed: not refused (its lease renews). */
	apply(KFDP_GLUE_PREEMPT, first, n, &res);
	expect_status(test, first, n, KFDP_R_ALREADY);
	KUNIT_EXPECT_TRUE(test, first[0].marked);

	/* A dry run within the interval says what the real call would. */
	kfdp_apply(KFDP_GLUE_PREEMPT, true, second, m, &res);
	expect_status(test, second, m, -EAGAIN);

	s = snap(a);
	apply(KFDP_GLUE_PREEMPT, second, m, &res);
	expect_status(test, second, m, -EAGAIN);
	KUNIT_EXPECT_FALSE(test, second[0].marked);
	KUNIT_EXPECT_FALSE(test, pa[0]->q[1]->properties.is_suspended);
	KUNIT_EXPECT_EQ(test, s.unmaps, a->hws.unmaps);
	KUNIT_EXPECT_TRUE(test, emu_hws_is_mapped(a, pa[0]->q[1]));
	KUNIT_EXPECT_EQ(test, -EAGAIN, kfdp_freeze(&pa[0]->t, GPU_A, false, &ns, &applied));
	KUNIT_EXPECT_FALSE(test, applied);
	KUNIT_EXPECT_EQ(test, 0, pa[0]->pdd->qpd.evicted);
	expect_consistent(test, a, true);

	/*
	 * A held mark whose queue the debugger resumed behind us is marked
	 * anew by a second PREEMPT; refused, that is undone too.
	 */
	mutex_lock(&pa[0]->p->mutex);
	resume_queues(pa[0]->p, 0, NULL);
	mutex_unlock(&pa[0]->p->mutex);
	KUNIT_EXPECT_TRUE(test, emu_hws_is_mapped(a, pa[0]->q[0]));
	apply(KFDP_GLUE_PREEMPT, first, n, &res);
	expect_status(test, first, n, -EAGAIN);
	KUNIT_EXPECT_FALSE(test, pa[0]->q[0]->properties.is_suspended);
	KUNIT_EXPECT_TRUE(test, pa[0]->q[0]->properties.is_active);
	expect_consistent(test, a, true);
	/* Still ours: RESUME finds it resumed behind our back. */
	apply(KFDP_GLUE_RESUME, first, n, &res);
	expect_status(test, first, n, KFDP_R_EXTERNAL);
	KUNIT_EXPECT_FALSE(test, first[0].marked);

	/* Another node has its own budget; RESUME is never refused. */
	apply_ok(test, KFDP_GLUE_PREEMPT, other, k, &res);
	apply_ok(test, KFDP_GLUE_RESUME, other, k, &res);

	kfdp_min_preempt_interval_us = 0;
	apply_ok(test, KFDP_GLUE_PREEMPT, second, m, &res);
	apply_ok(test, KFDP_GLUE_RESUME, second, m, &res);
	expect_consistent(test, a, true);
	expect_consistent(test, b, true);
}

/*
 * The identity gate's structural checks accept amdkfd's own objects, whose
 * dqm->ops lie in the module that compiled amdkfd (here, this one), and
 * refuse each broken invariant.
 */
static void layout_checks(struct kunit *test)
{
	struct emu_node *en = node(test, GPU_A);
	struct emu_proc *ep = proc(test, en, 1, 1);
	struct device_queue_manager *dqm = en->node.dqm;
	typeof(dqm->ops.update_queue) update;
	struct kfd_node *dev;

	KUNIT_EXPECT_EQ(test, 0, kfdp_check_layout(ep->p, THIS_MODULE));

	ep->pdd->process = NULL;
	KUNIT_EXPECT_EQ(test, -EINVAL, kfdp_check_layout(ep->p, THIS_MODULE));
	ep->pdd->process = ep->p;

	dev = dqm->dev;
	dqm->dev = NULL;
	KUNIT_EXPECT_EQ(test, -EINVAL, kfdp_check_layout(ep->p, THIS_MODULE));
	dqm->dev = dev;

	ep->p->n_pdds = MAX_GPU_INSTANCE + 1;
	KUNIT_EXPECT_EQ(test, -EINVAL, kfdp_check_layout(ep->p, THIS_MODULE));
	ep->p->n_pdds = 1;

	/* An op outside the module that owns /dev/kfd: a layout mismatch. */
	update = dqm->ops.update_queue;
	dqm->ops.update_queue = (void *)kfree;
	KUNIT_EXPECT_EQ(test, -EINVAL, kfdp_check_layout(ep->p, THIS_MODULE));
	dqm->ops.update_queue = update;

	KUNIT_EXPECT_EQ(test, 0, kfdp_check_layout(ep->p, THIS_MODULE));
}

/* srcversion decides only where both amdgpu.ko files have one. */
static void srcversion_is_an_extra_check(struct kunit *test)
{
	KUNIT_EXPECT_TRUE(test, kfdp_srcversion_accepts("0A1B", "0A1B"));
	KUNIT_EXPECT_FALSE(test, kfdp_srcversion_accepts("0A1B", "0A1C"));
	KUNIT_EXPECT_TRUE(test, kfdp_srcversion_accepts(NULL, "0A1B"));
	KUNIT_EXPECT_TRUE(test, kfdp_srcversion_accepts("", "0A1B"));
	KUNIT_EXPECT_TRUE(test, kfdp_srcversion_accepts("0A1B", ""));
	/* This build was made from reviewed amdkfd sources. */
	KUNIT_EXPECT_STREQ(test, "", kfdp_amdkfd_unreviewed());
}

/*
 * GC 11 (MES): no runlist; the same marks, then one remove (PREEMPT) or add
 * (RESUME) per queue through amdkfd's remove_queue_mes/add_queue_mes.
 */
static void mes_one_call_per_queue(struct kunit *test)
{
	struct emu_node *en = mes_node(test, GPU_A);
	struct emu_proc *procs[2] = { proc(test, en, 1, 2), proc(test, en, 2, 2) };
	struct kfdp_glue_result res;
	struct kfdp_glue_item *it;
	unsigned int adds, removes;
	u32 n;

	KUNIT_EXPECT_EQ(test, 4, en->hws.mes_adds);
	KUNIT_EXPECT_EQ(test, 4, en->hws.n_mapped);
	expect_consistent(test, en, true);

	it = items(test, procs, 2, 0, 2, &n);
	n = 3;	/* both queues of the first process, one of the second */
	removes = en->hws.mes_removes;
	apply_ok(test, KFDP_GLUE_PREEMPT, it, n, &res);
	KUNIT_EXPECT_EQ(test, 3, res.runlist_updates);
	KUNIT_EXPECT_EQ(test, removes + 3, en->hws.mes_removes);
	KUNIT_EXPECT_EQ(test, 1, en->hws.n_mapped);
	KUNIT_EXPECT_TRUE(test, emu_hws_is_mapped(en, procs[1]->q[1]));
	expect_consistent(test, en, true);

	/* Held: a second PREEMPT calls nothing. */
	apply(KFDP_GLUE_PREEMPT, it, n, &res);
	expect_status(test, it, n, KFDP_R_ALREADY);
	KUNIT_EXPECT_EQ(test, 0, res.runlist_updates);

	adds = en->hws.mes_adds;
	apply_ok(test, KFDP_GLUE_RESUME, it, n, &res);
	KUNIT_EXPECT_EQ(test, 3, res.runlist_updates);
	KUNIT_EXPECT_EQ(test, adds + 3, en->hws.mes_adds);
	KUNIT_EXPECT_EQ(test, 4, en->hws.n_mapped);
	expect_consistent(test, en, true);
}

/* MES: FREEZE and THAW remove and add every queue; a held queue stays off. */
static void mes_freeze_thaw(struct kunit *test)
{
	struct emu_node *en = mes_node(test, GPU_A);
	struct emu_proc *procs[1] = { proc(test, en, 1, 3) };
	struct kfdp_glue_result res;
	struct kfdp_glue_item *it;
	bool applied;
	u64 ns;
	u32 n;

	it = items(test, procs, 1, 0, 1, &n);
	apply_ok(test, KFDP_GLUE_PREEMPT, it, n, &res);
	KUNIT_EXPECT_FALSE(test, emu_hws_is_mapped(en, procs[0]->q[0]));
	expect_consistent(test, en, true);
	KUNIT_EXPECT_EQ(test, 0, kfdp_freeze(&procs[0]->t, GPU_A, false, &ns, &applied));
	KUNIT_EXPECT_EQ(test, 0, en->hws.n_mapped);
	expect_consistent(test, en, true);
	KUNIT_EXPECT_EQ(test, 0, kfdp_freeze(&procs[0]->t, GPU_A, true, &ns, &applied));
	KUNIT_EXPECT_EQ(test, 2, en->hws.n_mapped);
	KUNIT_EXPECT_FALSE(test, emu_hws_is_mapped(en, procs[0]->q[0]));
	apply_ok(test, KFDP_GLUE_RESUME, it, n, &res);
	KUNIT_EXPECT_EQ(test, 3, en->hws.n_mapped);
	expect_consistent(test, en, true);
}

struct emu_leak_check {
	struct kunit *test;
	unsigned int live;
};

/* Runs last: every buffer amdkfd allocated was freed by its own teardown. */
static void emu_leak_check(void *data)
{
	struct emu_leak_check *c = data;

	KUNIT_EXPECT_EQ_MSG(c->test, c->live, emu_mem_live(), "fake GART buffers leaked");
	/* Free them anyway, so that the next case starts clean. */
	if (c->live == 0)
		emu_mem_cleanup();
}

static void emu_restore_interval(void *data)
{
	kfdp_nodes_forget();
	kfdp_min_preempt_interval_us = (uintptr_t)data;
}

/*
 * Each case starts with no glue state about any node and, but for the
 * rate-limit case, no limit: gpu_ids repeat from case to case.
 */
static int emu_test_init(struct kunit *test)
{
	struct emu_leak_check *c = kunit_kzalloc(test, sizeof(*c), GFP_KERNEL);
	int r;

	if (!c)
		return -ENOMEM;
	c->test = test;
	c->live = emu_mem_live();
	/* Registered first, so it runs after every node and process is gone. */
	r = kunit_add_action_or_reset(test, emu_leak_check, c);
	if (r)
		return r;
	r = kunit_add_action_or_reset(test, emu_restore_interval,
				      (void *)(uintptr_t)kfdp_min_preempt_interval_us);
	if (r)
		return r;
	kfdp_nodes_forget();
	kfdp_min_preempt_interval_us = 0;
	return 0;
}

static struct kunit_case kfdp_amdkfd_hws_cases[] = {
	KUNIT_CASE(hws_starts_with_runlist),
	KUNIT_CASE(hws_batch_costs_one_cycle),
	KUNIT_CASE(hws_batch_over_two_nodes),
	KUNIT_CASE(hws_runlist_debugfs_dump),
	KUNIT_CASE(hws_query_reports_aql_and_pointers),
	KUNIT_CASE(hws_mqd_preserved),
	KUNIT_CASE(hws_tenant_update_keeps_preemption),
	KUNIT_CASE(hws_destroy_while_preempted),
	KUNIT_CASE(hws_freeze_thaw),
	KUNIT_CASE(hws_queue_created_while_frozen),
	KUNIT_CASE(hws_debugger_resumes_behind_us),
	KUNIT_CASE(hws_debugger_suspends_ours_and_its_own),
	KUNIT_CASE(hws_oversubscribed),
	KUNIT_CASE(hws_eight_xccs),
	KUNIT_CASE(hws_cu_mask_while_preempted),
	KUNIT_CASE(hws_gws_while_preempted),
	KUNIT_CASE(hws_eviction_while_preempted),
	KUNIT_CASE(hws_exit_while_preempted),
	KUNIT_CASE(hws_halted_scheduler),
	KUNIT_CASE(hws_refusals),
	{}
};

static struct kunit_case kfdp_amdkfd_faults_cases[] = {
	KUNIT_CASE(hws_lost_fence),
	KUNIT_CASE(hws_queue_reset_during_unmap),
	KUNIT_CASE(hws_queue_reset_alone),
	KUNIT_CASE(hws_queue_reset_skips_unusable),
	KUNIT_CASE(hws_failed_thaw_consumes_freeze),
	KUNIT_CASE(hws_failed_thaw_map_keeps_amdkfd_eviction),
	KUNIT_CASE(mes_failed_thaw_add_not_retried),
	KUNIT_CASE(mes_failed_thaw_add_keeps_reset_eviction),
	KUNIT_CASE(hws_deferred_then_preempt_triggers),
	KUNIT_CASE(hws_rate_limit),
	{}
};

static struct kunit_case kfdp_amdkfd_mes_cases[] = {
	KUNIT_CASE(mes_one_call_per_queue),
	KUNIT_CASE(mes_freeze_thaw),
	{}
};

static struct kunit_case kfdp_amdkfd_identity_cases[] = {
	KUNIT_CASE(layout_checks),
	KUNIT_CASE(srcversion_is_an_extra_check),
	{}
};

static struct kunit_suite kfdp_amdkfd_hws_suite = {
	.name = "kfdp_amdkfd_hws",
	.init = emu_test_init,
	.test_cases = kfdp_amdkfd_hws_cases,
};

static struct kunit_suite kfdp_amdkfd_faults_suite = {
	.name = "kfdp_amdkfd_faults",
	.init = emu_test_init,
	.test_cases = kfdp_amdkfd_faults_cases,
};

static struct kunit_suite kfdp_amdkfd_mes_suite = {
	.name = "kfdp_amdkfd_mes",
	.init = emu_test_init,
	.test_cases = kfdp_amdkfd_mes_cases,
};

static struct kunit_suite kfdp_amdkfd_identity_suite = {
	.name = "kfdp_amdkfd_identity",
	.init = emu_test_init,
	.test_cases = kfdp_amdkfd_identity_cases,
};

kunit_test_suites(&kfdp_amdkfd_hws_suite, &kfdp_amdkfd_faults_suite,
		  &kfdp_amdkfd_mes_suite, &kfdp_amdkfd_identity_suite);
