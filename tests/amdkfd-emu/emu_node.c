// SPDX-License-Identifier: GPL-2.0
/*
 * Bringing up a fake GC 9.4.3 (MI300) node in HWS mode through amdkfd's
 * own device_queue_manager_init() and start, and creating processes and
 * compute queues the way amdkfd's process queue manager does
 * (kfd_process_queue_manager.c): register_process, init_queue,
 * create_queue. Only the fields amdkfd reads are set (design note:
 * amdkfd-emulation.md, section 2).
 */

#include <linux/bitmap.h>
#include <linux/device.h>
#include <linux/sched/mm.h>
#include <linux/sched/task.h>
#include <linux/slab.h>

#include <drm/drm_file.h>

#include "emu.h"
#include "amdgpu.h"

static struct emu_node *emu_nodes[EMU_MAX_NODES];

struct emu_node *emu_node_of_adev(struct amdgpu_device *adev)
{
	int i;

	for (i = 0; i < EMU_MAX_NODES; i++)
		if (emu_nodes[i] && emu_nodes[i]->adev == adev)
			return emu_nodes[i];
	WARN_ON_ONCE(1);
	return NULL;
}

struct emu_node *emu_node_of_kfd(struct kfd_dev *kfd)
{
	int i;

	for (i = 0; i < EMU_MAX_NODES; i++)
		if (emu_nodes[i] && &emu_nodes[i]->kfd == kfd)
			return emu_nodes[i];
	return NULL;
}

struct emu_node *emu_node_of_gpu_id(u32 gpu_id)
{
	int i;

	for (i = 0; i < EMU_MAX_NODES; i++)
		if (emu_nodes[i] && emu_nodes[i]->node.id == gpu_id)
			return emu_nodes[i];
	return NULL;
}

static void emu_node_free(struct emu_node *en, int slot)
{
	emu_nodes[slot] = NULL;
	if (en->dev)
		root_device_unregister(en->dev);
	kvfree(en->adev);
	kfree(en);
}

/* MI300 (one XCC): MEC0, 4 pipes of 8 queues; KFD may use queues 2-7 of each pipe. */
static void emu_shared_resources(struct kgd2kfd_shared_resources *sr)
{
	int pipe, queue;

	sr->compute_vmid_bitmap = 0xfff8;	/* first KFD VMID 3 on multi-AID parts */
	sr->num_pipe_per_mec = 4;
	sr->num_queue_per_pipe = 8;
	for (pipe = 0; pipe < 4; pipe++)
		for (queue = 2; queue < 8; queue++)
			set_bit(pipe * 8 + queue, sr->cp_queue_bitmap);
	sr->enable_mes = false;
}

/*
 * A GC 9.4.3 (MI300) node under the emulated HWS, or with @mes a GC 11
 * (RDNA3) node under the emulated MES.
 */
struct emu_node *emu_node_create(u32 gpu_id, u32 xcc_mask, bool mes)
{
	struct amdgpu_device *adev;
	struct emu_node *en;
	int slot, r;

	for (slot = 0; slot < EMU_MAX_NODES && emu_nodes[slot]; slot++)
		;
	if (slot == EMU_MAX_NODES)
		return ERR_PTR(-ENOSPC);
	en = kzalloc_obj(*en);
	if (!en)
		return ERR_PTR(-ENOMEM);
	en->adev = kvzalloc_obj(*en->adev);
	if (!en->adev) {
		kfree(en);
		return ERR_PTR(-ENOMEM);
	}
	emu_nodes[slot] = en;
	adev = en->adev;

	en->dev = root_device_register(slot ? "kfdp_emu1" : "kfdp_emu0");
	if (IS_ERR(en->dev)) {
		r = PTR_ERR(en->dev);
		en->dev = NULL;
		emu_node_free(en, slot);
		return ERR_PTR(r);
	}
	adev->dev = en->dev;
	adev->asic_type = CHIP_IP_DISCOVERY;
	adev->ip_versions[GC_HWIP][0] = mes ? IP_VERSION(11, 0, 0) : IP_VERSION(9, 4, 3);
	adev->ip_versions[SDMA0_HWIP][0] = mes ? IP_VERSION(6, 0, 0) : IP_VERSION(4, 4, 2);
	if (mes) {
		adev->mes.adev = adev;
		adev->mes.funcs = &emu_mes_funcs;
		mutex_init(&adev->mes.mutex_hidden);
		adev->vm_manager.max_pfn = 1ULL << 36;
	}
	init_rwsem(&en->reset_domain.sem);
	atomic_set(&en->reset_domain.in_gpu_reset, 0);
	adev->reset_domain = &en->reset_domain;
	adev->gfx.mec.num_mec = 2;
	adev->gfx.mec.num_pipe_per_mec = 4;
	adev->gfx.mec.num_queue_per_pipe = 8;
	adev->gfx.xcc_mask = xcc_mask;
	/* For CU masks (mqd_symmetrically_map_cu_mask): 4 SEs of 10 CUs. */
	adev->gfx.config.max_shader_engines = 4;
	adev->gfx.config.max_sh_per_se = 1;
	adev->gfx.cu_info.number = 40;
	for (r = 0; r < 4; r++)
		adev->gfx.cu_info.bitmap[0][r][0] = 0x3ff;

	en->kfd2kgd = emu_kfd2kgd;
	en->kfd.adev = adev;
	en->kfd.kfd2kgd = &en->kfd2kgd;
	en->kfd.device_info.doorbell_size = 8;	/* SOC15: the 64-bit HIQ doorbell */
	en->kfd.device_info.num_sdma_queues_per_engine = 8;
	en->kfd.device_info.max_no_of_hqd = 24;
	en->kfd.cwsr_enabled = true;
	en->kfd.num_nodes = 1;
	en->kfd.nodes[0] = &en->node;
	mutex_init(&en->kfd.profiler_lock);
	emu_shared_resources(&en->kfd.shared_resources);
	en->kfd.shared_resources.enable_mes = mes;

	en->node.adev = adev;
	en->node.kfd = &en->kfd;
	en->node.kfd2kgd = &en->kfd2kgd;
	en->node.id = gpu_id;
	en->node.xcc_mask = xcc_mask;
	en->node.vm_info.first_vmid_kfd = 3;
	en->node.vm_info.last_vmid_kfd = 15;
	en->node.compute_vmid_bitmap = 0xfff8;
	en->node.max_proc_per_quantum = 13;	/* MI300 (kfd_device.c) */
	en->topo.node_props.ctl_stack_size = PAGE_SIZE;

	/* As kgd2kfd_device_init(): dqm before start, which reaches it through the node. */
	en->node.dqm = device_queue_manager_init(&en->node);
	if (!en->node.dqm) {
		emu_node_free(en, slot);
		return ERR_PTR(-ENODEV);
	}
	r = en->node.dqm->ops.start(en->node.dqm);
	if (r) {
		device_queue_manager_uninit(en->node.dqm);
		emu_node_free(en, slot);
		return ERR_PTR(r);
	}
	return en;
}

void emu_node_destroy(struct emu_node *en)
{
	int slot;

	for (slot = 0; slot < EMU_MAX_NODES && emu_nodes[slot] != en; slot++)
		;
	if (WARN_ON(slot == EMU_MAX_NODES))
		return;
	en->node.dqm->ops.stop(en->node.dqm);
	device_queue_manager_uninit(en->node.dqm);
	emu_node_free(en, slot);
}

/*
 * A GPU reset as amdgpu drives it for kfd: with the reset domain held for
 * writing, stop the scheduler and start it again (firmware reload), then
 * clear the hang. Never called under dqm_lock: amdkfd only requests it.
 */
int emu_node_reset(struct emu_node *en)
{
	struct device_queue_manager *dqm = en->node.dqm;
	int r;

	down_write(&en->reset_domain.sem);
	atomic_set(&en->reset_domain.in_gpu_reset, 1);
	dqm->ops.stop(dqm);
	r = dqm->ops.start(dqm);
	dqm->is_hws_hang = false;
	atomic_set(&en->reset_domain.in_gpu_reset, 0);
	up_write(&en->reset_domain.sem);
	return r;
}

/* The number of is_active queues of every process on the node. */
unsigned int emu_count_active(struct emu_node *en)
{
	struct device_queue_manager *dqm = en->node.dqm;
	struct device_process_node *cur;
	unsigned int n = 0;
	struct queue *q;

	dqm_lock(dqm);
	list_for_each_entry(cur, &dqm->queues, list)
		list_for_each_entry(q, &cur->qpd->queues_list, list)
			n += q->properties.is_active;
	dqm_unlock(dqm);
	return n;
}

struct emu_proc *emu_proc_create(struct emu_node *en, u16 pasid)
{
	struct kfd_process_device *pdd;
	struct emu_proc *ep;
	struct kfd_process *p;
	int r = -ENOMEM;

	ep = kzalloc_obj(*ep);
	if (!ep)
		return ERR_PTR(-ENOMEM);
	ep->en = en;
	ep->p = p = kzalloc_obj(*p);
	ep->pdd = pdd = kzalloc_obj(*pdd);
	ep->drm_file = kzalloc_obj(*ep->drm_file);
	ep->fpriv = kzalloc_obj(*ep->fpriv);
	if (!p || !pdd || !ep->drm_file || !ep->fpriv)
		goto fail;
	pdd->qpd.doorbell_bitmap = bitmap_zalloc(KFD_MAX_NUM_OF_QUEUES_PER_PROCESS, GFP_KERNEL);
	p->mm = mm_alloc();
	if (!pdd->qpd.doorbell_bitmap || !p->mm)
		goto fail;

	mutex_init(&p->mutex);
	p->lead_thread = get_task_struct(current);
	p->context_id = KFD_CONTEXT_ID_PRIMARY;
	p->pqm.process = p;
	p->n_pdds = 1;
	p->pdds[0] = pdd;

	/* kfd_flush_tlb() follows drm_priv to an amdgpu_fpriv's VM. */
	ep->drm_file->driver_priv = ep->fpriv;
	pdd->drm_priv = ep->drm_file;
	pdd->dev = &en->node;
	pdd->process = p;
	pdd->pasid = pasid;
	pdd->user_gpu_id = en->node.id;
	pdd->qpd.dqm = en->node.dqm;
	pdd->qpd.pqm = &p->pqm;
	/* Any per-process doorbell base (emu_stubs.c, amdgpu_doorbell_index_on_bar). */
	pdd->qpd.proc_doorbells = (struct amdgpu_bo *)(uintptr_t)(0x1000u * pasid);
	INIT_LIST_HEAD(&pdd->qpd.queues_list);
	INIT_LIST_HEAD(&pdd->qpd.priv_queue_list);

	r = en->node.dqm->ops.register_process(en->node.dqm, &pdd->qpd);
	if (r)
		goto fail;
	ep->t.p = p;
	ep->t.mm = p->mm;
	return ep;

fail:
	if (p && p->lead_thread)
		put_task_struct(p->lead_thread);
	if (p && p->mm)
		mmput(p->mm);
	if (pdd)
		bitmap_free(pdd->qpd.doorbell_bitmap);
	kfree(ep->fpriv);
	kfree(ep->drm_file);
	kfree(pdd);
	kfree(p);
	kfree(ep);
	return ERR_PTR(r);
}

/* As pqm_uninit() at process exit: amdkfd's process_termination, then free. */
void emu_proc_destroy(struct emu_proc *ep)
{
	struct device_queue_manager *dqm = ep->en->node.dqm;
	unsigned int i;

	dqm->ops.process_termination(dqm, &ep->pdd->qpd);
	for (i = 0; i < ep->nq; i++)
		if (ep->q[i])
			uninit_queue(ep->q[i]);
	put_task_struct(ep->p->lead_thread);
	mmput(ep->t.mm);
	bitmap_free(ep->pdd->qpd.doorbell_bitmap);
	kfree(ep->fpriv);
	kfree(ep->drm_file);
	kfree(ep->pdd);
	kfree(ep->p);
	kfree(ep);
}

/*
 * The process exits: amdkfd's teardown (kfd_process_notifier_release_internal)
 * removes its queues from every node and clears p->mm, which is how the glue
 * tells an exited target. emu_proc_destroy() frees the rest later.
 */
void emu_proc_exit(struct emu_proc *ep)
{
	struct device_queue_manager *dqm = ep->en->node.dqm;

	dqm->ops.process_termination(dqm, &ep->pdd->qpd);
	WRITE_ONCE(ep->p->mm, NULL);
}

/* An AQL compute queue with a CWSR area, as the ROCm runtime creates them. */
int emu_queue_create(struct emu_proc *ep, u32 queue_id)
{
	struct device_queue_manager *dqm = ep->en->node.dqm;
	u64 va = 0x7f0000000000ULL + ((u64)ep->pdd->pasid << 28) + ((u64)queue_id << 20);
	struct queue_properties props = {};
	struct queue *q;
	int r;

	if (ep->nq >= EMU_MAX_QUEUES)
		return -ENOSPC;
	props.type = KFD_QUEUE_TYPE_COMPUTE;
	props.format = KFD_QUEUE_FORMAT_AQL;
	props.queue_id = queue_id;
	props.queue_address = va;
	props.queue_size = 0x10000;
	props.queue_percent = 100;
	props.priority = 7;
	props.read_ptr = (void __user *)(uintptr_t)(va + 0x80000);
	props.write_ptr = (void __user *)(uintptr_t)(va + 0x80040);
	props.eop_ring_buffer_address = va + 0x81000;
	props.eop_ring_buffer_size = 0x1000;
	props.ctx_save_restore_area_address = va + 0x90000;
	props.ctx_save_restore_area_size = 0x20000;
	props.ctl_stack_size = PAGE_SIZE;
	props.exception_status = KFD_EC_MASK(EC_QUEUE_NEW);
	/* No write-pointer BO: amdgpu_bo_gpu_offset(NULL) is 0 (emu_stubs.c). */
	props.wptr_bo = NULL;

	r = init_queue(&q, &props);
	if (r)
		return r;
	q->device = &ep->en->node;
	q->process = ep->p;
	/* MES: the gang context pqm would allocate; any distinct address. */
	q->gang_ctx_gpu_addr = va + 0xa0000;
	mutex_lock(&ep->p->mutex);
	r = dqm->ops.create_queue(dqm, q, &ep->pdd->qpd, NULL, NULL, NULL);
	mutex_unlock(&ep->p->mutex);
	if (r) {
		uninit_queue(q);
		return r;
	}
	ep->q[ep->nq++] = q;
	return 0;
}

/* As pqm_destroy_queue(): under the process's mutex. */
int emu_queue_destroy(struct emu_proc *ep, unsigned int idx)
{
	struct device_queue_manager *dqm = ep->en->node.dqm;
	int r;

	mutex_lock(&ep->p->mutex);
	r = dqm->ops.destroy_queue(dqm, &ep->pdd->qpd, ep->q[idx]);
	mutex_unlock(&ep->p->mutex);
	if (!r) {
		uninit_queue(ep->q[idx]);
		ep->q[idx] = NULL;
	}
	return r;
}

/* The tenant's CU mask or GWS change (pqm_update_mqd, pqm_set_gws). */
int emu_queue_update(struct emu_proc *ep, unsigned int idx, struct mqd_update_info *minfo)
{
	struct device_queue_manager *dqm = ep->en->node.dqm;
	int r;

	mutex_lock(&ep->p->mutex);
	r = dqm->ops.update_queue(dqm, ep->q[idx], minfo);
	mutex_unlock(&ep->p->mutex);
	return r;
}

/* The tenant's own UPDATE_QUEUE (pqm_update_queue_properties). */
int emu_queue_set_percent(struct emu_proc *ep, unsigned int idx, u32 percent)
{
	struct device_queue_manager *dqm = ep->en->node.dqm;
	int r;

	mutex_lock(&ep->p->mutex);
	ep->q[idx]->properties.queue_percent = percent;
	r = dqm->ops.update_queue(dqm, ep->q[idx], NULL);
	mutex_unlock(&ep->p->mutex);
	return r;
}
