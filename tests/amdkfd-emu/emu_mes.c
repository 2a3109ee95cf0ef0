// SPDX-License-Identifier: GPL-2.0
/*
 * The emulated MES of a GC 11 node: amdkfd adds and removes each user queue
 * through adev->mes.funcs (add_queue_mes, remove_queue_mes), one call per
 * queue. This keeps what MES firmware would: the queues it schedules, by
 * doorbell, and counts the calls. It runs under amdkfd's MES lock. It
 * answers at once; the one fault is an add it refuses (fail_next_add_doorbell).
 */

#include "emu.h"
#include "amdgpu_mes.h"

static struct emu_hws *emu_mes_of(struct amdgpu_mes *mes)
{
	return &emu_node_of_adev(mes->adev)->hws;
}

static int emu_mes_add_hw_queue(struct amdgpu_mes *mes, struct mes_add_queue_input *in)
{
	struct emu_hws *h = emu_mes_of(mes);
	struct emu_mapped *m;
	unsigned int i;

	h->mes_adds++;
	for (i = 0; i < h->n_mapped; i++)
		if (h->mapped[i].doorbell_off == in->doorbell_offset)
			h->errors++;	/* added twice */
	/*
	 * MES did not take the queue: mes_v11_0 reports a missing or failed
	 * answer as -ETIMEDOUT, and the queue is not scheduled. amdkfd's
	 * add_queue_mes() then asks for a GPU reset.
	 */
	if (h->fail_next_add_doorbell && h->fail_next_add_doorbell == in->doorbell_offset) {
		h->fail_next_add_doorbell = 0;
		h->mes_add_failures++;
		return -ETIMEDOUT;
	}
	if (h->n_mapped >= EMU_MAX_MAPPED || !emu_gart_to_cpu(in->mqd_addr, 1)) {
		h->errors++;
		return -EINVAL;
	}
	m = &h->mapped[h->n_mapped++];
	m->mqd_addr = in->mqd_addr;
	m->doorbell_off = in->doorbell_offset;
	m->pasid = in->process_id;
	m->is_static = false;
	return 0;
}

static int emu_mes_remove_hw_queue(struct amdgpu_mes *mes, struct mes_remove_queue_input *in)
{
	struct emu_hws *h = emu_mes_of(mes);
	unsigned int i;

	h->mes_removes++;
	for (i = 0; i < h->n_mapped; i++)
		if (h->mapped[i].doorbell_off == in->doorbell_offset) {
			h->mapped[i] = h->mapped[--h->n_mapped];
			return 0;
		}
	h->errors++;	/* removing what is not there */
	return -EINVAL;
}

const struct amdgpu_mes_funcs emu_mes_funcs = {
	.add_hw_queue = emu_mes_add_hw_queue,
	.remove_hw_queue = emu_mes_remove_hw_queue,
};
