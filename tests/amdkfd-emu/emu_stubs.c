// SPDX-License-Identifier: GPL-2.0
/*
 * What amdkfd's queue-management objects call outside themselves, and
 * amdgpu.ko does not export: module parameters, doorbells, reset and RAS
 * hooks, MES and BO helpers, a few kfd_process/topology lookups, and the
 * kfd2kgd table of GC 9.4.3. Each stub does what the emulation needs and
 * counts what it was asked; a stub that the HWS path must never reach
 * WARNs, which fails the VM run (tests/vm/ktap.py). The list is checked
 * at build time: modpost rejects any name left undefined.
 */

#include "emu.h"
#include "amdgpu_amdkfd.h"
#include "kfd_debug.h"
#include "v9_structs.h"

/* amdgpu's module parameters (amdgpu_drv.c), with the emulation's values. */
int sched_policy = KFD_SCHED_POLICY_HWS;
/* 9000 ms upstream; a lost fence then costs 9 s of busy waiting. */
int queue_preemption_timeout_ms = 200;
bool debug_evictions;
int amdgpu_emu_mode;
/* Non-zero: per-queue reset on a failed preemption (dqm.c, reset_queues_on_hws_hang). */
int amdgpu_gpu_recovery = 1;
int max_num_of_queues_per_device = KFD_MAX_NUM_OF_QUEUES_PER_DEVICE_DEFAULT;
/* Non-zero spins forever in schedule() when the HWS hangs. */
int halt_if_hws_hang;
uint amdgpu_sdma_phase_quantum = 32;

/* Doorbells: the HIQ's is a slot in struct emu_node; writing it runs the HWS. */
void __iomem *kfd_get_kernel_doorbell(struct kfd_dev *kfd, unsigned int *doorbell_off)
{
	struct emu_node *en = emu_node_of_kfd(kfd);

	if (WARN_ON(!en))
		return NULL;
	*doorbell_off = 0x10;
	return (void __iomem *)&en->hiq_doorbell;
}

void kfd_release_kernel_doorbell(struct kfd_dev *kfd, u32 __iomem *db_addr)
{
}

void write_kernel_doorbell64(void __iomem *db, u64 value)
{
	struct emu_node *en = container_of((u64 __force *)db, struct emu_node, hiq_doorbell);

	WRITE_ONCE(en->hiq_doorbell, value);
	emu_hws_doorbell(en, value);
}

/* Pre-SOC15 only: 9.4.3 has 8-byte doorbells. */
void write_kernel_doorbell(void __iomem *db, u32 value)
{
	WARN_ON_ONCE(1);
}

/* proc_doorbells is the harness's per-process base (emu_node.c). */
uint32_t amdgpu_doorbell_index_on_bar(struct amdgpu_device *adev, struct amdgpu_bo *db_bo,
				      uint32_t doorbell_index, uint32_t db_size)
{
	return (u32)(uintptr_t)db_bo + doorbell_index * db_size / sizeof(u32);
}

/* Reset and RAS. gpu_reset is called under dqm_lock: count it, never reset here. */
void amdgpu_amdkfd_gpu_reset(struct amdgpu_device *adev)
{
	emu_node_of_adev(adev)->gpu_resets++;
}

bool amdgpu_amdkfd_is_fed(struct amdgpu_device *adev)
{
	return emu_node_of_adev(adev)->fed;
}

int amdgpu_in_reset(struct amdgpu_device *adev)
{
	return atomic_read(&adev->reset_domain->in_gpu_reset);
}

int amdgpu_sdma_reset_engine(struct amdgpu_device *adev, uint32_t instance_id,
			     bool caller_handles_kernel_queues)
{
	WARN_ON_ONCE(1);	/* no SDMA engines */
	return -EOPNOTSUPP;
}

void kfd_signal_reset_event(struct kfd_node *dev)
{
	emu_node_of_adev(dev->adev)->reset_events++;
}

/*
 * MES helpers amdgpu exports to kfd (the MES itself is adev->mes.funcs,
 * emu_mes.c): hang detection and queue reset are not emulated.
 * start_cpsch asks for the hung-queue array size on every node.
 */
int amdgpu_mes_get_hung_queue_db_array_size(struct amdgpu_device *adev)
{
	return 0;
}

bool amdgpu_mes_queue_reset_by_mes_supported(struct amdgpu_device *adev)
{
	return false;
}

/*
 * 7.2's dqm answers a failed MES remove by suspending and resuming all of
 * MES, and resets hung queues through amdgpu; 7.3 resets the one queue
 * (below). Neither is emulated.
 */
int amdgpu_mes_suspend(struct amdgpu_device *adev, u32 xcc_id)
{
	WARN_ON_ONCE(1);
	return -EOPNOTSUPP;
}

int amdgpu_mes_resume(struct amdgpu_device *adev, u32 xcc_id)
{
	WARN_ON_ONCE(1);
	return -EOPNOTSUPP;
}

int amdgpu_mes_detect_and_reset_hung_queues(struct amdgpu_device *adev, int queue_type,
					    bool detect_only, unsigned int *hung_db_num,
					    u32 *hung_db_array, uint32_t xcc_id)
{
	WARN_ON_ONCE(1);
	return -EOPNOTSUPP;
}

#ifdef EMU_DQM_RESETS_MES_QUEUE
int amdgpu_mes_reset_queue_mmio(struct amdgpu_device *adev, int queue_type,
				unsigned int vmid, unsigned int me, unsigned int pipe,
				unsigned int queue, uint32_t xcc_id)
{
	WARN_ON_ONCE(1);
	return -EOPNOTSUPP;
}

int amdgpu_mes_reset_user_queue(struct amdgpu_device *adev, int queue_type,
				unsigned int doorbell_index, unsigned int xcc_id)
{
	WARN_ON_ONCE(1);
	return -EOPNOTSUPP;
}

int amdgpu_gfx_reset_mes_compute(struct amdgpu_device *adev, struct amdgpu_ring *ring,
				 struct amdgpu_fence *guilty_fence,
				 struct amdgpu_usermode_queue *uq,
				 unsigned int *hung_queue_count, void *faulty_queue_input)
{
	WARN_ON_ONCE(1);
	return -EOPNOTSUPP;
}
#endif

struct amdgpu_task_info *amdgpu_vm_get_task_info_pasid(struct amdgpu_device *adev, u32 pasid)
{
	return NULL;
}

void amdgpu_vm_print_task_info(struct amdgpu_device *adev, struct amdgpu_task_info *task_info)
{
}

void amdgpu_vm_put_task_info(struct amdgpu_task_info *task_info)
{
}

/* Copies of amdgpu_gfx.c: queue slot arithmetic for SET_RESOURCES and hang detection. */
void amdgpu_queue_mask_bit_to_mec_queue(struct amdgpu_device *adev, int bit,
					int *mec, int *pipe, int *queue)
{
	*queue = bit % adev->gfx.mec.num_queue_per_pipe;
	*pipe = (bit / adev->gfx.mec.num_queue_per_pipe) % adev->gfx.mec.num_pipe_per_mec;
	*mec = (bit / adev->gfx.mec.num_queue_per_pipe) / adev->gfx.mec.num_pipe_per_mec;
}

int amdgpu_queue_mask_bit_to_set_resource_bit(struct amdgpu_device *adev, int queue_bit)
{
	int mec, pipe, queue;

	amdgpu_queue_mask_bit_to_mec_queue(adev, queue_bit, &mec, &pipe, &queue);
	return mec * 4 * 8 + pipe * 8 + queue;
}

/*
 * BOs and VMs: reached only for S4 MQD eviction (adev->in_s4) and for the
 * buffer validation of kfd_queue.c, which only the pqm/chardev path runs;
 * but for add_queue_mes() asking the offset of a queue's write-pointer BO,
 * which the emulation leaves NULL.
 */
u64 amdgpu_bo_gpu_offset(struct amdgpu_bo *bo)
{
	WARN_ON_ONCE(bo);
	return 0;
}

int amdgpu_bo_kmap(struct amdgpu_bo *bo, void **ptr)
{
	WARN_ON_ONCE(1);
	return -EOPNOTSUPP;
}

void amdgpu_bo_kunmap(struct amdgpu_bo *bo)
{
	WARN_ON_ONCE(1);
}

int amdgpu_bo_pin(struct amdgpu_bo *bo, u32 domain)
{
	WARN_ON_ONCE(1);
	return -EOPNOTSUPP;
}

void amdgpu_bo_unpin(struct amdgpu_bo *bo)
{
	WARN_ON_ONCE(1);
}

struct amdgpu_bo *amdgpu_bo_ref(struct amdgpu_bo *bo)
{
	WARN_ON_ONCE(1);
	return bo;
}

void amdgpu_bo_unref(struct amdgpu_bo **bo)
{
	WARN_ON_ONCE(1);
}

struct amdgpu_bo_va *amdgpu_vm_bo_find(struct amdgpu_vm *vm, struct amdgpu_bo *bo)
{
	WARN_ON_ONCE(1);
	return NULL;
}

struct amdgpu_bo_va_mapping *amdgpu_vm_bo_lookup_mapping(struct amdgpu_vm *vm, uint64_t addr)
{
	WARN_ON_ONCE(1);
	return NULL;
}

/* Reached through the inline amdgpu_bo_unreserve(); defining it drops ttm.ko. */
void ttm_bo_move_to_lru_tail(struct ttm_buffer_object *bo)
{
	WARN_ON_ONCE(1);
}

/* MQDs are in "VRAM" on 9.4.3 (mqd_on_vram), so amdkfd flushes HDP: nothing to do. */
void amdgpu_device_flush_hdp(struct amdgpu_device *adev, struct amdgpu_ring *ring)
{
}

int amdgpu_amdkfd_unmap_hiq(struct amdgpu_device *adev, u32 doorbell_off, u32 inst)
{
	return 0;
}

int amdgpu_amdkfd_submit_ib(struct amdgpu_device *adev, enum kgd_engine_type engine,
			    uint32_t vmid, uint64_t gpu_addr, uint32_t *ib_cmd, uint32_t ib_len)
{
	WARN_ON_ONCE(1);
	return -EOPNOTSUPP;
}

bool amdgpu_amdkfd_have_atomics_support(struct amdgpu_device *adev)
{
	return true;
}

void amdgpu_amdkfd_debug_mem_fence(struct amdgpu_device *adev)
{
}

/* The page-table base MAP_PROCESS carries: any stable value per process. */
uint64_t amdgpu_amdkfd_gpuvm_get_process_page_dir(void *drm_priv)
{
	return ((u64)(uintptr_t)drm_priv & 0xfffffffff000ULL) | 0x1;
}

int amdgpu_vm_flush_compute_tlb(struct amdgpu_device *adev, struct amdgpu_vm *vm,
				uint32_t flush_type, uint32_t xcc_mask)
{
	return 0;
}

/* kfd objects not compiled in: compute queues only, so no SDMA engines. */
unsigned int kfd_get_num_sdma_engines(struct kfd_node *kdev)
{
	return 0;
}

unsigned int kfd_get_num_xgmi_sdma_engines(struct kfd_node *kdev)
{
	return 0;
}

/* As kfd_process.c: the pdd of @p on @dev. */
struct kfd_process_device *kfd_get_process_device_data(struct kfd_node *dev,
						       struct kfd_process *p)
{
	int i;

	for (i = 0; i < p->n_pdds; i++)
		if (p->pdds[i]->dev == dev)
			return p->pdds[i];
	return NULL;
}

/* Interrupt and debugger paths only. */
struct kfd_process *kfd_lookup_process_by_pasid(u32 pasid, struct kfd_process_device **pdd)
{
	WARN_ON_ONCE(1);
	return NULL;
}

void kfd_unref_process(struct kfd_process *p)
{
	WARN_ON_ONCE(1);
}

struct kfd_topology_device *kfd_topology_device_by_id(uint32_t gpu_id)
{
	struct emu_node *en = emu_node_of_gpu_id(gpu_id);

	return en ? &en->topo : NULL;
}

void kfd_inc_compute_active(struct kfd_node *dev)
{
}

void kfd_dec_compute_active(struct kfd_node *dev)
{
}

bool kfd_dbg_ev_raise(uint64_t event_mask, struct kfd_process *process, struct kfd_node *dev,
		      unsigned int source_id, bool use_worker, void *exception_data,
		      size_t exception_data_size)
{
	return false;
}

int pqm_update_mqd(struct process_queue_manager *pqm, unsigned int qid,
		   struct mqd_update_info *minfo)
{
	WARN_ON_ONCE(1);
	return -EOPNOTSUPP;
}

/* The kfd2kgd calls of GC 9.4.3 that the HWS path makes. */
static int emu_init_interrupts(struct amdgpu_device *adev, uint32_t pipe_id, uint32_t inst)
{
	return 0;
}

static int emu_hiq_mqd_load(struct amdgpu_device *adev, void *mqd, uint32_t pipe_id,
			    uint32_t queue_id, uint32_t doorbell_off, uint32_t inst)
{
	if (inst == 0)
		emu_hws_load_hiq(emu_node_of_adev(adev), mqd);
	return 0;
}

static void emu_build_dequeue_wait_counts(struct amdgpu_device *adev, uint32_t wait_times,
					  uint32_t sch_wave, uint32_t que_sleep,
					  uint32_t *reg_offset, uint32_t *reg_data)
{
	*reg_offset = 0x1234;	/* any register: the emulated CP ignores WRITE_DATA */
	*reg_data = wait_times;
}

static uint32_t emu_hqd_sdma_get_doorbell(struct amdgpu_device *adev, int engine, int queue)
{
	return 0;
}

/* Hang detection: the one slot of the queue that ignored preemption. */
static uint64_t emu_hqd_get_pq_addr(struct amdgpu_device *adev, uint32_t pipe_id,
				    uint32_t queue_id, uint32_t inst)
{
	struct emu_hws *h = &emu_node_of_adev(adev)->hws;

	if (inst || pipe_id != h->hung_pipe || queue_id != h->hung_queue)
		return 0;
	return h->hung_queue_address;
}

static uint64_t emu_hqd_reset(struct amdgpu_device *adev, uint32_t pipe_id,
			      uint32_t queue_id, uint32_t inst, unsigned int utimeout)
{
	struct emu_hws *h = &emu_node_of_adev(adev)->hws;
	u64 addr = h->hung_queue_address;

	h->hung_queue_address = 0;
	return h->hqd_reset_fails ? 0 : addr;
}

static int emu_set_pasid_vmid_mapping(struct amdgpu_device *adev, u32 pasid,
				      unsigned int vmid, uint32_t inst)
{
	WARN_ON_ONCE(1);	/* NO_HWS only */
	return 0;
}

static void emu_program_sh_mem_settings(struct amdgpu_device *adev, uint32_t vmid,
					uint32_t sh_mem_config, uint32_t sh_mem_ape1_base,
					uint32_t sh_mem_ape1_limit, uint32_t sh_mem_bases,
					uint32_t inst)
{
	WARN_ON_ONCE(1);	/* NO_HWS only */
}

const struct kfd2kgd_calls emu_kfd2kgd = {
	.init_interrupts = emu_init_interrupts,
	.hiq_mqd_load = emu_hiq_mqd_load,
	.build_dequeue_wait_counts_packet_info = emu_build_dequeue_wait_counts,
	.hqd_sdma_get_doorbell = emu_hqd_sdma_get_doorbell,
	.hqd_get_pq_addr = emu_hqd_get_pq_addr,
	.hqd_reset = emu_hqd_reset,
	.set_pasid_vmid_mapping = emu_set_pasid_vmid_mapping,
	.program_sh_mem_settings = emu_program_sh_mem_settings,
};
