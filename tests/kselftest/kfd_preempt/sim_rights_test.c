// SPDX-License-Identifier: GPL-2.0
/*
 * Who may reach a tenant's queues, on the simulated node: a scheduler gets
 * a tenant's fd only through pidfd_getfd(2), where the kernel's ptrace
 * check applies; an unprivileged user may be a tenant but never an owner.
 */
#define _GNU_SOURCE
#include "kfdp_sim.h"
#include "kselftest_harness.h"

#define NOBODY 65534
#define OTHER_UID 65533

static int become(uid_t uid)
{
	return setresgid(uid, uid, uid) || setresuid(uid, uid, uid);
}

/* A tenant running as @uid; returns its pid and its tenant fd number. */
static pid_t tenant_as(uid_t uid, int *fdnum)
{
	int p[2], fd = -1;
	pid_t pid;

	if (pipe(p))
		return -1;
	pid = fork();
	if (pid == 0) {
		if (!become(uid))
			fd = kfdp_tenant_open();
		if (fd >= 0 && kfdp_queue_create(fd, KFDP_SIM_HWS, KFDP_QT_COMPUTE) < 0)
			fd = -1;
		if (write(p[1], &fd, sizeof(fd)) != sizeof(fd))
			_exit(1);
		pause();
		_exit(0);
	}
	close(p[1]);
	if (read(p[0], fdnum, sizeof(*fdnum)) != sizeof(*fdnum))
		*fdnum = -1;
	close(p[0]);
	return pid;
}

static void stop(pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

FIXTURE(rights) {
	int unused;
};

FIXTURE_SETUP(rights)
{
	const char *why = kfdp_sim_absent();

	if (why)
		SKIP(return, "%s", why);
	ASSERT_EQ(0, geteuid()) TH_LOG("these tests must run as root");
}

FIXTURE_TEARDOWN(rights)
{
}

/* Any user may be a tenant (the node is 0666, as a udev rule makes it)... */
TEST_F(rights, unprivileged_tenant)
{
	int fdnum;
	pid_t t = tenant_as(NOBODY, &fdnum);

	ASSERT_LT(0, t);
	EXPECT_LE(0, fdnum) TH_LOG("nobody could not open " KFDP_SIM_DEV);
	stop(t);
}

/* ...and root's scheduler may take its fd and preempt its queues. */
TEST_F(rights, root_scheduler_takes_tenant_fd)
{
	int fdnum, pidfd, fd, owner, h;
	pid_t t = tenant_as(NOBODY, &fdnum);

	ASSERT_LT(0, t);
	ASSERT_LE(0, fdnum);
	pidfd = syscall(SYS_pidfd_open, t, 0);
	ASSERT_LE(0, pidfd);
	fd = syscall(SYS_pidfd_getfd, pidfd, fdnum, 0);
	ASSERT_LE(0, fd);
	owner = kfdp_owner_open();
	ASSERT_LE(0, owner);
	h = kfdp_attach_sim(owner, fd);
	ASSERT_LT(0, h);
	EXPECT_EQ(0, kfdp_one(owner, KFDP_IOC_PREEMPT, h, KFDP_SIM_HWS, 0));
	close(owner);
	EXPECT_EQ(KFDP_QS_ACTIVE, kfdp_queue_state(fd, 0)) TH_LOG("close resumed it");
	close(fd);
	close(pidfd);
	stop(t);
}

/* Another unprivileged user cannot take the tenant's fd: the kernel refuses. */
TEST_F(rights, pidfd_getfd_across_users_refused)
{
	int fdnum, pidfd;
	pid_t t = tenant_as(NOBODY, &fdnum);

	ASSERT_LT(0, t);
	ASSERT_LE(0, fdnum);
	pidfd = syscall(SYS_pidfd_open, t, 0);
	ASSERT_LE(0, pidfd);
	pid_t c = fork();

	ASSERT_LE(0, c);
	if (c == 0) {
		int fd;

		if (become(OTHER_UID))
			_exit(2);
		fd = syscall(SYS_pidfd_getfd, pidfd, fdnum, 0);
		_exit(fd < 0 && errno == EPERM ? 0 : 1);
	}
	int status;

	ASSERT_EQ(c, waitpid(c, &status, 0));
	EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
		TH_LOG("pidfd_getfd across users must fail with EPERM");
	close(pidfd);
	stop(t);
}

/* A tenant cannot turn itself into an owner. */
TEST_F(rights, tenant_is_not_an_owner)
{
	pid_t c = fork();
	int status;

	ASSERT_LE(0, c);
	if (c == 0) {
		if (become(NOBODY))
			_exit(2);
		_exit(kfdp_open_errno(KFDP_DEV) == EACCES ? 0 : 1);
	}
	ASSERT_EQ(c, waitpid(c, &status, 0));
	EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* PF_SUPERPRIV of include/linux/sched.h: the task used a capability. */
#define KFDP_PF_SUPERPRIV 0x00000100

/* Field 9 (flags) of /proc/self/stat, or -1. */
static long long self_task_flags(void)
{
	char buf[512], *p;
	FILE *f = fopen("/proc/self/stat", "r");
	size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
	long long flags = -1;
	int field = 3;

	if (f)
		fclose(f);
	buf[n] = 0;
	p = strrchr(buf, ')');	/* comm may hold spaces */
	if (!p)
		return -1;
	for (p = strtok(p + 2, " "); p; p = strtok(NULL, " "), field++)
		if (field == 9) {
			flags = strtoll(p, NULL, 10);
			break;
		}
	return flags;
}

/*
 * An fd ATTACH does not ask for CAP_SYS_ADMIN: capable() marks the task
 * (PF_SUPERPRIV, which fork clears) and audits it, and only a PID attach
 * needs the answer. Run as root, where capable() would say yes.
 */
TEST_F(rights, fd_attach_does_not_use_sys_admin)
{
	int status;
	pid_t pid;

	if (geteuid())
		SKIP(return, "needs root, whose capable() would succeed");
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		int owner, tenant, h = kfdp_owner_and_tenant(&owner, &tenant);
		long long flags = self_task_flags();

		_exit(h > 0 && flags >= 0 && !(flags & KFDP_PF_SUPERPRIV) ? 0 : 1);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
		TH_LOG("the ATTACH of a simulated tenant's fd used CAP_SYS_ADMIN");
}

TEST_HARNESS_MAIN
