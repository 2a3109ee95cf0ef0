// SPDX-License-Identifier: GPL-2.0
/*
 * Not compiled alone: the Kbuild's wrapper of amdkfd's
 * kfd_device_queue_manager.c includes this file after it, so that a test
 * can run the KFD debugger's suspend of a queue (suspend_queues() minus its
 * queue list in user memory, which a KUnit thread has not got) through
 * amdkfd's own static suspend_single_queue() and execute_queues_cpsch(),
 * and give up a queue the firmware lost through set_queue_as_reset().
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

/*
 * A queue the firmware does not run although amdkfd counts it active (MES
 * refused its add): what amdkfd's reset paths do with a lost queue, under
 * dqm_lock. The GPU reset amdkfd asks for is not emulated on MES.
 */
void emu_queue_set_reset(struct kfd_process_device *pdd, struct queue *q)
{
	struct device_queue_manager *dqm = pdd->dev->dqm;

	dqm_lock(dqm);
	set_queue_as_reset(dqm, q, &pdd->qpd);
	dqm_unlock(dqm);
}
