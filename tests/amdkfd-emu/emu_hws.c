// SPDX-License-Identifier: GPL-2.0
/*
 * The emulated CP/HWS behind the HIQ doorbell.
 *
 * amdkfd's kernel queue writes PM4 packets into the HIQ ring and rings a
 * 64-bit doorbell with its write pointer (kq_submit_packet()). This decodes
 * every packet up to that pointer, as MEC firmware would, and keeps what
 * the firmware knows: the queues of the current runlist. It answers
 * QUERY_STATUS with the fence amdkfd waits for and reports a queue that
 * ignored preemption in the HIQ MQD, where MEC puts it. Layouts are
 * amdkfd's own (kfd_pm4_headers_ai.h, kfd_pm4_headers_aldebaran.h,
 * v9_structs.h), for GC 9.4.3 with one XCC.
 */

#include "emu.h"
#include "kfd_pm4_headers_ai.h"
#include "kfd_pm4_headers_aldebaran.h"
#include "kfd_pm4_opcodes.h"
#include "v9_structs.h"

/* A NOP with count 0x3fff pads the ring before a wrap: it is one dword. */
#define EMU_NOP_PAD 0xFFFF1000u

/* Firmware start: learn the HIQ ring from its MQD; nothing is mapped. */
void emu_hws_load_hiq(struct emu_node *en, struct v9_mqd *m)
{
	struct emu_hws *h = &en->hws;
	u64 ring = ((u64)m->cp_hqd_pq_base_hi << 32 | m->cp_hqd_pq_base_lo) << 8;
	u64 rptr = (u64)m->cp_hqd_pq_rptr_report_addr_hi << 32 |
		   m->cp_hqd_pq_rptr_report_addr_lo;

	h->hiq_mqd = m;
	h->ring_dw = 1u << ((m->cp_hqd_pq_control & 0x3f) + 1);
	h->ring = emu_gart_to_cpu(ring, h->ring_dw * 4);
	h->rptr = emu_gart_to_cpu(rptr, 4);
	h->consumed = 0;
	h->hung = false;
	h->n_mapped = 0;
	h->runlist_active = false;
	h->hiq_loads++;
	if (!h->ring || !h->rptr)
		h->errors++;
}

static void emu_unmap_where(struct emu_hws *h, bool (*match)(const struct emu_mapped *, u32),
			    u32 arg)
{
	unsigned int i, kept = 0;

	for (i = 0; i < h->n_mapped; i++)
		if (!match(&h->mapped[i], arg))
			h->mapped[kept++] = h->mapped[i];
	h->n_mapped = kept;
}

static bool emu_any(const struct emu_mapped *m, u32 unused)
{
	return true;
}

static bool emu_non_static(const struct emu_mapped *m, u32 unused)
{
	return !m->is_static;
}

static bool emu_of_pasid(const struct emu_mapped *m, u32 pasid)
{
	return m->pasid == pasid;
}

static void emu_map_queue(struct emu_hws *h, const struct pm4_mes_map_queues *p, u16 pasid)
{
	u64 addr = (u64)p->mqd_addr_hi << 32 | p->mqd_addr_lo;
	struct v9_mqd *mqd = emu_gart_to_cpu(addr, sizeof(*mqd));
	struct emu_mapped *m;

	h->map_queues++;
	/* The MQD must be real memory and describe the packet's doorbell. */
	if (!mqd || h->n_mapped >= EMU_MAX_MAPPED ||
	    ((mqd->cp_hqd_pq_doorbell_control >> 2) & 0x3ffffff) !=
	    p->bitfields3.doorbell_offset) {
		h->errors++;
		return;
	}
	m = &h->mapped[h->n_mapped++];
	m->mqd_addr = addr;
	m->doorbell_off = p->bitfields3.doorbell_offset;
	m->pasid = pasid;
	m->is_static = p->bitfields2.queue_type ==
		       queue_type__mes_map_queues__normal_latency_static_queue_vi;
}

/* Walks a runlist IB: MAP_PROCESS, then its MAP_QUEUES, per process. */
static void emu_runlist(struct emu_hws *h, const struct pm4_mes_runlist *rl)
{
	u64 ib = (u64)rl->ib_base_hi << 32 | (rl->ordinal2 & ~3u);
	u32 size = rl->bitfields4.ib_size;
	const u32 *dw = emu_gart_to_cpu(ib, size * 4);
	u16 pasid = 0;
	u32 i = 0;

	h->runlists++;
	/* amdkfd unmaps before every new runlist. */
	if (!dw || h->runlist_active || h->n_mapped) {
		h->errors++;
		if (!dw)
			return;
	}
	h->runlist_active = true;
	while (i < size) {
		union PM4_MES_TYPE_3_HEADER hdr = { .u32All = dw[i] };
		u32 len = hdr.count + 2;

		if (hdr.type != 3 || i + len > size) {
			h->errors++;
			return;
		}
		switch (hdr.opcode) {
		case IT_MAP_PROCESS:
			pasid = ((const struct pm4_mes_map_process_aldebaran *)&dw[i])
					->bitfields2.pasid;
			h->map_process++;
			break;
		case IT_MAP_QUEUES:
			emu_map_queue(h, (const void *)&dw[i], pasid);
			break;
		case IT_RUN_LIST:
			/* Oversubscribed: chained back to itself; stop here. */
			h->chained++;
			return;
		default:
			h->errors++;
			return;
		}
		i += len;
	}
}

static void emu_unmap(struct emu_node *en, const struct pm4_mes_unmap_queues *p)
{
	struct emu_hws *h = &en->hws;

	h->unmaps++;
	if (p->bitfields2.action == action__mes_unmap_queues__reset_queues)
		h->unmaps_reset++;
	switch (p->bitfields2.queue_sel) {
	case queue_sel__mes_unmap_queues__unmap_all_queues:
		emu_unmap_where(h, emu_any, 0);
		break;
	case queue_sel__mes_unmap_queues__unmap_all_non_static_queues:
		emu_unmap_where(h, emu_non_static, 0);
		break;
	case queue_sel__mes_unmap_queues__perform_request_on_pasid_queues:
		emu_unmap_where(h, emu_of_pasid, p->bitfields3a.pasid);
		break;
	default:
		h->errors++;	/* amdkfd never unmaps single queues on HWS */
		break;
	}
	if (!h->n_mapped)
		h->runlist_active = false;
	/*
	 * A queue that ignored preemption: MEC abandons the unmap, leaves the
	 * queue mapped and logs its doorbell in the HIQ MQD (comment in
	 * unmap_queues_cpsch()).
	 */
	if (h->fail_next_unmap_doorbell) {
		h->hiq_mqd->queue_doorbell_id0 = h->fail_next_unmap_doorbell;
		h->fail_next_unmap_doorbell = 0;
	}
}

static void emu_query_status(struct emu_hws *h, const struct pm4_mes_query_status *p)
{
	u64 addr = (u64)p->addr_hi << 32 | p->addr_lo;
	u64 *fence = emu_gart_to_cpu(addr, sizeof(*fence));

	h->query_status++;
	if (h->drop_next_fence) {
		h->drop_next_fence = false;	/* a hung HWS never answers */
		return;
	}
	if (!fence) {
		h->errors++;
		return;
	}
	WRITE_ONCE(*fence, (u64)p->data_hi << 32 | p->data_lo);
}

static void emu_packet(struct emu_node *en, const u32 *dw)
{
	union PM4_MES_TYPE_3_HEADER hdr = { .u32All = dw[0] };
	struct emu_hws *h = &en->hws;

	switch (hdr.opcode) {
	case IT_SET_RESOURCES:
		h->set_resources++;
		break;
	case IT_WRITE_DATA:
		h->write_data++;
		break;
	case IT_RUN_LIST:
		emu_runlist(h, (const void *)dw);
		break;
	case IT_UNMAP_QUEUES:
		emu_unmap(en, (const void *)dw);
		break;
	case IT_QUERY_STATUS:
		emu_query_status(h, (const void *)dw);
		break;
	default:
		h->errors++;
		break;
	}
}

/*
 * The HIQ doorbell: consume every packet up to @wptr (in dwords since the
 * HIQ was loaded), then report the read pointer. A packet that is not a
 * type-3 header means garbage on the ring (amdkfd's own hang_hws writes
 * some): the firmware hangs and consumes nothing until it is loaded again.
 */
void emu_hws_doorbell(struct emu_node *en, u64 wptr)
{
	struct emu_hws *h = &en->hws;
	u32 pkt[64];

	if (!h->ring || !h->rptr)
		return;
	while (!h->hung && h->consumed < wptr) {
		union PM4_MES_TYPE_3_HEADER hdr = {
			.u32All = h->ring[h->consumed % h->ring_dw]
		};
		u32 len = hdr.count + 2, i;

		if (hdr.u32All == EMU_NOP_PAD) {
			h->consumed++;
			continue;
		}
		if (hdr.type != 3 || len > ARRAY_SIZE(pkt)) {
			h->hung = true;
			break;
		}
		/* A packet never wraps (kq_acquire_packet_buffer), but copy anyway. */
		for (i = 0; i < len; i++)
			pkt[i] = h->ring[(h->consumed + i) % h->ring_dw];
		emu_packet(en, pkt);
		h->consumed += len;
	}
	WRITE_ONCE(*h->rptr, h->consumed % h->ring_dw);
}

bool emu_hws_is_mapped(struct emu_node *en, const struct queue *q)
{
	unsigned int i;

	for (i = 0; i < en->hws.n_mapped; i++)
		if (en->hws.mapped[i].mqd_addr == q->gart_mqd_addr)
			return true;
	return false;
}
