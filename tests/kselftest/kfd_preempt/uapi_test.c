// SPDX-License-Identifier: GPL-2.0
/*
 * kfd_preempt: every rejection path of the v1 ioctls that does not need an
 * AMD GPU (ATTACH of wrong files and pids, malformed DETACH, QUERY, PREEMPT,
 * RESUME, FREEZE, THAW), and the hardware-only checks, which SKIP when no
 * KFD process can be created (Documentation/testing.rst).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <signal.h>
#include <unistd.h>
#include <linux/capability.h>

#include "kselftest_harness.h"
#include "kfdp_test.h"

FIXTURE(owner) {
	int fd;
	__u64 caps;
};

FIXTURE_SETUP(owner)
{
	struct kfdp_info info = { 0 };

	self->fd = open(KFDP_DEV, O_RDWR | O_CLOEXEC);
	if (self->fd < 0 && errno == ENOENT)
		SKIP(return, KFDP_DEV " does not exist: kfd_preempt is not loaded");
	ASSERT_LE(0, self->fd) TH_LOG("open " KFDP_DEV ": %s", strerror(errno));
	ASSERT_EQ(0, ioctl(self->fd, KFDP_IOC_INFO, &info));
	self->caps = info.caps;
}

FIXTURE_TEARDOWN(owner)
{
	if (self->fd >= 0)
		close(self->fd);
}

static int attach_fd(int owner, int fd)
{
	struct kfdp_attach a = { .kind = KFDP_TARGET_KFD_FD, .fd = fd };

	return kfdp_ioctl_errno(owner, KFDP_IOC_ATTACH, &a);
}

static int attach_pid(int owner, int pid)
{
	struct kfdp_attach a = { .kind = KFDP_TARGET_PID, .fd = -1, .pid = pid };

	return kfdp_ioctl_errno(owner, KFDP_IOC_ATTACH, &a);
}

TEST_F(owner, attach_not_an_fd)
{
	int fd = open("/dev/null", O_RDONLY);

	EXPECT_EQ(EBADF, attach_fd(self->fd, -1));
	EXPECT_EQ(EBADF, attach_fd(self->fd, 1 << 20));
	ASSERT_LE(0, fd);
	close(fd);
	EXPECT_EQ(EBADF, attach_fd(self->fd, fd)) TH_LOG("a closed fd");
}

TEST_F(owner, attach_wrong_files)
{
	int pipefd[2], sv[2];
	int null = open("/dev/null", O_RDWR);
	int reg = open("/proc/self/status", O_RDONLY);
	int other = open(KFDP_DEV, O_RDWR);

	ASSERT_EQ(0, pipe(pipefd));
	ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
	ASSERT_LE(0, null);
	ASSERT_LE(0, reg);
	ASSERT_LE(0, other);

	EXPECT_EQ(EINVAL, attach_fd(self->fd, null)) TH_LOG("/dev/null");
	EXPECT_EQ(EINVAL, attach_fd(self->fd, pipefd[0])) TH_LOG("a pipe");
	EXPECT_EQ(EINVAL, attach_fd(self->fd, sv[0])) TH_LOG("a socket");
	EXPECT_EQ(EINVAL, attach_fd(self->fd, reg)) TH_LOG("a regular file");
	EXPECT_EQ(EINVAL, attach_fd(self->fd, self->fd)) TH_LOG("our own device");
	EXPECT_EQ(EINVAL, attach_fd(self->fd, other)) TH_LOG("another owner");

	close(pipefd[0]);
	close(pipefd[1]);
	close(sv[0]);
	close(sv[1]);
	close(null);
	close(reg);
	close(other);
}

TEST_F(owner, attach_malformed)
{
	int null = open("/dev/null", O_RDWR);
	struct kfdp_attach a;

	ASSERT_LE(0, null);
	memset(&a, 0, sizeof(a));
	a.kind = 99;
	EXPECT_EQ(EINVAL, kfdp_ioctl_errno(self->fd, KFDP_IOC_ATTACH, &a)) TH_LOG("kind");
	memset(&a, 0, sizeof(a));
	a.kind = KFDP_TARGET_KFD_FD;
	a.fd = null;
	a.flags = 1;
	EXPECT_EQ(EINVAL, kfdp_ioctl_errno(self->fd, KFDP_IOC_ATTACH, &a)) TH_LOG("flags");
	a.flags = 0;
	a.reserved0 = 1;
	EXPECT_EQ(EINVAL, kfdp_ioctl_errno(self->fd, KFDP_IOC_ATTACH, &a)) TH_LOG("reserved0");
	a.reserved0 = 0;
	a.reserved1 = 1;
	EXPECT_EQ(EINVAL, kfdp_ioctl_errno(self->fd, KFDP_IOC_ATTACH, &a)) TH_LOG("reserved1");
	a.reserved1 = 0;
	a.pid = getpid();
	EXPECT_EQ(EINVAL, kfdp_ioctl_errno(self->fd, KFDP_IOC_ATTACH, &a)) TH_LOG("pid with an fd");
	EXPECT_EQ(EFAULT, kfdp_ioctl_errno(self->fd, KFDP_IOC_ATTACH, NULL));
	close(null);
}

/* The simulated kind exists only with sim_nodes=N. */
TEST_F(owner, attach_sim_without_sim_nodes)
{
	struct kfdp_attach a = { .kind = KFDP_TARGET_SIM_FD, .fd = 0 };

	if (self->caps & KFDP_CAP_SIM)
		SKIP(return, "simulated nodes are enabled");
	EXPECT_EQ(EOPNOTSUPP, kfdp_ioctl_errno(self->fd, KFDP_IOC_ATTACH, &a));
}

/* A PID attach names no descriptor: fd is -1, as the header says. */
TEST_F(owner, attach_pid_fd_not_minus_one)
{
	struct kfdp_attach a = { .kind = KFDP_TARGET_PID, .fd = 0, .pid = getpid() };

	EXPECT_EQ(EINVAL, kfdp_ioctl_errno(self->fd, KFDP_IOC_ATTACH, &a));
	a.fd = 3;
	EXPECT_EQ(EINVAL, kfdp_ioctl_errno(self->fd, KFDP_IOC_ATTACH, &a));
}

TEST_F(owner, attach_pid_mode_off)
{
	if (self->caps & KFDP_CAP_PID)
		SKIP(return, "loaded with pid_attach=1");
	EXPECT_EQ(EOPNOTSUPP, attach_pid(self->fd, getpid()));
}

/* Keeps only CAP_SYS_NICE: enough to use the device, not to attach by pid. */
static int drop_to_sys_nice(void)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[2] = { 0 };

	d[0].effective = d[0].permitted = 1u << CAP_SYS_NICE;
	return syscall(SYS_capset, &h, d);
}

TEST_F(owner, attach_pid_mode_on)
{
	pid_t child;
	int status;

	if (!(self->caps & KFDP_CAP_PID))
		SKIP(return, "loaded without pid_attach=1");
	EXPECT_EQ(ESRCH, attach_pid(self->fd, 0));
	EXPECT_EQ(ESRCH, attach_pid(self->fd, -5));
	EXPECT_EQ(ESRCH, attach_pid(self->fd, 0x3ffffff0)) TH_LOG("no such pid");
	EXPECT_EQ(ENOENT, attach_pid(self->fd, getpid())) TH_LOG("no KFD state");
	EXPECT_EQ(ENOENT, attach_pid(self->fd, 2)) TH_LOG("a kernel thread");

	child = fork();
	ASSERT_LE(0, child);
	if (child == 0) {
		if (drop_to_sys_nice())
			_exit(2);
		_exit(attach_pid(self->fd, getpid()) == EPERM ? 0 : 1);
	}
	ASSERT_EQ(child, waitpid(child, &status, 0));
	EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
		TH_LOG("without CAP_SYS_ADMIN: EPERM expected");
}

/* Needs an AMD GPU: a KFD process exists only when /dev/kfd opens. */
TEST_F(owner, attach_kfd_fd_hardware)
{
	struct kfdp_attach a = { .kind = KFDP_TARGET_KFD_FD };
	struct kfdp_attach again;
	struct kfdp_detach d = { 0 };
	int kfd = open("/dev/kfd", O_RDWR | O_CLOEXEC);

	if (kfd < 0)
		SKIP(return, "open(/dev/kfd): %s: no KFD process can be created here (no AMD GPU)",
		     strerror(errno));
	a.fd = kfd;
	ASSERT_EQ(0, kfdp_ioctl_errno(self->fd, KFDP_IOC_ATTACH, &a));
	EXPECT_NE(0, a.handle);
	EXPECT_EQ(getpid(), a.tgid);
	EXPECT_LT(0, a.num_gpus);
	again = (struct kfdp_attach){ .kind = KFDP_TARGET_KFD_FD, .fd = kfd };
	ASSERT_EQ(0, kfdp_ioctl_errno(self->fd, KFDP_IOC_ATTACH, &again));
	EXPECT_EQ(a.handle, again.handle) TH_LOG("same process, same handle");
	d.handle = a.handle;
	EXPECT_EQ(0, kfdp_ioctl_errno(self->fd, KFDP_IOC_DETACH, &d));
	EXPECT_EQ(EINVAL, kfdp_ioctl_errno(self->fd, KFDP_IOC_DETACH, &d));
	close(kfd);
}

TEST_F(owner, detach_malformed)
{
	struct kfdp_detach d = { .handle = 12345 };

	EXPECT_EQ(EINVAL, kfdp_ioctl_errno(self->fd, KFDP_IOC_DETACH, &d)) TH_LOG("unknown handle");
	d.flags = 1;
	EXPECT_EQ(EINVAL, kfdp_ioctl_errno(self->fd, KFDP_IOC_DETACH, &d)) TH_LOG("flags");
	d.flags = 0;
	d.reserved = 1;
	EXPECT_EQ(EINVAL, kfdp_ioctl_errno(self->fd, KFDP_IOC_DETACH, &d)) TH_LOG("reserved");
}

TEST_F(owner, query_malformed)
{
	struct kfdp_queue_info qi[2];
	struct kfdp_query q = {
		.handle = 7, .entries_ptr = (uintptr_t)qi,
		.entry_size = sizeof(qi[0]), .capacity = 2,
	};

	EXPECT_EQ(EINVAL, kfdp_ioctl_errno(self->fd, KFDP_IOC_QUERY, &q)) TH_LOG("unknown handle");
	q.entry_size = sizeof(qi[0]) - 8;
	EXPECT_EQ(EINVAL, kfdp_ioctl_errno(self->fd, KFDP_IOC_QUERY, &q)) TH_LOG("short entries");
	q.entry_size = sizeof(qi[0]);
	q.reserved[1] = 1;
	EXPECT_EQ(EINVAL, kfdp_ioctl_errno(self->fd, KFDP_IOC_QUERY, &q)) TH_LOG("reserved");
}

TEST_F(owner, freeze_malformed)
{
	struct kfdp_freeze f = { .handle = 3 };

	EXPECT_EQ(EINVAL, kfdp_ioctl_errno(self->fd, KFDP_IOC_FREEZE, &f)) TH_LOG("unknown handle");
	EXPECT_EQ(EINVAL, kfdp_ioctl_errno(self->fd, KFDP_IOC_THAW, &f)) TH_LOG("unknown handle");
	f.flags = 1;
	EXPECT_EQ(EINVAL, kfdp_ioctl_errno(self->fd, KFDP_IOC_FREEZE, &f)) TH_LOG("flags");
}

static int batch(int fd, unsigned long cmd, struct kfdp_batch *b)
{
	return kfdp_ioctl_errno(fd, cmd, b);
}

TEST_F(owner, batch_malformed_whole_call)
{
	struct kfdp_queue_ref refs[2] = { 0 };
	struct kfdp_batch b = {
		.entries_ptr = (uintptr_t)refs, .num_entries = 2,
		.entry_size = sizeof(refs[0]),
	};

	b.flags = 1u << 7;
	EXPECT_EQ(EINVAL, batch(self->fd, KFDP_IOC_PREEMPT, &b)) TH_LOG("unknown flag");
	b.flags = 0;
	b.reserved[0] = 1;
	EXPECT_EQ(EINVAL, batch(self->fd, KFDP_IOC_PREEMPT, &b)) TH_LOG("reserved");
	b.reserved[0] = 0;
	b.entry_size = 8;
	EXPECT_EQ(EINVAL, batch(self->fd, KFDP_IOC_RESUME, &b)) TH_LOG("entry_size");
	b.entry_size = sizeof(refs[0]);
	b.lease_ms = 10;
	EXPECT_EQ(EINVAL, batch(self->fd, KFDP_IOC_RESUME, &b)) TH_LOG("lease on resume");
	b.lease_ms = 0;
	b.num_entries = KFDP_MAX_BATCH + 1;
	b.entries_ptr = 0;
	EXPECT_EQ(E2BIG, batch(self->fd, KFDP_IOC_PREEMPT, &b)) TH_LOG("before any copy");
	b.num_entries = 2;
	EXPECT_EQ(EFAULT, batch(self->fd, KFDP_IOC_PREEMPT, &b)) TH_LOG("NULL entries");
	EXPECT_EQ(EFAULT, batch(self->fd, KFDP_IOC_PREEMPT, NULL));
}

/* entry_size > 16: the tail must be zero in, and is left alone out. */
TEST_F(owner, batch_entry_tail)
{
	struct { struct kfdp_queue_ref r; __u64 tail; } e[1] = { 0 };
	struct kfdp_batch b = {
		.entries_ptr = (uintptr_t)e, .num_entries = 1, .entry_size = sizeof(e[0]),
	};

	e[0].tail = 1;
	EXPECT_EQ(E2BIG, batch(self->fd, KFDP_IOC_PREEMPT, &b));
	e[0].tail = 0;
	e[0].r.handle = 42;
	ASSERT_EQ(0, batch(self->fd, KFDP_IOC_PREEMPT, &b));
	EXPECT_EQ(-EINVAL, e[0].r.status);
	EXPECT_EQ(0, e[0].tail);
}

/*
 * entry_size is the caller's, up to 4 GiB: 16 entries 4 GiB apart are 64 GiB
 * of zero tail to check. The call must stay killable: a child makes it
 * over a read-only mapping of zero pages and is killed 300 ms in. Without
 * the check for fatal signals the child would read for minutes; the bound
 * of 20 s is only there to fail rather than hang.
 */
TEST_F(owner, batch_huge_zero_tail_is_killable)
{
	const size_t span = 16ull << 32;
	int up[2], status = 0, waited_ms = 0;
	pid_t child, r = 0;
	char b;

	ASSERT_EQ(0, pipe(up));
	child = fork();
	ASSERT_LE(0, child);
	if (child == 0) {
		void *m = mmap(NULL, span, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
			       -1, 0);
		struct kfdp_batch bh = {
			.entries_ptr = (uintptr_t)m, .num_entries = 16, .entry_size = 0xffffffffu,
		};

		if (m == MAP_FAILED || write(up[1], "x", 1) != 1)
			_exit(2);
		ioctl(self->fd, KFDP_IOC_PREEMPT, &bh);
		_exit(3);
	}
	close(up[1]);
	ASSERT_EQ(1, read(up[0], &b, 1)) TH_LOG("the child could not map 64 GiB");
	close(up[0]);
	usleep(300 * 1000);
	kill(child, SIGKILL);
	while (waited_ms < 20000 && (r = waitpid(child, &status, WNOHANG)) == 0) {
		usleep(10 * 1000);
		waited_ms += 10;
	}
	EXPECT_EQ(child, r) TH_LOG("the killed child is still in the ioctl after 20 s");
	EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	if (r != child)
		waitpid(child, &status, 0);
}

/*
 * Entries the engine refuses: per-entry statuses, the call succeeds,
 * duplicates are KFDP_R_ALREADY, and nothing reaches a GPU.
 */
TEST_F(owner, batch_per_entry_statuses)
{
	struct kfdp_queue_ref refs[3] = {
		{ .handle = 9, .gpu_id = 1, .queue_id = 0, .status = 77 },
		{ .handle = 9, .gpu_id = 1, .queue_id = 0, .status = 77 },
		{ .handle = 10, .gpu_id = 1, .queue_id = 1, .status = 77 },
	};
	struct kfdp_batch b = {
		.entries_ptr = (uintptr_t)refs, .num_entries = 3,
		.entry_size = sizeof(refs[0]), .lease_ms = 5,
		.num_ok = 99, .num_runlist_updates = 99,
	};

	ASSERT_EQ(0, batch(self->fd, KFDP_IOC_PREEMPT, &b));
	EXPECT_EQ(-EINVAL, refs[0].status);
	EXPECT_EQ(KFDP_R_ALREADY, refs[1].status);
	EXPECT_EQ(-EINVAL, refs[2].status);
	EXPECT_EQ(0, b.num_ok);
	EXPECT_EQ(0, b.num_runlist_updates);

	b.flags = KFDP_BATCH_ALL_OR_NOTHING;
	b.lease_ms = 0;
	ASSERT_EQ(0, batch(self->fd, KFDP_IOC_RESUME, &b));
	EXPECT_EQ(-EINVAL, refs[0].status);
	EXPECT_EQ(0, b.num_ok);

	b.flags = KFDP_BATCH_VALIDATE_ONLY;
	ASSERT_EQ(0, batch(self->fd, KFDP_IOC_PREEMPT, &b));
	EXPECT_EQ(-EINVAL, refs[2].status);

	b.num_entries = 0;
	ASSERT_EQ(0, batch(self->fd, KFDP_IOC_PREEMPT, &b));
	EXPECT_EQ(0, b.num_ok);
}

TEST_HARNESS_MAIN
