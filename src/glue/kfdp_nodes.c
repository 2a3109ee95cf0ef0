// SPDX-License-Identifier: GPL-2.0
/*
 * What the glue remembers about each KFD node between calls, keyed by the
 * node's gpu_id (kfd_node.id, unique in the system):
 *
 * - when a PREEMPT or FREEZE last took queues off it, and when a RESUME or
 *   THAW last put queues back, so that triggers of each kind are at least
 *   min_preempt_interval_us apart: every trigger context-saves every tenant
 *   of the node, and this is the bound on what a buggy or hostile
 *   CAP_SYS_NICE daemon can make a node do (Documentation/security.rst).
 *   A PREEMPT or FREEZE too soon fails with EAGAIN; a RESUME or THAW too
 *   soon waits for its turn, so that the limit never holds anything;
 * - whether a PREEMPT left marks that no trigger has applied yet
 *   (DEFERRED), so that the next PREEMPT of them triggers instead of
 *   answering ALREADY while the queues still run (deferred trigger:
 *   Documentation/design.rst, "Named hazards").
 */

#include <linux/delay.h>
#include <linux/ktime.h>
#include <linux/moduleparam.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/xarray.h>

#include "kfdp_glue_priv.h"

unsigned int kfdp_min_preempt_interval_us = 1000;
module_param_named(min_preempt_interval_us, kfdp_min_preempt_interval_us, uint, 0644);
MODULE_PARM_DESC(min_preempt_interval_us,
		 "Minimum time between two PREEMPT/FREEZE (or two RESUME/THAW) triggers of one KFD node, in microseconds, at most 1000000; sooner PREEMPTs and FREEZEs fail with EAGAIN, sooner RESUMEs and THAWs wait (0: no limit)");

/* A RESUME never waits longer than this, whatever the parameter says. */
#define KFDP_MAX_INTERVAL_US USEC_PER_SEC

/*
 * struct kfdp_node - the glue's state of one KFD node.
 * @lock:        protects the other fields.
 * @off_us:      when a PREEMPT or FREEZE last claimed the node (0: never).
 * @on_us:       when a RESUME or THAW last did.
 * @deferred:    a PREEMPT's trigger was DEFERRED since the last trigger.
 * @deferrals:   counts deferrals, so that a trigger that started before one
 *               does not clear @deferred.
 */
struct kfdp_node {
	spinlock_t lock;
	u64 off_us;
	u64 on_us;
	bool deferred;
	u64 deferrals;
};

static DEFINE_XARRAY(kfdp_nodes);

static u64 kfdp_now_us(void)
{
	/* Never 0, which means "never". */
	return ktime_get_ns() / NSEC_PER_USEC + 1;
}

/* The interval in force, in microseconds. */
static u64 kfdp_interval_us(void)
{
	return min_t(u64, READ_ONCE(kfdp_min_preempt_interval_us), KFDP_MAX_INTERVAL_US);
}

unsigned int kfdp_min_preempt_interval(void)
{
	return kfdp_interval_us();
}

/* The node's state, or NULL if kfdp_node_prepare() could not create it. */
static struct kfdp_node *kfdp_node(u32 gpu_id)
{
	return xa_load(&kfdp_nodes, gpu_id);
}

/*
 * Creates the node's state if needed. It allocates, so call it before
 * taking dqm_lock; if it fails, the node is neither limited nor remembered.
 */
void kfdp_node_prepare(u32 gpu_id)
{
	struct kfdp_node *n = xa_load(&kfdp_nodes, gpu_id), *old;

	if (n)
		return;
	n = kzalloc_obj(*n);
	if (!n)
		return;
	spin_lock_init(&n->lock);
	old = xa_cmpxchg(&kfdp_nodes, gpu_id, NULL, n, GFP_KERNEL);
	if (old)
		kfree(n);	/* another caller's, or an error: either way not ours */
}

/*
 * A PREEMPT or FREEZE is about to take queues off the node: 0, and the
 * node is claimed now; or -EAGAIN, and nothing changed. With @check_only
 * (VALIDATE_ONLY, the ALL_OR_NOTHING check) nothing is claimed. No
 * allocation: may be called under dqm_lock, after kfdp_node_prepare().
 */
int kfdp_node_claim_off(u32 gpu_id, bool check_only)
{
	struct kfdp_node *n = kfdp_node(gpu_id);
	u64 now, interval = kfdp_interval_us();
	int r = 0;

	if (!n)
		return 0;
	spin_lock(&n->lock);
	/* Read under the lock: claims are then in time order, never backwards. */
	now = kfdp_now_us();
	if (interval && n->off_us && now - n->off_us < interval)
		r = -EAGAIN;
	else if (!check_only)
		n->off_us = now;
	spin_unlock(&n->lock);
	return r;
}

/*
 * A RESUME or THAW is about to put queues back on the node: wait until its
 * turn, then claim it. Called with no lock held, after kfdp_node_prepare();
 * sleeps at most the interval (at most a second).
 */
void kfdp_node_claim_on(u32 gpu_id)
{
	struct kfdp_node *n = kfdp_node(gpu_id);
	u64 now, wait, interval = kfdp_interval_us();

	if (!n)
		return;
	for (;;) {
		spin_lock(&n->lock);
		now = kfdp_now_us();
		wait = interval && n->on_us && now - n->on_us < interval ?
		       interval - (now - n->on_us) : 0;
		if (!wait)
			n->on_us = now;
		spin_unlock(&n->lock);
		if (!wait)
			return;
		fsleep(wait);
	}
}

/* A PREEMPT's trigger was DEFERRED: its marks may still be mapped. */
void kfdp_node_defer(u32 gpu_id)
{
	struct kfdp_node *n = kfdp_node(gpu_id);

	if (!n)
		return;
	spin_lock(&n->lock);
	n->deferred = true;
	n->deferrals++;
	spin_unlock(&n->lock);
}

/*
 * Whether marks of the node await a trigger; @seq receives what
 * kfdp_node_triggered() needs to know that no deferral came since.
 */
bool kfdp_node_deferred(u32 gpu_id, u64 *seq)
{
	struct kfdp_node *n = kfdp_node(gpu_id);
	bool deferred;

	*seq = 0;
	if (!n)
		return false;
	spin_lock(&n->lock);
	deferred = n->deferred;
	*seq = n->deferrals;
	spin_unlock(&n->lock);
	return deferred;
}

/*
 * A trigger succeeded: the runlist it built honours every mark made before
 * @seq was read, so nothing deferred before then awaits a trigger any more.
 */
void kfdp_node_triggered(u32 gpu_id, u64 seq)
{
	struct kfdp_node *n = kfdp_node(gpu_id);

	if (!n)
		return;
	spin_lock(&n->lock);
	if (n->deferrals == seq)
		n->deferred = false;
	spin_unlock(&n->lock);
}

/* Module exit (and each KUnit case): forget every node. */
void kfdp_nodes_forget(void)
{
	struct kfdp_node *n;
	unsigned long id;

	xa_for_each(&kfdp_nodes, id, n) {
		xa_erase(&kfdp_nodes, id);
		kfree(n);
	}
	xa_destroy(&kfdp_nodes);
}
