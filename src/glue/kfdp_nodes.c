// SPDX-License-Identifier: GPL-2.0
/*
 * What the glue remembers about each KFD node between calls, keyed by the
 * node's gpu_id (kfd_node.id, unique in the system):
 *
 * - when a PREEMPT or FREEZE last took its queues off the hardware, so that
 *   triggers are at least min_preempt_interval_us apart: every trigger
 *   context-saves every tenant of the node, and this is the bound on what a
 *   buggy or hostile CAP_SYS_NICE daemon can make a node do
 *   (Documentation/security.rst);
 * - whether a PREEMPT left marks that no trigger has applied yet
 *   (DEFERRED), so that the next PREEMPT of them triggers instead of
 *   answering ALREADY while the queues still run (B4).
 *
 * Each node is one XArray value entry: (time in microseconds << 1) |
 * deferred bit. Nothing is allocated per node beyond the array's own nodes.
 */

#include <linux/ktime.h>
#include <linux/moduleparam.h>
#include <linux/xarray.h>

#include "kfdp_glue_priv.h"

unsigned int kfdp_min_preempt_interval_us = 1000;
module_param_named(min_preempt_interval_us, kfdp_min_preempt_interval_us, uint, 0644);
MODULE_PARM_DESC(min_preempt_interval_us,
		 "Minimum time between two PREEMPT or FREEZE triggers of one KFD node, in microseconds; sooner ones fail with EAGAIN (0: no limit)");

static DEFINE_XARRAY(kfdp_nodes);

#define KFDP_NODE_DEFERRED 1ul

static unsigned long kfdp_now_us(void)
{
	return (unsigned long)(ktime_get_ns() / NSEC_PER_USEC);
}

static unsigned long kfdp_node_get(u32 gpu_id)
{
	void *e = xa_load(&kfdp_nodes, gpu_id);

	return xa_is_value(e) ? xa_to_value(e) : 0;
}

/* Called with the array locked. */
static void kfdp_node_put(u32 gpu_id, unsigned long v)
{
	/* GFP_ATOMIC under the lock; on failure the node is simply not limited. */
	__xa_store(&kfdp_nodes, gpu_id, xa_mk_value(v), GFP_ATOMIC);
}

/*
 * Claims the node for a PREEMPT or FREEZE trigger now: -EAGAIN if the last
 * claim is less than min_preempt_interval_us old. Returns the previous
 * stamp in @prev for kfdp_node_unclaim().
 */
int kfdp_node_claim(u32 gpu_id, unsigned long *prev)
{
	unsigned long interval = READ_ONCE(kfdp_min_preempt_interval_us);
	unsigned long now = kfdp_now_us(), v, last;
	int r = 0;

	xa_lock(&kfdp_nodes);
	v = kfdp_node_get(gpu_id);
	last = v >> 1;
	*prev = v;
	if (interval && last && now - last < interval)
		r = -EAGAIN;
	else
		kfdp_node_put(gpu_id, (now << 1) | (v & KFDP_NODE_DEFERRED));
	xa_unlock(&kfdp_nodes);
	return r;
}

/* The claimed call triggered nothing: give the node its previous stamp back. */
void kfdp_node_unclaim(u32 gpu_id, unsigned long prev)
{
	unsigned long v;

	xa_lock(&kfdp_nodes);
	v = kfdp_node_get(gpu_id);
	kfdp_node_put(gpu_id, (prev & ~KFDP_NODE_DEFERRED) | (v & KFDP_NODE_DEFERRED));
	xa_unlock(&kfdp_nodes);
}

/* Marks of this node wait for a trigger (@deferred), or none do. */
void kfdp_node_set_deferred(u32 gpu_id, bool deferred)
{
	unsigned long v;

	xa_lock(&kfdp_nodes);
	v = kfdp_node_get(gpu_id) & ~KFDP_NODE_DEFERRED;
	kfdp_node_put(gpu_id, v | (deferred ? KFDP_NODE_DEFERRED : 0));
	xa_unlock(&kfdp_nodes);
}

bool kfdp_node_deferred(u32 gpu_id)
{
	return kfdp_node_get(gpu_id) & KFDP_NODE_DEFERRED;
}

/* For KFDP_IOC_INFO. */
unsigned int kfdp_min_preempt_interval(void)
{
	return READ_ONCE(kfdp_min_preempt_interval_us);
}

/* Module exit (and each KUnit case): forget every node. */
void kfdp_nodes_forget(void)
{
	xa_destroy(&kfdp_nodes);
}
