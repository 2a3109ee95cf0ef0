// SPDX-License-Identifier: GPL-2.0
/*
 * User memory the module reads outside its owner's context, and the eventfd
 * it signals: the pieces of activity detection (Documentation/design.rst,
 * "Activity detection") that the kernel crate has no abstraction for.
 *
 * A queue's read and write indices live in the tenant's memory (ROCr's
 * amd_queue_t, or a simulated tenant's page). Watching a queue pins the page
 * holding each index, long term, so that the kernel can read it with one
 * load from any context, hardirq included, until it is unpinned: the pin
 * keeps the page alive even after the tenant unmaps it or exits.
 */

#include <linux/eventfd.h>
#include <linux/hugetlb.h>
#include <linux/mm.h>
#include <linux/mmu_notifier.h>
#include <linux/slab.h>
#include <linux/sched/mm.h>
#include <linux/sched/signal.h>
#include <linux/shmem_fs.h>
#include <linux/userfaultfd_k.h>

#include "kfdp_glue.h"

/*
 * Pins count against the caller's RLIMIT_MEMLOCK, in its mm's pinned_vm,
 * as RDMA's and io_uring's long-term pins do: the caller is who asked for
 * the pin (a scheduler's WATCH, a simulated tenant's CREATE_RING), whoever
 * owns the memory. @charged keeps that mm (mm_count) for the uncharge.
 */
static int kfdp_umem_charge(struct mm_struct **charged)
{
	struct mm_struct *me = current->mm;
	unsigned long limit = rlimit(RLIMIT_MEMLOCK) >> PAGE_SHIFT;

	*charged = NULL;
	if (!me)
		return 0;
	if (atomic64_add_return(1, &me->pinned_vm) > limit && !capable(CAP_IPC_LOCK)) {
		atomic64_dec(&me->pinned_vm);
		return -ENOMEM;
	}
	mmgrab(me);
	*charged = me;
	return 0;
}

static void kfdp_umem_uncharge(struct mm_struct *charged)
{
	if (charged) {
		atomic64_dec(&charged->pinned_vm);
		mmdrop(charged);
	}
}

/*
 * After a pin without faults failed with @err: faults the page in and pins
 * it where that waits only on the kernel (anonymous, shmem or hugetlb
 * memory, no userfaultfd). A file mapping's fault may wait for its
 * filesystem's server (a FUSE daemon that never answers) and a
 * userfaultfd's for its handler, for ever, with the owner's lock held and
 * the caller (a daemon's SCHED_FIFO thread) blocked: there a readable page
 * not resident is -EAGAIN, to be asked for again once the tenant has
 * touched it. mmap_lock held.
 */
static long kfdp_umem_pin_faulting(struct mm_struct *mm, unsigned long start,
				   unsigned int flags, struct page **page, long err)
{
	struct vm_area_struct *vma = vma_lookup(mm, start);

	if (!vma || vma->vm_flags & (VM_IO | VM_PFNMAP) || !(vma->vm_flags & VM_READ))
		return err;
	/* vma_is_shmem() is not exported; shmem_mapping() is. */
	if (!userfaultfd_armed(vma) &&
	    (vma_is_anonymous(vma) || is_vm_hugetlb_page(vma) ||
	     (vma->vm_file && shmem_mapping(vma->vm_file->f_mapping))))
		return pin_user_pages_remote(mm, start, 1, flags, page, NULL);
	return err == -EFAULT ? -EAGAIN : err;
}

int kfdp_umem_pin(struct mm_struct *mm, u64 addr, bool write,
		  struct page **page, void **kaddr, struct mm_struct **charged)
{
	unsigned int flags = FOLL_LONGTERM | (write ? FOLL_WRITE : 0);
	unsigned long start = addr & PAGE_MASK;
	long pinned;
	int r;

	/* One naturally aligned 64-bit word: never straddles a page. */
	if (!addr || !IS_ALIGNED(addr, sizeof(u64)) || addr >= TASK_SIZE_MAX)
		return -EFAULT;
	r = kfdp_umem_charge(charged);
	if (r)
		return r;
	if (!mmget_not_zero(mm)) {
		r = -ESRCH;
		goto uncharge;
	}
	if (mmap_read_lock_killable(mm)) {
		r = -EINTR;
		goto put;
	}
	/* Resident (a queue's indices are, once used): no fault at all. */
	pinned = pin_user_pages_remote(mm, start, 1, flags | FOLL_NOFAULT, page, NULL);
	if (pinned != 1)
		pinned = kfdp_umem_pin_faulting(mm, start, flags, page, pinned);
	mmap_read_unlock(mm);
	r = pinned == 1 ? 0 : pinned < 0 ? (int)pinned : -EFAULT;
put:
	/*
	 * Async: if the target exited meanwhile, this is the last user and
	 * its teardown (amdkfd's included) must not run in the caller's ioctl.
	 */
	mmput_async(mm);
	if (!r) {
		/* x86-64 and arm64 have no highmem: a pinned page stays mapped. */
		*kaddr = page_address(*page) + offset_in_page(addr);
		return 0;
	}
uncharge:
	kfdp_umem_uncharge(*charged);
	*charged = NULL;
	return r;
}

void kfdp_umem_unpin(struct page *page, bool dirty, struct mm_struct *charged)
{
	unpin_user_pages_dirty_lock(&page, 1, dirty);
	kfdp_umem_uncharge(charged);
}

/*
 * A pin keeps the page it pinned, not the address: a tenant that unmaps its
 * ring and maps new memory at the same address (an allocator handing a freed
 * range back to a re-created queue) leaves a watch reading the old page for
 * good. An interval notifier on the watched page tells the watch that the
 * address no longer maps what was pinned, so that it is pinned again.
 */
struct kfdp_umem_notice {
	struct mmu_interval_notifier sub;
	bool fired;
};

static bool kfdp_umem_invalidate(struct mmu_interval_notifier *sub,
				 const struct mmu_notifier_range *range,
				 unsigned long cur_seq)
{
	struct kfdp_umem_notice *n = container_of(sub, struct kfdp_umem_notice, sub);

	mmu_interval_set_seq(sub, cur_seq);
	switch (range->event) {
	case MMU_NOTIFY_PROTECTION_VMA:
	case MMU_NOTIFY_PROTECTION_PAGE:
	case MMU_NOTIFY_SOFT_DIRTY:
		/*
		 * mprotect(), fork()'s copy-on-write protection, soft-dirty
		 * tracking: the address keeps its page (fork copies a pinned
		 * page for the child, never takes it from the parent).
		 */
		return true;
	default:
		/* Unmapped, zapped, moved, or the mm torn down. */
		WRITE_ONCE(n->fired, true);
		return true;
	}
}

static const struct mmu_interval_notifier_ops kfdp_umem_notice_ops = {
	.invalidate = kfdp_umem_invalidate,
};

int kfdp_umem_notice_add(struct mm_struct *mm, u64 addr,
			 struct kfdp_umem_notice **out)
{
	struct kfdp_umem_notice *n;
	int r;

	*out = NULL;
	if (!addr || addr >= TASK_SIZE_MAX)
		return -EFAULT;
	n = kzalloc_obj(*n);
	if (!n)
		return -ENOMEM;
	if (!mmget_not_zero(mm)) {
		kfree(n);
		return -ESRCH;
	}
	/* Registers @mm's notifier list on first use (takes mmap_lock). */
	r = mmu_interval_notifier_insert(&n->sub, mm, addr & PAGE_MASK,
					 PAGE_SIZE, &kfdp_umem_notice_ops);
	/*
	 * An invalidation already under way when the notifier went in does
	 * not call it, and may clear the page's entry after the caller pins
	 * it: waiting for it to end here means the pin sees its result, and
	 * every later one calls the notifier.
	 */
	if (!r)
		mmu_interval_read_begin(&n->sub);
	mmput_async(mm);
	if (r) {
		kfree(n);
		return r;
	}
	*out = n;
	return 0;
}

bool kfdp_umem_notice_fired(const struct kfdp_umem_notice *n)
{
	return READ_ONCE(n->fired);
}

void kfdp_umem_notice_remove(struct kfdp_umem_notice *n)
{
	/* Waits for an invalidation in progress: process context only. */
	mmu_interval_notifier_remove(&n->sub);
	kfree(n);
}

int kfdp_eventfd_get(int fd, struct eventfd_ctx **out)
{
	struct eventfd_ctx *ctx = eventfd_ctx_fdget(fd);

	if (IS_ERR(ctx))
		return PTR_ERR(ctx);
	*out = ctx;
	return 0;
}

void kfdp_eventfd_signal(struct eventfd_ctx *ctx)
{
	eventfd_signal(ctx);
}

void kfdp_eventfd_put(struct eventfd_ctx *ctx)
{
	eventfd_ctx_put(ctx);
}

bool kfdp_user_copy_continue(void)
{
	cond_resched();
	return !fatal_signal_pending(current);
}
