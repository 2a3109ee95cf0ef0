// SPDX-License-Identifier: GPL-2.0
/*
 * Not compiled alone: the Kbuild's wrapper of amdkfd's
 * kfd_device_queue_manager.c includes this file after it, so that a test
 * can run the KFD debugger's suspend of a queue (suspend_queues() minus its
 * queue list in user memory, which a KUnit thread has not got) through
 * amdkfd's own static suspend_single_queue() and execute_queues_cpsch().
 */

#include "emu.h"

int emu_debugger_suspend(struct kfd_process_device *pdd, struct queue *q)
{
	struct device_queue_manager *dqm = pdd->dev->dqm;
	int r;

	dqm_lock(dqm);
	r = suspend_single_queue(dqm, pdd, q);
	if (!r)
		r = execute_queues_cpsch(dqm, KFD_UNMAP_QUEUES_FILTER_DYNAMIC_QUEUES, 0,
					 USE_DEFAULT_GRACE_PERIOD);
	dqm_unlock(dqm);
	return r;
}
