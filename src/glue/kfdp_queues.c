// SPDX-License-Identifier: GPL-2.0
/*
 * Preempting and resuming queues through amdkfd's device queue manager
 * (Documentation/design.rst, "The mechanism, and why").
 *
 * HWS (MI300): under dqm_lock, mark every queue of the batch on a node as
 * amdkfd's debugger does (is_suspended, is_active, the dqm counters), then
 * call dqm->ops.update_queue() once on one of them: that is one unmap and
 * one new runlist for the node, whatever the number of queues and
 * processes. MES (GC 11/12) has no runlist: the same marks, then one
 * update_queue() per queue, which becomes remove_queue_mes/add_queue_mes.
 * Freeze is amdkfd's own nesting eviction (evict/restore_process_queues).
 */

#include <linux/ktime.h>
#include <linux/sched/mm.h>

#include <linux/kfd_preempt.h>

#include "kfdp_glue_priv.h"

/* Per-item progress, in kfdp_glue_item.state (private to this file). */
#define KFDP_ITEM_RESOLVED	(1u << 0) /* pdd found, mm_users held */
#define KFDP_ITEM_GROUPED	(1u << 1) /* its node has been handled */
#define KFDP_ITEM_NEEDS_TRIGGER	(1u << 2) /* HWS: is_active changed */
#define KFDP_ITEM_NEEDS_CALL	(1u << 3) /* MES: one update_queue of its own */
#define KFDP_ITEM_WOULD_CHANGE	(1u << 4) /* dry run: would need a trigger */
#define KFDP_ITEM_MARKED_NOW	(1u << 5) /* this call set is_suspended */

/*
 * Copies of amdkfd's static increment/decrement_queue_count()
 * (amdkfd/kfd_device_queue_manager.c). active_queue_count must equal the
 * number of is_active queues: the runlist IB is sized from it. Re-read the
 * originals on every rebase (Documentation/design.rst, "Rebasing").
 */
static void kfdp_increment_queue_count(struct device_queue_manager *dqm,
				       struct qcm_process_device *qpd,
				       struct queue *q)
{
	dqm->active_queue_count++;
	if (q->properties.type == KFD_QUEUE_TYPE_COMPUTE)
		dqm->active_cp_queue_count++;
	if (q->properties.is_gws) {
		dqm->gws_queue_count++;
		qpd->mapped_gws_queue = true;
	}
}

static void kfdp_decrement_queue_count(struct device_queue_manager *dqm,
				       struct qcm_process_device *qpd,
				       struct queue *q)
{
	dqm->active_queue_count--;
	if (q->properties.type == KFD_QUEUE_TYPE_COMPUTE)
		dqm->active_cp_queue_count--;
	if (q->properties.is_gws) {
		dqm->gws_queue_count--;
		qpd->mapped_gws_queue = false;
	}
}

static bool kfdp_node_uses_mes(const struct device_queue_manager *dqm)
{
	return dqm->dev->kfd->shared_resources.enable_mes;
}

/* Queue ids are reused, so a queue is always looked up again under lock. */
static struct queue *kfdp_find_queue(struct kfd_process_device *pdd, u32 id)
{
	struct queue *q;

	list_for_each_entry(q, &pdd->qpd.queues_list, list)
		if (q->properties.queue_id == id)
			return q;
	return NULL;
}

static struct device_queue_manager *kfdp_item_dqm(struct kfdp_glue_item *it)
{
	return ((struct kfd_process_device *)it->pdd)->dev->dqm;
}

/*
 * Called with dqm_lock held. @pending: a PREEMPT of this node was DEFERRED
 * and no trigger has run since, so marks of ours may still be mapped.
 */
static void kfdp_mark(struct device_queue_manager *dqm,
		      struct kfdp_glue_item *it, bool dry_run, bool pending)
{
	struct kfd_process_device *pdd = it->pdd;
	bool owned = it->flags & KFDP_GLUE_ITEM_OWNED;
	struct queue *q = kfdp_find_queue(pdd, it->queue_id);

	it->marked = false;
	if (!q) {
		it->status = -ENOENT;
		return;
	}
	if (q->properties.type != KFD_QUEUE_TYPE_COMPUTE) {
		it->status = -EOPNOTSUPP;
		return;
	}
	if (q->properties.is_suspended) {
		/* Ours: nothing to do. Anyone else's: the debugger, or another owner. */
		it->status = owned ? KFDP_R_ALREADY : -EBUSY;
		it->marked = owned;
		if (!owned || dry_run)
			return;
		/*
		 * Deferred trigger: ours, but an earlier trigger was DEFERRED.
		 * On MES a queue still active was never removed; on HWS the
		 * node's runlist may still hold it. Trigger again.
		 */
		if (kfdp_node_uses_mes(dqm)) {
			if (q->properties.is_active)
				it->state |= KFDP_ITEM_NEEDS_CALL;
		} else if (pending) {
			it->state |= KFDP_ITEM_NEEDS_TRIGGER;
		}
		return;
	}
	if (q->properties.is_being_destroyed || pdd->process->debug_trap_enabled) {
		it->status = -EBUSY;
		return;
	}
	if (q->properties.is_reset || pdd->has_reset_queue) {
		it->status = -EIO;
		return;
	}
	/* Without CWSR, preemption drains the queue instead of saving it. */
	if (!dqm->dev->kfd->cwsr_enabled ||
	    !q->properties.ctx_save_restore_area_address) {
		it->status = -EOPNOTSUPP;
		return;
	}
	it->status = 0;
	if (dry_run) {
		if (q->properties.is_active)
			it->state |= KFDP_ITEM_WOULD_CHANGE;
		return;
	}

	/* As suspend_single_queue() does, minus the debugger's bookkeeping. */
	q->properties.is_suspended = true;
	it->marked = true;
	it->state |= KFDP_ITEM_MARKED_NOW;
	if (!q->properties.is_active)
		return;
	if (kfdp_node_uses_mes(dqm)) {
		/* update_queue() removes it from MES and fixes the counters. */
		it->state |= KFDP_ITEM_NEEDS_CALL;
		return;
	}
	q->properties.is_active = false;
	kfdp_decrement_queue_count(dqm, &pdd->qpd, q);
	it->state |= KFDP_ITEM_NEEDS_TRIGGER;
}

/* Called with dqm_lock held. */
static void kfdp_unmark(struct device_queue_manager *dqm,
			struct kfdp_glue_item *it, bool dry_run)
{
	struct kfd_process_device *pdd = it->pdd;
	bool owned = it->flags & KFDP_GLUE_ITEM_OWNED;
	struct queue *q = kfdp_find_queue(pdd, it->queue_id);

	it->marked = false;
	if (!q) {
		it->status = -ENOENT;
		return;
	}
	if (!owned) {
		/* Not ours: report, never touch. */
		it->status = q->properties.is_suspended ? -EBUSY : KFDP_R_ALREADY;
		return;
	}
	if (!q->properties.is_suspended) {
		/* Resumed behind our back: a debugger attached and detached. */
		it->status = KFDP_R_EXTERNAL;
		return;
	}
	if (pdd->process->debug_trap_enabled) {
		/* The debugger now owns the suspension and resumes at detach. */
		it->status = -EBUSY;
		return;
	}
	it->status = 0;
	if (dry_run) {
		it->marked = true;
		return;
	}

	q->properties.is_suspended = false;
	/* A destroy waiting for a suspended queue may proceed (wait_on_destroy_queue). */
	wake_up_all(&dqm->destroy_wait);

	if (q->properties.is_reset || pdd->has_reset_queue) {
		/* Never reactivate what amdkfd reset; QUEUE_IS_ACTIVE ignores is_reset. */
		it->status = -EIO;
		return;
	}
	if (!QUEUE_IS_ACTIVE(q->properties) || !q->mqd) {
		/*
		 * Evicted, or its MQD unpinned for S4 (7.3's dqm_evict_mqd_bo sets
		 * q->mqd to NULL with needs_mqd_repin, under dqm_lock; 7.2 never
		 * unpins): amdkfd's own restore activates it.
		 */
		if (q->properties.is_evicted || !q->mqd)
			it->status = KFDP_R_DEFERRED;
		return;
	}
	if (kfdp_node_uses_mes(dqm)) {
		it->state |= KFDP_ITEM_NEEDS_CALL;
		return;
	}
	q->properties.is_active = true;
	kfdp_increment_queue_count(dqm, &pdd->qpd, q);
	it->state |= KFDP_ITEM_NEEDS_TRIGGER;
}

/*
 * Can @q be update_queue()'s trigger? Called with dqm_lock held:
 * update_mqd() dereferences q->mqd, and has_reset_queue skips the map.
 */
static bool kfdp_can_trigger(struct kfd_process_device *pdd, struct queue *q)
{
	return q && q->mqd && !pdd->has_reset_queue &&
	       !q->properties.is_being_destroyed;
}

/*
 * The trigger itself, timed and counted; the caller holds @q's process's
 * mutex, which keeps the queue from being destroyed under us.
 */
static int kfdp_timed_update(struct device_queue_manager *dqm, struct queue *q,
			     struct kfdp_glue_result *res)
{
	u64 t0 = ktime_get_ns();
	int r = dqm->ops.update_queue(dqm, q, NULL);

	res->elapsed_ns += ktime_get_ns() - t0;
	res->runlist_updates++;
	return r;
}

/*
 * Calls update_queue() on @it's queue with its process's mutex held, which
 * keeps the queue from being destroyed under us (amdkfd's pqm holds it).
 * Returns -ENOENT if @it cannot serve (now), else update_queue()'s result.
 */
static int kfdp_update_one(struct device_queue_manager *dqm,
			   struct kfdp_glue_item *it, bool block,
			   struct kfdp_glue_result *res)
{
	struct kfd_process_device *pdd = it->pdd;
	struct kfd_process *p = pdd->process;
	struct queue *q;
	int r;

	if (block)
		mutex_lock(&p->mutex);
	else if (!mutex_trylock(&p->mutex))
		return -ENOENT;

	dqm_lock(dqm);
	q = kfdp_find_queue(pdd, it->queue_id);
	if (!kfdp_can_trigger(pdd, q))
		q = NULL;
	dqm_unlock(dqm);
	if (!q) {
		mutex_unlock(&p->mutex);
		return -ENOENT;
	}

	r = kfdp_timed_update(dqm, q, res);
	mutex_unlock(&p->mutex);
	return r;
}

/*
 * Reset during our unmap (Documentation/design.rst, "Named hazards"):
 * update_queue() returned -EACCES after its unmap, because a queue of the
 * trigger's process was reset during that unmap (unmap_queues_cpsch,
 * reset_hung_queues), and amdkfd skipped the map: the node has no runlist. Map
 * it again through a queue of any process of the node that has no reset queue,
 * not only those of the batch. Such a process is not pinned by us: under
 * dqm_lock, which proves it registered, mm_users keeps kfd's teardown (which
 * runs without p->mutex) from starting and a trylocked p->mutex keeps its
 * queues from being destroyed; trylock, because kfd's order is p->mutex, then
 * dqm_lock. Returns -ENOENT if the node has no such process: then amdkfd itself
 * can map nothing either until a process is restored or created; -EACCES if
 * that trigger's own unmap reset a queue (its process is then no longer
 * healthy, and the caller may try again).
 */
static int kfdp_trigger_healthy(struct device_queue_manager *dqm,
				struct kfdp_glue_result *res)
{
	struct device_process_node *cur;
	struct queue *trigger = NULL;
	struct kfd_process *p = NULL;
	struct mm_struct *mm = NULL;
	int r;

	dqm_lock(dqm);
	list_for_each_entry(cur, &dqm->queues, list) {
		struct kfd_process_device *pdd = qpd_to_pdd(cur->qpd);
		struct queue *q, *found = NULL;

		list_for_each_entry(q, &cur->qpd->queues_list, list) {
			if (kfdp_can_trigger(pdd, q)) {
				found = q;
				break;
			}
		}
		if (!found)
			continue;
		p = pdd->process;
		/*
		 * A secondary context is torn down at its fd's close, without
		 * mm_users or p->mutex (kfd_release): only primary ones.
		 */
		if (p->context_id != KFD_CONTEXT_ID_PRIMARY)
			continue;
		mm = READ_ONCE(p->mm);
		if (!mm || !mmget_not_zero(mm))
			continue;
		if (!mutex_trylock(&p->mutex)) {
			mmput_async(mm);
			continue;
		}
		trigger = found;
		break;
	}
	dqm_unlock(dqm);
	if (!trigger)
		return -ENOENT;

	r = kfdp_timed_update(dqm, trigger, res);
	mutex_unlock(&p->mutex);
	mmput_async(mm);
	return r;
}

/*
 * HWS: one update_queue() for the whole node. Any queue of the node serves
 * as the trigger; it is taken from the batch, trylocking first so that a
 * tenant busy in its own ioctls does not delay the batch.
 */
static int kfdp_trigger_node(struct device_queue_manager *dqm,
			     struct kfdp_glue_item *items, u32 n,
			     struct kfdp_glue_result *res)
{
	int r = -ENOENT;
	int pass, tries;
	u32 i;

	for (pass = 0; pass < 2 && r == -ENOENT; pass++) {
		for (i = 0; i < n; i++) {
			struct kfdp_glue_item *it = &items[i];

			if (!(it->state & KFDP_ITEM_RESOLVED) || it->status < 0 ||
			    kfdp_item_dqm(it) != dqm)
				continue;
			r = kfdp_update_one(dqm, it, pass == 1, res);
			if (r != -ENOENT)
				break;
		}
	}
	/*
	 * The unmap happened, the map did not (-EACCES): never leave the node
	 * so. No queue of the batch could serve (-ENOENT: destroyed, S4): any
	 * of the node's may. Each -EACCES marks one more process as reset, so
	 * a few tries reach a healthy one or run out of them.
	 */
	for (tries = 0; (r == -EACCES || r == -ENOENT) && tries < 4; tries++) {
		int again = kfdp_trigger_healthy(dqm, res);

		if (again == -ENOENT)
			break;	/* none: a -EACCES stays one (EIO below) */
		r = again;
	}
	if (r == -EACCES)
		r = -EIO;

	for (i = 0; i < n; i++) {
		struct kfdp_glue_item *it = &items[i];

		if (!(it->state & KFDP_ITEM_NEEDS_TRIGGER) || kfdp_item_dqm(it) != dqm)
			continue;
		/* Marks are kept: the next runlist anyone builds honours them. */
		if (r == -ENOENT)
			it->status = KFDP_R_DEFERRED;
		else if (r)
			it->status = -EIO;
	}
	return r;
}

/* MES: one call per queue whose is_active must change. */
static void kfdp_call_each(struct device_queue_manager *dqm,
			   struct kfdp_glue_item *items, u32 n,
			   struct kfdp_glue_result *res)
{
	u32 i;
	int r;

	for (i = 0; i < n; i++) {
		struct kfdp_glue_item *it = &items[i];

		if (!(it->state & KFDP_ITEM_NEEDS_CALL) || kfdp_item_dqm(it) != dqm)
			continue;
		r = kfdp_update_one(dqm, it, true, res);
		if (r == -ENOENT)
			it->status = KFDP_R_DEFERRED;
		else if (r)
			it->status = -EIO;
	}
}

/*
 * The rate limit refused this node's PREEMPT (kfdp_nodes.c): take back what
 * this call did to it, under the same dqm_lock, so that nothing changed.
 * Marks that needed no hardware (ALREADY, evicted queues) stand.
 */
static void kfdp_refuse_node(struct device_queue_manager *dqm,
			     struct kfdp_glue_item *items, u32 n, int status)
{
	u32 i;

	for (i = 0; i < n; i++) {
		struct kfdp_glue_item *it = &items[i];
		bool owned = it->flags & KFDP_GLUE_ITEM_OWNED;
		struct kfd_process_device *pdd = it->pdd;
		struct queue *q;

		if (!(it->state & (KFDP_ITEM_NEEDS_TRIGGER | KFDP_ITEM_NEEDS_CALL |
				   KFDP_ITEM_WOULD_CHANGE)) || kfdp_item_dqm(it) != dqm)
			continue;
		q = kfdp_find_queue(pdd, it->queue_id);
		/*
		 * Undo exactly what kfdp_mark() did in this call; a mark held
		 * from before (ALREADY with a pending trigger) stays. A held
		 * mark whose queue was resumed behind our back was marked anew
		 * and is undone like a new one, but stays ours (@owned).
		 */
		if (q && (it->state & KFDP_ITEM_MARKED_NOW)) {
			q->properties.is_suspended = false;
			if (it->state & KFDP_ITEM_NEEDS_TRIGGER) {
				q->properties.is_active = true;
				kfdp_increment_queue_count(dqm, &pdd->qpd, q);
			}
			it->marked = owned;
		}
		it->state &= ~(KFDP_ITEM_NEEDS_TRIGGER | KFDP_ITEM_NEEDS_CALL |
			       KFDP_ITEM_WOULD_CHANGE | KFDP_ITEM_MARKED_NOW);
		it->status = status;
	}
}

static void kfdp_apply_node(u32 op, bool dry_run,
			    struct device_queue_manager *dqm,
			    struct kfdp_glue_item *items, u32 n,
			    struct kfdp_glue_result *res)
{
	bool need_trigger = false, need_call = false, would = false;
	u32 node_id = dqm->dev->id;
	bool pending = false;
	int refuse = 0;
	u64 seq;
	u32 i;

	kfdp_node_prepare(node_id);	/* allocates: before dqm_lock */
	if (dqm->sched_policy == KFD_SCHED_POLICY_NO_HWS)
		refuse = -EOPNOTSUPP;	/* NO_HWS cannot be driven cross-process */
	else if (op == KFDP_GLUE_PREEMPT)
		pending = kfdp_node_deferred(node_id, &seq);

	dqm_lock(dqm);
	/* A hung scheduler is about to be reset: take nothing more off it. */
	if (!refuse && op == KFDP_GLUE_PREEMPT && dqm->is_hws_hang)
		refuse = -EIO;
	for (i = 0; i < n; i++) {
		struct kfdp_glue_item *it = &items[i];

		if (!(it->state & KFDP_ITEM_RESOLVED) ||
		    (it->state & KFDP_ITEM_GROUPED) || kfdp_item_dqm(it) != dqm)
			continue;
		it->state |= KFDP_ITEM_GROUPED;
		if (refuse) {
			it->status = refuse;
			it->marked = !!(it->flags & KFDP_GLUE_ITEM_OWNED);
		} else if (op == KFDP_GLUE_PREEMPT) {
			kfdp_mark(dqm, it, dry_run, pending);
		} else {
			kfdp_unmark(dqm, it, dry_run);
		}
		need_trigger |= !!(it->state & KFDP_ITEM_NEEDS_TRIGGER);
		need_call |= !!(it->state & KFDP_ITEM_NEEDS_CALL);
		would |= !!(it->state & KFDP_ITEM_WOULD_CHANGE);
	}
	/*
	 * Scheduler stopped, halted or hung: start, unhalt or the reset will
	 * build the next runlist from our marks.
	 */
	if (need_trigger &&
	    (!dqm->sched_running || dqm->sched_halt || dqm->is_hws_hang)) {
		for (i = 0; i < n; i++)
			if ((items[i].state & KFDP_ITEM_NEEDS_TRIGGER) &&
			    kfdp_item_dqm(&items[i]) == dqm) {
				items[i].state &= ~KFDP_ITEM_NEEDS_TRIGGER;
				items[i].status = KFDP_R_DEFERRED;
			}
		need_trigger = false;
	}
	/*
	 * The rate limit, once it is known that this PREEMPT would reach the
	 * hardware (not a stopped scheduler); a dry run only looks.
	 */
	if (op == KFDP_GLUE_PREEMPT && (need_trigger || need_call || would) &&
	    kfdp_node_claim_off(node_id, dry_run)) {
		kfdp_refuse_node(dqm, items, n, -EAGAIN);
		need_trigger = need_call = false;
	}
	dqm_unlock(dqm);

	/* A RESUME is never refused: it waits for the node's turn. */
	if (op == KFDP_GLUE_RESUME && (need_trigger || need_call))
		kfdp_node_claim_on(node_id);

	if (need_trigger) {
		int r;

		/* Every mark made so far is in amdkfd's state: the runlist honours it. */
		kfdp_node_deferred(node_id, &seq);
		r = kfdp_trigger_node(dqm, items, n, res);
		if (!r)
			kfdp_node_triggered(node_id, seq);
		else if (r == -ENOENT && op == KFDP_GLUE_PREEMPT)
			kfdp_node_defer(node_id);
	}
	kfdp_call_each(dqm, items, n, res);
}

void kfdp_apply(u32 op, bool dry_run, struct kfdp_glue_item *items, u32 n,
		struct kfdp_glue_result *res)
{
	u32 i;

	res->runlist_updates = 0;
	res->elapsed_ns = 0;

	/* Hold mm_users of every target: kfd's teardown cannot run under us. */
	for (i = 0; i < n; i++) {
		struct kfdp_glue_item *it = &items[i];
		struct kfdp_target *t = it->target;

		it->state = 0;
		it->pdd = NULL;
		it->marked = !!(it->flags & KFDP_GLUE_ITEM_OWNED);
		if (!mmget_not_zero(t->mm)) {
			it->status = -ESRCH;
			it->marked = false;
			continue;
		}
		if (READ_ONCE(t->p->mm) != t->mm) {
			mmput_async(t->mm);
			it->status = -ESRCH;
			it->marked = false;
			continue;
		}
		it->pdd = kfdp_pdd_by_gpu_id(t->p, it->gpu_id);
		if (!it->pdd) {
			mmput_async(t->mm);
			it->status = -EINVAL;
			continue;
		}
		it->state = KFDP_ITEM_RESOLVED;
	}

	for (i = 0; i < n; i++)
		if ((items[i].state & KFDP_ITEM_RESOLVED) &&
		    !(items[i].state & KFDP_ITEM_GROUPED))
			kfdp_apply_node(op, dry_run, kfdp_item_dqm(&items[i]),
					items, n, res);

	/* mmput_async: a last mmput may run kfd's teardown, which takes dqm_lock. */
	for (i = 0; i < n; i++) {
		if (items[i].state & KFDP_ITEM_RESOLVED)
			mmput_async(items[i].target->mm);
		items[i].pdd = NULL;
	}
}

static u32 kfdp_queue_state(struct kfd_process_device *pdd, struct queue *q)
{
	const struct queue_properties *qp = &q->properties;
	u32 s = 0;

	if (qp->is_active)
		s |= KFDP_QS_ACTIVE;
	if (qp->is_suspended)
		s |= KFDP_QS_SUSPENDED;
	if (qp->is_evicted)
		s |= KFDP_QS_EVICTED;
	if (qp->is_being_destroyed)
		s |= KFDP_QS_BEING_DESTROYED;
	if (qp->is_reset || pdd->has_reset_queue)
		s |= KFDP_QS_RESET;
	if (qp->is_gws)
		s |= KFDP_QS_GWS;
	if (qp->exception_status & KFD_EC_MASK(EC_QUEUE_NEW))
		s |= KFDP_QS_NEW;
	if (pdd->process->debug_trap_enabled)
		s |= KFDP_QS_DEBUGGED;
	return s;
}

/*
 * KFD_IOC_QUEUE_TYPE_* values of the uapi, from amdkfd's internal types.
 * kfd_ioctl_create_queue() turns KFD_IOC_QUEUE_TYPE_COMPUTE_AQL into type
 * COMPUTE with format AQL: report what the tenant asked for, since only
 * AQL queues have the read and write dispatch ids activity detection reads.
 */
static u32 kfdp_uapi_queue_type(const struct queue_properties *qp)
{
	switch (qp->type) {
	case KFD_QUEUE_TYPE_COMPUTE:
		return qp->format == KFD_QUEUE_FORMAT_AQL ? KFD_IOC_QUEUE_TYPE_COMPUTE_AQL
							   : KFD_IOC_QUEUE_TYPE_COMPUTE;
	case KFD_QUEUE_TYPE_SDMA:
		return KFD_IOC_QUEUE_TYPE_SDMA;
	case KFD_QUEUE_TYPE_SDMA_XGMI:
		return KFD_IOC_QUEUE_TYPE_SDMA_XGMI;
	default:
		return U32_MAX;
	}
}

static void kfdp_fill_info(struct kfdp_queue_info *qi,
			   struct kfd_process_device *pdd, struct queue *q)
{
	const struct queue_properties *qp = &q->properties;

	memset(qi, 0, sizeof(*qi));
	qi->gpu_id = pdd->user_gpu_id;
	qi->queue_id = qp->queue_id;
	qi->queue_type = kfdp_uapi_queue_type(qp);
	qi->state = kfdp_queue_state(pdd, q);
	qi->ring_base_address = qp->queue_address;
	qi->ring_size = qp->queue_size;
	qi->read_pointer_address = (u64)(uintptr_t)qp->read_ptr;
	qi->write_pointer_address = (u64)(uintptr_t)qp->write_ptr;
	qi->ctx_save_restore_address = qp->ctx_save_restore_area_address;
	qi->ctx_save_restore_size = qp->ctx_save_restore_area_size;
	qi->doorbell_id = q->doorbell_id;
	qi->doorbell_off = qp->doorbell_off;
	qi->priority = qp->priority;
	qi->queue_percent = qp->queue_percent;
	qi->gc_ip_version = KFD_GC_VERSION(pdd->dev);
}

int kfdp_target_query(struct kfdp_target *t, u32 gpu_id,
		      struct kfdp_queue_info *out, u32 cap, u32 *total)
{
	struct kfd_process *p = t->p;
	bool found = false;
	u32 i;

	*total = 0;
	if (!mmget_not_zero(t->mm))
		return -ESRCH;
	if (READ_ONCE(p->mm) != t->mm) {
		mmput_async(t->mm);
		return -ESRCH;
	}
	for (i = 0; i < p->n_pdds; i++) {
		struct kfd_process_device *pdd = p->pdds[i];
		struct device_queue_manager *dqm = pdd->dev->dqm;
		struct queue *q;

		if (gpu_id && pdd->user_gpu_id != gpu_id)
			continue;
		found = true;
		dqm_lock(dqm);
		list_for_each_entry(q, &pdd->qpd.queues_list, list) {
			if (*total < cap)
				kfdp_fill_info(&out[*total], pdd, q);
			(*total)++;
		}
		dqm_unlock(dqm);
	}
	mmput_async(t->mm);
	return found || !gpu_id ? 0 : -EINVAL;
}

int kfdp_freeze(struct kfdp_target *t, u32 gpu_id, bool thaw, u64 *elapsed_ns,
		bool *applied)
{
	struct kfd_process_device *pdd;
	struct device_queue_manager *dqm;
	u64 t0;
	int r;

	*elapsed_ns = 0;
	*applied = false;
	if (!mmget_not_zero(t->mm))
		return -ESRCH;
	if (READ_ONCE(t->p->mm) != t->mm) {
		r = -ESRCH;
		goto out;
	}
	pdd = kfdp_pdd_by_gpu_id(t->p, gpu_id);
	if (!pdd) {
		r = -EINVAL;
		goto out;
	}
	dqm = pdd->dev->dqm;
	if (dqm->sched_policy == KFD_SCHED_POLICY_NO_HWS) {
		r = -EOPNOTSUPP;
		goto out;
	}
	/*
	 * The rate limit, for what reaches the hardware: the first eviction
	 * unmaps, the last restore maps (nested ones only count).
	 */
	kfdp_node_prepare(pdd->dev->id);
	if (!thaw && !READ_ONCE(pdd->qpd.evicted)) {
		r = kfdp_node_claim_off(pdd->dev->id, false);
		if (r)
			goto out;
	} else if (thaw && READ_ONCE(pdd->qpd.evicted) == 1) {
		kfdp_node_claim_on(pdd->dev->id);
	}
	/* qpd->evicted nests with amdkfd's own evictions; we keep it paired. */
	t0 = ktime_get_ns();
	if (thaw) {
		/*
		 * Failed thaw restore: one restore consumes one freeze, whatever it
		 * returns.
		 * restore_process_queues_cpsch() drops qpd->evicted before it
		 * reports a failed runlist, so a retry would consume an
		 * eviction amdkfd holds (GPU reset, TTM).
		 */
		r = dqm->ops.restore_process_queues(dqm, &pdd->qpd);
		*applied = true;
		/*
		 * Only a failed MES add (or an S4 repin, which kfd_preempt keeps
		 * away: src/engine/pm.rs) leaves the count up; a retry would
		 * double-count the queues already added. Say so. On HWS a
		 * failed restore has dropped the count: one seen now is an
		 * eviction amdkfd took since (a reset, TTM), not ours.
		 */
		if (r && kfdp_node_uses_mes(dqm) && READ_ONCE(pdd->qpd.evicted))
			pr_warn_ratelimited("kfd_preempt: THAW of pid %d failed (%d) and amdkfd still counts it evicted (a failed MES add): its queues not re-added stay off for the life of the process\n",
					    t->tgid, r);
	} else {
		/* Evict counts the eviction even if the unmap then fails. */
		r = dqm->ops.evict_process_queues(dqm, &pdd->qpd);
		*applied = true;
	}
	*elapsed_ns = ktime_get_ns() - t0;
out:
	mmput_async(t->mm);
	return r;
}
