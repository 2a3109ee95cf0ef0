// SPDX-License-Identifier: GPL-2.0
/*
 * KUnit suite for the kfd_preempt C glue. Runs when the module is loaded on
 * a kernel with CONFIG_KUNIT.
 */

#include <kunit/test.h>
#include <linux/anon_inodes.h>
#include <linux/cred.h>
#include <linux/file.h>
#include <linux/fs.h>

#include "kfdp_glue.h"

static const struct file_operations kfdp_test_fops;

/*
 * Open an anonymous file as a caller whose effective capabilities are
 * empty but for CAP_SYS_NICE and CAP_SYS_ADMIN as asked: the file
 * keeps those credentials in f_cred, as an open of /dev/kfd_preempt would.
 */
static struct file *kfdp_test_open_as(struct kunit *test, bool sys_nice,
				      bool sys_admin)
{
	const struct cred *old;
	struct file *file;
	struct cred *cred;

	cred = prepare_creds();
	KUNIT_ASSERT_NOT_NULL(test, cred);
	cred->cap_effective = CAP_EMPTY_SET;
	if (sys_nice)
		cap_raise(cred->cap_effective, CAP_SYS_NICE);
	if (sys_admin)
		cap_raise(cred->cap_effective, CAP_SYS_ADMIN);

	old = override_creds(cred);
	file = anon_inode_getfile("kfdp-test", &kfdp_test_fops, NULL, O_RDONLY);
	revert_creds(old);
	put_cred(cred);

	KUNIT_ASSERT_FALSE(test, IS_ERR(file));
	return file;
}

static void kfdp_cap_sys_nice_allows(struct kunit *test)
{
	struct file *file = kfdp_test_open_as(test, true, false);

	KUNIT_EXPECT_TRUE(test, kfdp_file_may_preempt(file));
	fput(file);
}

static void kfdp_no_caps_refused(struct kunit *test)
{
	struct file *file = kfdp_test_open_as(test, false, false);

	KUNIT_EXPECT_FALSE(test, kfdp_file_may_preempt(file));
	fput(file);
}

/* CAP_SYS_ADMIN does not stand in for CAP_SYS_NICE. */
static void kfdp_cap_sys_admin_alone_refused(struct kunit *test)
{
	struct file *file = kfdp_test_open_as(test, false, true);

	KUNIT_EXPECT_FALSE(test, kfdp_file_may_preempt(file));
	fput(file);
}

static struct kunit_case kfdp_glue_cases[] = {
	KUNIT_CASE(kfdp_cap_sys_nice_allows),
	KUNIT_CASE(kfdp_no_caps_refused),
	KUNIT_CASE(kfdp_cap_sys_admin_alone_refused),
	{}
};

static struct kunit_suite kfdp_glue_suite = {
	.name = "kfdp_glue",
	.test_cases = kfdp_glue_cases,
};

kunit_test_suite(kfdp_glue_suite);
