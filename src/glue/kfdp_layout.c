// SPDX-License-Identifier: GPL-2.0
/*
 * The layout gate's C half (Documentation/design.rst, "amdgpu identity"):
 * where this build of the glue places every amdkfd field it reads or
 * writes, as the compiler laid them out from the amdgpu source it was given,
 * and the running kernel's BTF to compare them with (src/layout.rs). Only
 * this file knows both the private amdkfd types and the file reading the
 * kernel crate has no abstraction for.
 */

#include <linux/fs.h>
#include <linux/fs_struct.h>
#include <linux/magic.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/namei.h>
#include <linux/notifier.h>
#include <linux/pid.h>
#include <linux/pid_namespace.h>
#include <linux/sched/task.h>
#include <linux/stddef.h>

#include "kfdp_glue_priv.h"

#define KFDP_FIELD(type, member) \
	{ #type, #member, offsetof(struct type, member), sizeof_field(struct type, member) }

static const struct kfdp_glue_field kfdp_fields[] = {
#include "kfdp_layout_fields.h"
};

const struct kfdp_glue_field *kfdp_layout_fields(u32 *n)
{
	*n = ARRAY_SIZE(kfdp_fields);
	return kfdp_fields;
}

/* Larger than any vmlinux BTF (Debian's is about 6 MiB). */
#define KFDP_BTF_MAX (64 << 20)

/*
 * The root directory of the initial pid namespace's init, the system's
 * root whatever namespaces the caller is in. Its fs, not init_task's:
 * since 7.3 the kernel's own fs_struct is no longer init's.
 */
static int kfdp_init_root(struct path *root)
{
	struct task_struct *init;
	int r = -ESRCH;

	rcu_read_lock();
	init = pid_task(find_pid_ns(1, &init_pid_ns), PIDTYPE_PID);
	if (init)
		get_task_struct(init);
	rcu_read_unlock();
	if (!init)
		return r;
	task_lock(init);
	if (init->fs) {
		get_fs_root(init->fs, root);
		r = 0;
	}
	task_unlock(init);
	put_task_struct(init);
	return r;
}

/*
 * A plain read, not kernel_read_file(): its LSM hook wants a purpose this
 * read has none of (READING_UNKNOWN makes IPE warn). The path resolves from
 * init's root, as kernel_read_file_from_path_initns() does, never in the
 * caller's mount namespace: an ATTACH from a user namespace could
 * otherwise bind-mount a blob of its own over /sys/kernel/btf, and the
 * verdict is kept for every later caller. What is opened must be sysfs.
 */
int kfdp_btf_read(const char *name, void **buf, size_t *size)
{
	char path[MODULE_NAME_LEN + 16];
	struct path root;
	struct file *f;
	loff_t len, pos = 0;
	void *data;
	int r = 0;

	if (snprintf(path, sizeof(path), "/sys/kernel/btf/%s", name) >= sizeof(path))
		return -ENAMETOOLONG;
	r = kfdp_init_root(&root);
	if (r)
		return r;
	f = file_open_root(&root, path, O_RDONLY, 0);
	path_put(&root);
	if (IS_ERR(f))
		return PTR_ERR(f);
	if (file_inode(f)->i_sb->s_magic != SYSFS_MAGIC) {
		r = -EINVAL;
		goto out;
	}
	len = i_size_read(file_inode(f));
	if (len <= 0 || len > KFDP_BTF_MAX) {
		r = -EFBIG;
		goto out;
	}
	data = kvmalloc(len, GFP_KERNEL);
	if (!data) {
		r = -ENOMEM;
		goto out;
	}
	while (pos < len) {
		ssize_t n = kernel_read(f, data + pos, len - pos, &pos);

		if (n <= 0) {
			r = n < 0 ? n : -EIO;
			kvfree(data);
			goto out;
		}
	}
	*buf = data;
	*size = len;
out:
	filp_close(f, NULL);
	return r;
}

void kfdp_btf_free(void *buf)
{
	kvfree(buf);
}

/*
 * Bumped whenever a module named amdgpu comes or goes, so that a verdict
 * about one amdgpu is never taken for another's.
 */
static atomic64_t kfdp_amdgpu_generation = ATOMIC64_INIT(0);

static int kfdp_layout_module_event(struct notifier_block *nb, unsigned long state,
				    void *data)
{
	const struct module *mod = data;

	if (!strcmp(mod->name, "amdgpu") &&
	    (state == MODULE_STATE_COMING || state == MODULE_STATE_GOING))
		atomic64_inc(&kfdp_amdgpu_generation);
	return NOTIFY_DONE;
}

static struct notifier_block kfdp_layout_nb = {
	.notifier_call = kfdp_layout_module_event,
};

u64 kfdp_amdgpu_generation_now(void)
{
	return atomic64_read(&kfdp_amdgpu_generation);
}

int kfdp_layout_register(void)
{
	return register_module_notifier(&kfdp_layout_nb);
}

void kfdp_layout_unregister(void)
{
	unregister_module_notifier(&kfdp_layout_nb);
}
