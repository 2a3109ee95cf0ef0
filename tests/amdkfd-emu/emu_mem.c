// SPDX-License-Identifier: GPL-2.0
/*
 * The fake GART: kernel memory that amdkfd believes is GPU-visible.
 *
 * Every buffer amdkfd asks amdgpu for (GTT sub-allocations: HIQ ring, EOP,
 * pointers, fence, runlist IBs; kernel BOs: the HIQ MQD trunk, CWSR-sized
 * user MQDs) is its own vzalloc'ed block with a fake GPU address. Addresses
 * are page aligned, never reused and a page apart, so that the emulated
 * firmware can translate any address amdkfd writes into a packet back to
 * the block, and KASAN sees every overrun.
 */

#include <linux/list.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/vmalloc.h>

#include "emu.h"

struct emu_buf {
	struct list_head link;
	u64 gpu_addr;
	size_t size;
	void *cpu;
};

static LIST_HEAD(emu_bufs);
static DEFINE_SPINLOCK(emu_bufs_lock);
static u64 emu_next_va = 0x100000000ULL;
static unsigned int emu_fail_next;
static unsigned int emu_live;

/* The next @n allocations fail: a runlist IB that cannot be allocated. */
void emu_mem_fail_next(unsigned int n)
{
	spin_lock(&emu_bufs_lock);
	emu_fail_next = n;
	spin_unlock(&emu_bufs_lock);
}

unsigned int emu_mem_live(void)
{
	return READ_ONCE(emu_live);
}

static struct emu_buf *emu_buf_alloc(size_t size)
{
	struct emu_buf *b;
	bool fail;

	spin_lock(&emu_bufs_lock);
	fail = emu_fail_next > 0;
	if (fail)
		emu_fail_next--;
	spin_unlock(&emu_bufs_lock);
	if (fail)
		return NULL;

	b = kzalloc_obj(*b);
	if (!b)
		return NULL;
	b->size = size;
	b->cpu = vzalloc(size);
	if (!b->cpu) {
		kfree(b);
		return NULL;
	}
	spin_lock(&emu_bufs_lock);
	b->gpu_addr = emu_next_va;
	emu_next_va += PAGE_ALIGN(size) + PAGE_SIZE;
	list_add(&b->link, &emu_bufs);
	emu_live++;
	spin_unlock(&emu_bufs_lock);
	return b;
}

static void emu_buf_free(struct emu_buf *b)
{
	spin_lock(&emu_bufs_lock);
	list_del(&b->link);
	emu_live--;
	spin_unlock(&emu_bufs_lock);
	vfree(b->cpu);
	kfree(b);
}

static struct emu_buf *emu_buf_by_cpu(void *cpu)
{
	struct emu_buf *b;

	list_for_each_entry(b, &emu_bufs, link)
		if (b->cpu == cpu)
			return b;
	return NULL;
}

/*
 * The CPU address of [@gpu_addr, @gpu_addr + @len), or NULL if that range
 * is not inside one live buffer: the firmware would fault.
 */
void *emu_gart_to_cpu(u64 gpu_addr, size_t len)
{
	struct emu_buf *b;
	void *cpu = NULL;

	spin_lock(&emu_bufs_lock);
	list_for_each_entry(b, &emu_bufs, link)
		if (gpu_addr >= b->gpu_addr &&
		    gpu_addr + len <= b->gpu_addr + b->size) {
			cpu = b->cpu + (gpu_addr - b->gpu_addr);
			break;
		}
	spin_unlock(&emu_bufs_lock);
	return cpu;
}

/* Frees what a failed test left behind, so that the next one starts clean. */
void emu_mem_cleanup(void)
{
	struct emu_buf *b, *tmp;

	list_for_each_entry_safe(b, tmp, &emu_bufs, link)
		emu_buf_free(b);
}

int kfd_gtt_sa_allocate(struct kfd_node *node, unsigned int size,
			struct kfd_mem_obj **mem_obj)
{
	struct kfd_mem_obj *obj = kzalloc_obj(*obj);
	struct emu_buf *b;

	if (!obj)
		return -ENOMEM;
	b = emu_buf_alloc(size);
	if (!b) {
		kfree(obj);
		return -ENOMEM;
	}
	/* ->mem stays NULL: kfd_free_mqd_cp() picks the sub-allocator by it. */
	obj->gpu_addr = b->gpu_addr;
	obj->cpu_ptr = b->cpu;
	*mem_obj = obj;
	return 0;
}

int kfd_gtt_sa_free(struct kfd_node *node, struct kfd_mem_obj *mem_obj)
{
	struct emu_buf *b;

	if (!mem_obj)
		return 0;
	spin_lock(&emu_bufs_lock);
	b = emu_buf_by_cpu(mem_obj->cpu_ptr);
	spin_unlock(&emu_bufs_lock);
	if (!WARN_ON(!b))
		emu_buf_free(b);
	kfree(mem_obj);
	return 0;
}

int amdgpu_amdkfd_alloc_kernel_mem(struct amdgpu_device *adev, size_t size,
				   u32 domain, void **mem_obj, uint64_t *gpu_addr,
				   void **cpu_ptr, bool mqd_gfx9)
{
	struct emu_buf *b = emu_buf_alloc(size);

	if (!b)
		return -ENOMEM;
	/* The handle must be non-NULL: free_mqd_hiq_sdma() WARNs on NULL. */
	*mem_obj = b;
	*gpu_addr = b->gpu_addr;
	*cpu_ptr = b->cpu;
	return 0;
}

void amdgpu_amdkfd_free_kernel_mem(struct amdgpu_device *adev, void **mem_obj)
{
	if (*mem_obj)
		emu_buf_free(*mem_obj);
	*mem_obj = NULL;
}
