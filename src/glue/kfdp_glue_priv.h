/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Shared by the glue's C files and its KUnit suite; sees amdkfd's private
 * types, so it must never be given to bindgen.
 */
#ifndef KFDP_GLUE_PRIV_H
#define KFDP_GLUE_PRIV_H

#include "kfd_priv.h"
#include "kfd_device_queue_manager.h"

#include "kfdp_glue.h"

/*
 * struct kfdp_target - a target process, pinned between ioctls.
 * @p:      the primary kfd_process. Valid while @mn (or, in the KUnit suite,
 *          the test itself) holds kfd's mmu_notifier subscription, whose
 *          last put drops kfd's reference on @p (amdkfd's free_notifier).
 * @mm:     @p's mm; its mm_struct stays allocated for the same reason, but
 *          mm_users is taken only for the length of one operation.
 * @mn:     our user reference on kfd's subscription, or NULL (KUnit).
 * @owner:  amdgpu's module, referenced while pinned, or NULL (KUnit).
 * @tgid:   the target's tgid in the attaching caller's pid namespace.
 */
struct kfdp_target {
	struct kfd_process *p;
	struct mm_struct *mm;
	struct mmu_notifier *mn;
	struct module *owner;
	pid_t tgid;
};

struct kfd_process_device *kfdp_pdd_by_gpu_id(struct kfd_process *p,
					      u32 gpu_id);
bool kfdp_srcversion_accepts(const char *running, const char *built);
int kfdp_check_layout(struct kfd_process *p, const struct module *owner);

/* Per-node state between calls (kfdp_nodes.c). */
extern unsigned int kfdp_min_preempt_interval_us;
void kfdp_node_prepare(u32 gpu_id);
int kfdp_node_claim_off(u32 gpu_id, bool check_only);
void kfdp_node_claim_on(u32 gpu_id);
void kfdp_node_defer(u32 gpu_id);
bool kfdp_node_deferred(u32 gpu_id, u64 *seq);
void kfdp_node_triggered(u32 gpu_id, u64 seq);

#endif /* KFDP_GLUE_PRIV_H */
