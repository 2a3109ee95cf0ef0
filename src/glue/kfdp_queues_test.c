// SPDX-License-Identifier: GPL-2.0
/*
 * KUnit suite for the glue's mechanism on fake amdkfd object graphs: real
 * struct kfd_process, kfd_process_device, queue, kfd_node, kfd_dev and
 * device_queue_manager, with dqm->ops.update_queue replaced by a fake that
 * behaves like amdkfd's as far as queue state and counters go, counts its
 * calls, and checks after every call that active_queue_count is the number
 * of is_active queues. It builds against any kernel with KUnit; what
 * amdkfd's own queue manager can show runs against it instead, in the
 * test kernel's kfdp_amdkfd_emu.ko (tests/amdkfd-emu), and left this suite:
 * here remain the glue's own rules on states amdkfd's code does not easily
 * reach (a reset queue, EXTERNAL after a resume behind our back, dry runs,
 * an exec'ed target).
 */

#include <kunit/test.h>
#include <linux/sched/mm.h>
#include <linux/slab.h>

#include <linux/kfd_preempt.h>

#include "kfdp_glue_priv.h"

MODULE_IMPORT_NS("EXPORTED_FOR_KUNIT_TESTING");

#define FAKE_MAX_PROCS 16
#define FAKE_MAX_QUEUES 16

struct fake_node {
	struct kfd_node node;
	struct kfd_dev kfd;
	struct device_queue_manager dqm;
	struct kfd_process_device *pdds[FAKE_MAX_PROCS];
	int n_pdds;
	int updates;		/* update_queue calls */
	int fail_next;		/* rc of the next update_queue, then 0 */
	bool counters_ok;	/* invariant held after every call */
};

struct fake_proc {
	struct kfd_process *p;
	struct kfd_process_device *pdd;
	struct kfdp_target t;
	struct queue *q[FAKE_MAX_QUEUES];
	int nq;
};

static char fake_mqd[64];

static struct fake_node *to_fake(struct device_queue_manager *dqm)
{
	return container_of(dqm, struct fake_node, dqm);
}

static void fake_check_counters(struct fake_node *f)
{
	unsigned int active = 0, gws = 0;
	struct queue *q;
	int i;

	for (i = 0; i < f->n_pdds; i++)
		list_for_each_entry(q, &f->pdds[i]->qpd.queues_list, list) {
			active += q->properties.is_active;
			gws += q->properties.is_active && q->properties.is_gws;
		}
	if (active != f->dqm.active_queue_count ||
	    active != f->dqm.active_cp_queue_count || gws != f->dqm.gws_queue_count)
		f->counters_ok = false;
}

static void fake_count(struct device_queue_manager *dqm, struct queue *q, int d)
{
	dqm->active_queue_count += d;
	dqm->active_cp_queue_count += d;
	if (q->properties.is_gws)
		dqm->gws_queue_count += d;
}

/* amdkfd's update_queue() as far as state goes: update_mqd + counters. */
static int fake_update_queue(struct device_queue_manager *dqm, struct queue *q,
			     struct mqd_update_info *minfo)
{
	struct fake_node *f = to_fake(dqm);
	bool prev;
	int r;

	dqm_lock(dqm);
	fake_check_counters(f);	/* the marks left the counters exact */
	f->updates++;
	r = f->fail_next;
	f->fail_next = 0;
	if (r) {
		dqm_unlock(dqm);
		return r;
	}
	prev = q->properties.is_active;
	q->properties.is_active = QUEUE_IS_ACTIVE(q->properties);
	if (q->properties.is_active != prev)
		fake_count(dqm, q, q->properties.is_active ? 1 : -1);
	fake_check_counters(f);
	dqm_unlock(dqm);
	return 0;
}

static struct fake_node *fake_node(struct kunit *test)
{
	struct fake_node *f = kunit_kzalloc(test, sizeof(*f), GFP_KERNEL);

	KUNIT_ASSERT_NOT_NULL(test, f);
	f->node.kfd = &f->kfd;
	f->node.dqm = &f->dqm;
	f->kfd.cwsr_enabled = true;
	f->dqm.dev = &f->node;
	f->dqm.sched_policy = KFD_SCHED_POLICY_HWS;
	f->dqm.sched_running = true;
	mutex_init(&f->dqm.lock_hidden);
	init_waitqueue_head(&f->dqm.destroy_wait);
	/* No process is registered: the -EACCES fallback finds none. */
	INIT_LIST_HEAD(&f->dqm.queues);
	f->dqm.ops.update_queue = fake_update_queue;
	f->counters_ok = true;
	return f;
}

static void fake_proc_exit(void *data)
{
	struct fake_proc *fp = data;

	mmput(fp->p->mm);
}

static struct fake_proc *fake_proc(struct kunit *test, struct fake_node *f,
				   u32 gpu_id, int nq)
{
	struct fake_proc *fp = kunit_kzalloc(test, sizeof(*fp), GFP_KERNEL);
	int i;

	KUNIT_ASSERT_NOT_NULL(test, fp);
	fp->p = kunit_kzalloc(test, sizeof(*fp->p), GFP_KERNEL);
	fp->pdd = kunit_kzalloc(test, sizeof(*fp->pdd), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, fp->p);
	KUNIT_ASSERT_NOT_NULL(test, fp->pdd);
	mutex_init(&fp->p->mutex);
	fp->p->mm = mm_alloc();
	KUNIT_ASSERT_NOT_NULL(test, fp->p->mm);
	KUNIT_ASSERT_EQ(test, 0, kunit_add_action_or_reset(test, fake_proc_exit, fp));
	fp->p->context_id = KFD_CONTEXT_ID_PRIMARY;
	fp->p->n_pdds = 1;
	fp->p->pdds[0] = fp->pdd;
	fp->pdd->dev = &f->node;
	fp->pdd->process = fp->p;
	fp->pdd->user_gpu_id = gpu_id;
	fp->pdd->qpd.dqm = &f->dqm;
	INIT_LIST_HEAD(&fp->pdd->qpd.queues_list);
	KUNIT_ASSERT_LT(test, f->n_pdds, FAKE_MAX_PROCS);
	f->pdds[f->n_pdds++] = fp->pdd;
	fp->t.p = fp->p;
	fp->t.mm = fp->p->mm;

	for (i = 0; i < nq; i++) {
		struct queue *q = kunit_kzalloc(test, sizeof(*q), GFP_KERNEL);

		KUNIT_ASSERT_NOT_NULL(test, q);
		q->mqd = fake_mqd;
		q->process = fp->p;
		q->device = &f->node;
		q->properties.type = KFD_QUEUE_TYPE_COMPUTE;
		q->properties.queue_id = i;
		q->properties.queue_size = 4096;
		q->properties.queue_address = 0x10000 + i * 0x1000;
		q->properties.queue_percent = 100;
		q->properties.ctx_save_restore_area_address = 0x800000 + i * 0x1000;
		q->properties.is_active = true;
		list_add_tail(&q->list, &fp->pdd->qpd.queues_list);
		fake_count(&f->dqm, q, 1);
		fp->q[fp->nq++] = q;
	}
	return fp;
}

/* Items for every queue of @procs, in order. */
static struct kfdp_glue_item *items_for(struct kunit *test, struct fake_proc **procs,
					int np, bool owned, u32 *n)
{
	struct kfdp_glue_item *it;
	int i, j, k = 0, total = 0;

	for (i = 0; i < np; i++)
		total += procs[i]->nq;
	it = kunit_kcalloc(test, total, sizeof(*it), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, it);
	for (i = 0; i < np; i++)
		for (j = 0; j < procs[i]->nq; j++, k++) {
			it[k].target = &procs[i]->t;
			it[k].gpu_id = procs[i]->pdd->user_gpu_id;
			it[k].queue_id = j;
			it[k].flags = owned ? KFDP_GLUE_ITEM_OWNED : 0;
		}
	*n = total;
	return it;
}

static void apply(u32 op, struct kfdp_glue_item *it, u32 n,
		  struct kfdp_glue_result *res)
{
	kfdp_apply(op, false, it, n, res);
	/* What the engine does with `marked`. */
	for (u32 i = 0; i < n; i++)
		it[i].flags = it[i].marked ? KFDP_GLUE_ITEM_OWNED : 0;
}

/* EC_QUEUE_NEW stays set in undebugged processes: it must not block us. */
static void kfdp_new_queue_ignored(struct kunit *test)
{
	struct fake_node *f = fake_node(test);
	struct fake_proc *procs[1] = { fake_proc(test, f, 1, 1) };
	struct kfdp_glue_result res;
	struct kfdp_glue_item *it;
	u32 n;

	procs[0]->q[0]->properties.exception_status = KFD_EC_MASK(EC_QUEUE_NEW);
	it = items_for(test, procs, 1, false, &n);
	apply(KFDP_GLUE_PREEMPT, it, n, &res);
	KUNIT_EXPECT_EQ(test, 0, it[0].status);
	KUNIT_EXPECT_FALSE(test, procs[0]->q[0]->properties.is_active);
}

static void kfdp_reset_never_reactivated(struct kunit *test)
{
	struct fake_node *f = fake_node(test);
	struct fake_proc *procs[1] = { fake_proc(test, f, 1, 2) };
	struct kfdp_glue_result res;
	struct kfdp_glue_item *it;
	u32 n;

	it = items_for(test, procs, 1, false, &n);
	apply(KFDP_GLUE_PREEMPT, it, n, &res);
	procs[0]->q[0]->properties.is_reset = true;
	apply(KFDP_GLUE_RESUME, it, n, &res);
	KUNIT_EXPECT_EQ(test, -EIO, it[0].status);
	KUNIT_EXPECT_FALSE(test, it[0].marked);
	KUNIT_EXPECT_FALSE(test, procs[0]->q[0]->properties.is_active);
	KUNIT_EXPECT_EQ(test, 0, it[1].status);
	KUNIT_EXPECT_EQ(test, 1, f->dqm.active_queue_count);
	/* And a reset queue is never preempted either. */
	it[0].flags = 0;
	apply(KFDP_GLUE_PREEMPT, it, 1, &res);
	KUNIT_EXPECT_EQ(test, -EIO, it[0].status);
	KUNIT_EXPECT_TRUE(test, f->counters_ok);
}

static void kfdp_already_external_and_others(struct kunit *test)
{
	struct fake_node *f = fake_node(test);
	struct fake_proc *procs[1] = { fake_proc(test, f, 1, 2) };
	struct kfdp_glue_result res;
	struct kfdp_glue_item *it;
	u32 n;

	it = items_for(test, procs, 1, false, &n);
	apply(KFDP_GLUE_PREEMPT, it, n, &res);
	apply(KFDP_GLUE_PREEMPT, it, n, &res);
	KUNIT_EXPECT_EQ(test, KFDP_R_ALREADY, it[0].status);
	KUNIT_EXPECT_EQ(test, 0, res.runlist_updates);

	/* Someone else's suspension is not ours to resume or to take. */
	it[1].flags = 0;
	apply(KFDP_GLUE_RESUME, &it[1], 1, &res);
	KUNIT_EXPECT_EQ(test, -EBUSY, it[1].status);
	KUNIT_EXPECT_TRUE(test, procs[0]->q[1]->properties.is_suspended);

	/* A debugger resumed queue 0 behind our back. */
	procs[0]->q[0]->properties.is_suspended = false;
	apply(KFDP_GLUE_RESUME, it, 1, &res);
	KUNIT_EXPECT_EQ(test, KFDP_R_EXTERNAL, it[0].status);
	KUNIT_EXPECT_FALSE(test, it[0].marked);

	/* Gone queues and unknown gpu_ids. */
	it[0].queue_id = 9;
	apply(KFDP_GLUE_PREEMPT, it, 1, &res);
	KUNIT_EXPECT_EQ(test, -ENOENT, it[0].status);
	it[0].gpu_id = 99;
	apply(KFDP_GLUE_PREEMPT, it, 1, &res);
	KUNIT_EXPECT_EQ(test, -EINVAL, it[0].status);
}

static void kfdp_validate_only_changes_nothing(struct kunit *test)
{
	struct fake_node *f = fake_node(test);
	struct fake_proc *procs[1] = { fake_proc(test, f, 1, 3) };
	struct kfdp_glue_result res;
	struct kfdp_glue_item *it;
	u32 n;

	it = items_for(test, procs, 1, false, &n);
	kfdp_apply(KFDP_GLUE_PREEMPT, true, it, n, &res);
	KUNIT_EXPECT_EQ(test, 0, it[0].status);
	KUNIT_EXPECT_EQ(test, 0, res.runlist_updates);
	KUNIT_EXPECT_EQ(test, 3, f->dqm.active_queue_count);
	KUNIT_EXPECT_FALSE(test, procs[0]->q[0]->properties.is_suspended);
}

static void kfdp_exited_target_esrch(struct kunit *test)
{
	struct fake_node *f = fake_node(test);
	struct fake_proc *procs[1] = { fake_proc(test, f, 1, 1) };
	struct kfdp_glue_result res;
	struct kfdp_glue_item *it;
	u32 n;

	it = items_for(test, procs, 1, false, &n);
	KUNIT_EXPECT_TRUE(test, kfdp_target_alive(&procs[0]->t));
	WRITE_ONCE(procs[0]->p->mm, NULL);	/* as kfd's teardown does */
	KUNIT_EXPECT_FALSE(test, kfdp_target_alive(&procs[0]->t));
	apply(KFDP_GLUE_PREEMPT, it, n, &res);
	KUNIT_EXPECT_EQ(test, -ESRCH, it[0].status);
	procs[0]->p->mm = procs[0]->t.mm;	/* for fake_proc_exit */
}

static struct kunit_case kfdp_queues_cases[] = {
	KUNIT_CASE(kfdp_new_queue_ignored),
	KUNIT_CASE(kfdp_reset_never_reactivated),
	KUNIT_CASE(kfdp_already_external_and_others),
	KUNIT_CASE(kfdp_validate_only_changes_nothing),
	KUNIT_CASE(kfdp_exited_target_esrch),
	{}
};

static unsigned int kfdp_saved_interval;

/* Every fake node has gpu_id 0: no rate limit, and no state from earlier cases. */
static int kfdp_queues_init(struct kunit *test)
{
	kfdp_saved_interval = kfdp_min_preempt_interval_us;
	kfdp_min_preempt_interval_us = 0;
	kfdp_nodes_forget();
	return 0;
}

static void kfdp_queues_exit(struct kunit *test)
{
	kfdp_nodes_forget();
	kfdp_min_preempt_interval_us = kfdp_saved_interval;
}

static struct kunit_suite kfdp_queues_suite = {
	.name = "kfdp_queues",
	.init = kfdp_queues_init,
	.exit = kfdp_queues_exit,
	.test_cases = kfdp_queues_cases,
};

kunit_test_suite(kfdp_queues_suite);
