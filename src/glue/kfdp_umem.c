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

#include "kfdp_glue.h"

int kfdp_umem_pin(struct mm_struct *mm, u64 addr, bool write,
		  struct page **page, void **kaddr)
{
	unsigned int flags = FOLL_LONGTERM | (write ? FOLL_WRITE : 0);
	unsigned long start = addr & PAGE_MASK;
	long pinned;

	/* One naturally aligned 64-bit word: never straddles a page. */
	if (!addr || !IS_ALIGNED(addr, sizeof(u64)) || addr >= TASK_SIZE_MAX)
		return -EFAULT;
	if (!mmget_not_zero(mm))
		return -ESRCH;
	mmap_read_lock(mm);
	pinned = pin_user_pages_remote(mm, start, 1, flags, page, NULL);
	mmap_read_unlock(mm);
	mmput(mm);
	if (pinned != 1)
		return pinned < 0 ? (int)pinned : -EFAULT;
	/* x86-64 and arm64 have no highmem: a pinned page stays mapped. */
	*kaddr = page_address(*page) + offset_in_page(addr);
	return 0;
}

void kfdp_umem_unpin(struct page *page, bool dirty)
{
	unpin_user_pages_dirty_lock(&page, 1, dirty);
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
