/* SPDX-License-Identifier: GPL-2.0 */
/* Helpers shared by the kfd_preempt kselftests. */
#ifndef KFDP_TEST_H
#define KFDP_TEST_H

#include <errno.h>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <linux/kfd_preempt.h>

#define KFDP_DEV "/dev/kfd_preempt"

/* The ioctl's errno, or 0 if it succeeded. */
static inline int kfdp_ioctl_errno(int fd, unsigned long cmd, void *arg)
{
	return ioctl(fd, cmd, arg) < 0 ? errno : 0;
}

/* open()'s errno, or 0 after closing the fd it returned. */
static inline int kfdp_open_errno(const char *path)
{
	int fd = open(path, O_RDWR | O_CLOEXEC);

	if (fd < 0)
		return errno;
	close(fd);
	return 0;
}

#endif /* KFDP_TEST_H */
