// SPDX-License-Identifier: GPL-2.0
/*
 * Finding, verifying and pinning a target process (Documentation/design.rst,
 * "Targets and pins"). amdkfd exports nothing, so a target is reached through a
 * file that is proved to be an open /dev/kfd of the amdgpu.ko this module was
 * built against, and is kept alive through kfd's own mmu_notifier subscription
 * instead of raw krefs, whose release function is static.
 */

#include <linux/fdtable.h>
#include <linux/file.h>
#include <linux/mmu_notifier.h>
#include <linux/module.h>
#include <linux/pid.h>
#include <linux/sched/mm.h>
#include <linux/slab.h>

#include "kfdp_glue_priv.h"

/* The magic of kfd's private pseudo-filesystem (amdkfd/kfd_chardev.c). */
#define KFDP_KFD_FS_MAGIC 0x4b464400

static int kfdp_check_amdgpu_identity(const struct module *owner)
{
	const char *built = kfdp_amdgpu_built_srcversion();

	if (kfdp_srcversion_accepts(owner->srcversion, built))
		return 0;
	pr_warn_ratelimited("kfd_preempt: refusing /dev/kfd of amdgpu srcversion %s: built against amdgpu srcversion %s; rebuild kfd_preempt against the running amdgpu's source\n",
			    owner->srcversion, built);
	return -EINVAL;
}

/* A pointer the slab (kmalloc) would have returned: amdkfd allocates these so. */
static bool kfdp_plausible(const void *ptr)
{
	return ptr && virt_addr_valid(ptr);
}

/*
 * Structural invariants of amdkfd's objects that a struct layout other than
 * the one compiled in breaks (Documentation/design.rst, "amdgpu identity"):
 * checked before the glue writes anything, and before it follows a pointer
 * it has not proved plausible. @owner is the amdgpu module that owns the
 * /dev/kfd file, or NULL (the KUnit suites) to skip the ops check.
 */
int kfdp_check_layout(struct kfd_process *p, const struct module *owner)
{
	u32 i;

	if (!kfdp_plausible(p) || p->n_pdds > MAX_GPU_INSTANCE)
		return -EINVAL;
	for (i = 0; i < p->n_pdds; i++) {
		struct kfd_process_device *pdd = p->pdds[i];
		struct device_queue_manager *dqm;

		if (!kfdp_plausible(pdd) || pdd->process != p ||
		    !kfdp_plausible(pdd->dev))
			return -EINVAL;
		dqm = pdd->dev->dqm;
		if (!kfdp_plausible(dqm) || dqm->dev != pdd->dev ||
		    pdd->qpd.dqm != dqm)
			return -EINVAL;
		/* The ops the glue calls are amdgpu's own functions. */
		if (owner &&
		    (!within_module((unsigned long)dqm->ops.update_queue, owner) ||
		     !within_module((unsigned long)dqm->ops.evict_process_queues, owner) ||
		     !within_module((unsigned long)dqm->ops.restore_process_queues, owner)))
			return -EINVAL;
	}
	return 0;
}

/*
 * Is @f an open /dev/kfd? kfd_fops and kfd's device number are static, so
 * this checks what only kfd_open() produces: a character device of a module
 * named amdgpu whose f_mapping was switched to kfd's pseudo-filesystem.
 */
static int kfdp_check_kfd_file(struct file *f)
{
	const struct module *owner = f->f_op ? f->f_op->owner : NULL;
	struct inode *inode = file_inode(f);
	struct super_block *sb;

	if (!S_ISCHR(inode->i_mode) || iminor(inode) != 0)
		return -EINVAL;
	if (!owner || strcmp(owner->name, "amdgpu"))
		return -EINVAL;
	if (!f->f_mapping || !f->f_mapping->host)
		return -EINVAL;
	sb = f->f_mapping->host->i_sb;
	if (sb->s_magic != KFDP_KFD_FS_MAGIC || !sb->s_type ||
	    strcmp(sb->s_type->name, "kfd"))
		return -EINVAL;
	return kfdp_check_amdgpu_identity(owner);
}

/* Pins the process behind a verified kfd file. */
static int kfdp_target_pin(struct file *f, struct kfdp_target **out)
{
	struct kfd_process *p = READ_ONCE(f->private_data);
	struct module *owner = f->f_op->owner;
	struct mmu_notifier *mn;
	struct kfdp_target *t;
	struct mm_struct *mm;
	int r;

	if (!p)
		return -ENOENT;
	r = kfdp_check_layout(p, owner);
	if (r) {
		pr_warn_ratelimited("kfd_preempt: refusing /dev/kfd: amdkfd's objects do not have the layout this module was built for; rebuild it against the running amdgpu's source\n");
		return r;
	}
	/* Secondary contexts are refused, as amdkfd's debugger does. */
	if (p->context_id != KFD_CONTEXT_ID_PRIMARY)
		return -EINVAL;

	/* mm_users blocks kfd's teardown (exit_mmap) while we set up. */
	mm = get_task_mm(p->lead_thread);
	if (!mm)
		return -ESRCH;
	if (mm != READ_ONCE(p->mm)) {
		r = -ESRCH;
		goto out_mmput;
	}

	t = kzalloc(sizeof(*t), GFP_KERNEL);
	if (!t) {
		r = -ENOMEM;
		goto out_mmput;
	}
	if (!try_module_get(owner)) {
		r = -ENODEV;
		goto out_free;
	}
	/* Only users++ on kfd's existing subscription; it keeps p alive. */
	mn = mmu_notifier_get(p->mmu_notifier.ops, mm);
	if (IS_ERR(mn)) {
		r = PTR_ERR(mn);
		goto out_module;
	}
	if (mn != &p->mmu_notifier) {
		mmu_notifier_put(mn);
		r = -ESRCH;
		goto out_module;
	}

	mmgrab(mm);
	t->p = p;
	t->mm = mm;
	t->mn = mn;
	t->owner = owner;
	t->tgid = task_tgid_vnr(p->lead_thread);
	*out = t;
	mmput_async(mm);
	return 0;

out_module:
	module_put(owner);
out_free:
	kfree(t);
out_mmput:
	mmput_async(mm);
	return r;
}

int kfdp_target_from_fd(int fd, struct kfdp_target **out)
{
	struct file *f = fget(fd);
	int r;

	if (!f)
		return -EBADF;
	r = kfdp_check_kfd_file(f);
	if (!r)
		r = kfdp_target_pin(f, out);
	fput(f);
	return r;
}

/*
 * Is the verified kfd file @f bound to the KFD process of thread group
 * leader @leader? Its lead_thread is read only after the layout check; a
 * file that fails it is taken, for kfdp_target_pin() to refuse and say so.
 */
static bool kfdp_file_is_of(struct file *f, struct task_struct *leader)
{
	struct kfd_process *p = READ_ONCE(f->private_data);

	if (!p)
		return false;
	if (kfdp_check_layout(p, f->f_op->owner))
		return true;
	return READ_ONCE(p->lead_thread) == leader;
}

int kfdp_target_from_pid(int nr, struct kfdp_target **out)
{
	struct task_struct *task;
	unsigned int fd = 0;
	struct pid *pid;
	struct file *f;
	int r = -ENOENT;

	if (nr <= 0)
		return -ESRCH;
	pid = find_get_pid(nr);
	if (!pid)
		return -ESRCH;
	task = get_pid_task(pid, PIDTYPE_TGID);
	put_pid(pid);
	if (!task)
		return -ESRCH;

	/*
	 * amdkfd has no exported lookup: find the process's own /dev/kfd. A
	 * forked child also holds its parent's (kfd_open() bound that file
	 * to the parent's kfd_process, Documentation/simulated-node.rst,
	 * "Processes"), so a file counts only if its process is @task's.
	 */
	for (; (f = fget_task_next(task, &fd)); fd++) {
		if (!kfdp_check_kfd_file(f) && kfdp_file_is_of(f, task)) {
			r = kfdp_target_pin(f, out);
			fput(f);
			break;
		}
		fput(f);
	}
	put_task_struct(task);
	return r;
}

void kfdp_target_put(struct kfdp_target *t)
{
	if (!t)
		return;
	if (t->mn)
		mmu_notifier_put(t->mn);
	if (t->owner)
		module_put(t->owner);
	if (t->mn)
		mmdrop(t->mm);
	kfree(t);
}

void kfdp_target_info(const struct kfdp_target *t,
		      struct kfdp_glue_target_info *info)
{
	info->key = (u64)(uintptr_t)t->p;
	info->tgid = t->tgid;
	info->num_gpus = t->p->n_pdds;
}

/* kfd's teardown clears p->mm (amdkfd/kfd_process.c) when the target exits. */
bool kfdp_target_alive(const struct kfdp_target *t)
{
	return READ_ONCE(t->p->mm) == t->mm;
}

/* The target holds an mm_count on t->mm, so the pointer stays valid. */
struct mm_struct *kfdp_target_mm(const struct kfdp_target *t)
{
	return kfdp_target_alive(t) ? t->mm : NULL;
}

int kfdp_target_gpu_ids(const struct kfdp_target *t, u32 *ids, u32 cap)
{
	u32 i;

	/* p->pdds[] and n_pdds never change after the process is created. */
	for (i = 0; i < t->p->n_pdds && i < cap; i++)
		ids[i] = t->p->pdds[i]->user_gpu_id;
	return i;
}

struct kfd_process_device *kfdp_pdd_by_gpu_id(struct kfd_process *p,
					      u32 gpu_id)
{
	u32 i;

	for (i = 0; i < p->n_pdds; i++)
		if (p->pdds[i]->user_gpu_id == gpu_id)
			return p->pdds[i];
	return NULL;
}
