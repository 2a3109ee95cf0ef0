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
#include <linux/mm.h>
#include <linux/sched/mm.h>
#include <linux/sched/signal.h>

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
	pinned = pin_user_pages_remote(mm, start, 1, flags, page, NULL);
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
