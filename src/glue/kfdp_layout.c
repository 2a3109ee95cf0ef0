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
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/notifier.h>
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
 * A plain read, not kernel_read_file(): its LSM hook wants a purpose this
 * read has none of (READING_UNKNOWN makes IPE warn). The path resolves in
 * the caller's mount namespace: modprobe's at load.
 */
int kfdp_btf_read(const char *name, void **buf, size_t *size)
{
	char path[MODULE_NAME_LEN + 16];
	struct file *f;
	loff_t len, pos = 0;
	void *data;
	int r = 0;

	if (snprintf(path, sizeof(path), "/sys/kernel/btf/%s", name) >= sizeof(path))
		return -ENAMETOOLONG;
	f = filp_open(path, O_RDONLY, 0);
	if (IS_ERR(f))
		return PTR_ERR(f);
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
