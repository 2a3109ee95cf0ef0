// SPDX-License-Identifier: GPL-2.0
/*
 * Who may open /dev/kfd_preempt: the node is 0600 root (0660 to the group a udev
 * rule names, never to others), and open() itself
 * requires CAP_SYS_NICE in the initial user namespace, checked against the
 * opener's credentials (Documentation/security.rst).
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <linux/capability.h>

#include "kselftest_harness.h"
#include "kfdp_test.h"

#define NOBODY 65534

/* Clear one capability from the effective and permitted sets. */
static int drop_cap(int cap)
{
	struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct data[2];

	if (syscall(SYS_capget, &hdr, data))
		return -1;
	data[cap / 32].effective &= ~(1u << (cap % 32));
	data[cap / 32].permitted &= ~(1u << (cap % 32));
	return syscall(SYS_capset, &hdr, data);
}

static int become_nobody(void)
{
	return setresgid(NOBODY, NOBODY, NOBODY) || setresuid(NOBODY, NOBODY, NOBODY);
}

/*
 * A private node for the same device, open to everyone, so that the
 * module's own capability check is what decides, not file permissions.
 * It lives in /dev (devtmpfs): /tmp is often a tmpfs mounted nodev (systemd's
 * tmp.mount), where opening any device node fails with EACCES.
 */
FIXTURE(node) {
	char path[64];
};

FIXTURE_SETUP(node)
{
	struct stat st;

	self->path[0] = 0;
	if (stat(KFDP_DEV, &st) && errno == ENOENT)
		SKIP(return, KFDP_DEV " does not exist: kfd_preempt is not loaded");
	ASSERT_EQ(0, geteuid()) TH_LOG("these tests must run as root");
	snprintf(self->path, sizeof(self->path), "/dev/kfdp-rights-test-%d", getpid());
	ASSERT_EQ(0, mknod(self->path, S_IFCHR | 0666, st.st_rdev));
	ASSERT_EQ(0, chmod(self->path, 0666));
}

FIXTURE_TEARDOWN(node)
{
	if (self->path[0])
		unlink(self->path);
}

/*
 * The node is root's, and nobody else's: the kernel creates it 0600 root; a
 * udev rule (the package's 70-kfd-preempt.rules) may give it to a group of
 * schedulers, 0660, but never to others.
 */
TEST_F(node, devnode_root_and_group_only)
{
	struct stat st;

	ASSERT_EQ(0, stat(KFDP_DEV, &st));
	EXPECT_TRUE(S_ISCHR(st.st_mode));
	EXPECT_EQ(0, st.st_uid);
	EXPECT_EQ(st.st_gid ? 0660 : 0600, st.st_mode & 07777);
}

TEST_F(node, root_may_open)
{
	EXPECT_EQ(0, kfdp_open_errno(KFDP_DEV));
	EXPECT_EQ(0, kfdp_open_errno(self->path));
}

/* Root without CAP_SYS_NICE: EPERM from the module. */
TEST_F(node, no_cap_sys_nice_eperm)
{
	ASSERT_EQ(0, drop_cap(CAP_SYS_NICE));
	EXPECT_EQ(EPERM, kfdp_open_errno(self->path));
	EXPECT_EQ(EPERM, kfdp_open_errno(KFDP_DEV));
}

/* An unprivileged uid cannot open the real node at all. */
TEST_F(node, unprivileged_uid_cannot_open)
{
	ASSERT_EQ(0, become_nobody());
	EXPECT_EQ(EACCES, kfdp_open_errno(KFDP_DEV));
	EXPECT_EQ(EPERM, kfdp_open_errno(self->path));
}

/*
 * CAP_SYS_NICE in a user namespace the caller created does not count: the
 * module checks the initial user namespace.
 */
TEST_F(node, user_namespace_cap_refused)
{
	ASSERT_EQ(0, become_nobody());
	if (unshare(CLONE_NEWUSER))
		SKIP(return, "unshare(CLONE_NEWUSER): %s", strerror(errno));
	EXPECT_EQ(EPERM, kfdp_open_errno(self->path));
}

/* The capability is the opener's: an fd opened by a capable process keeps
 * working after the process drops CAP_SYS_NICE.
 */
TEST_F(node, fd_keeps_openers_rights)
{
	struct kfdp_info info;
	int fd = open(self->path, O_RDWR | O_CLOEXEC);

	ASSERT_LE(0, fd);
	ASSERT_EQ(0, drop_cap(CAP_SYS_NICE));
	EXPECT_EQ(0, kfdp_ioctl_errno(fd, KFDP_IOC_INFO, &info));
	close(fd);
}

TEST_HARNESS_MAIN
