// SPDX-License-Identifier: GPL-2.0
/*
 * kfd_preempt ABI and KFDP_IOC_INFO: the layout Documentation/uapi.rst makes
 * binding, INFO's answer, and the errors of malformed calls.
 */
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>

#include "kselftest_harness.h"
#include "kfdp_test.h"

struct layout {
	const char *what;
	size_t actual, expected;
};

#define SIZE(type, bytes) { #type, sizeof(struct type), bytes }
#define OFFSET(type, field, off) { #type "." #field, offsetof(struct type, field), off }

/* Sizes and offsets as uapi.rst gives them (and uapi/kfd_preempt_layout.rs). */
static const struct layout layouts[] = {
	SIZE(kfdp_info, 64),
	OFFSET(kfdp_info, caps, 8),
	OFFSET(kfdp_info, max_batch, 16),
	OFFSET(kfdp_info, sizeof_queue_info, 24),
	OFFSET(kfdp_info, max_watches, 32),
	OFFSET(kfdp_info, min_watch_period_us, 36),
	OFFSET(kfdp_info, reserved, 40),
	SIZE(kfdp_attach, 40),
	OFFSET(kfdp_attach, pid, 8),
	OFFSET(kfdp_attach, handle, 16),
	OFFSET(kfdp_attach, num_gpus, 24),
	OFFSET(kfdp_attach, reserved1, 32),
	SIZE(kfdp_detach, 16),
	OFFSET(kfdp_detach, reserved, 8),
	SIZE(kfdp_query, 48),
	OFFSET(kfdp_query, entries_ptr, 8),
	OFFSET(kfdp_query, entry_size, 16),
	OFFSET(kfdp_query, num_queues, 24),
	OFFSET(kfdp_query, reserved, 32),
	SIZE(kfdp_queue_info, 96),
	OFFSET(kfdp_queue_info, ring_base_address, 16),
	OFFSET(kfdp_queue_info, ctx_save_restore_size, 56),
	OFFSET(kfdp_queue_info, gc_ip_version, 76),
	OFFSET(kfdp_queue_info, reserved, 80),
	SIZE(kfdp_queue_ref, 16),
	OFFSET(kfdp_queue_ref, status, 12),
	SIZE(kfdp_batch, 56),
	OFFSET(kfdp_batch, num_entries, 8),
	OFFSET(kfdp_batch, flags, 16),
	OFFSET(kfdp_batch, num_runlist_updates, 24),
	OFFSET(kfdp_batch, lease_ms, 28),
	OFFSET(kfdp_batch, elapsed_ns, 32),
	OFFSET(kfdp_batch, reserved, 40),
	SIZE(kfdp_freeze, 24),
	OFFSET(kfdp_freeze, status, 12),
	OFFSET(kfdp_freeze, elapsed_ns, 16),
	SIZE(kfdp_sim_queue_create, 32),
	SIZE(kfdp_sim_queue_destroy, 8),
	SIZE(kfdp_sim_queue_status, 40),
	/* ABI 1.2 */
	SIZE(kfdp_watch, 32),
	OFFSET(kfdp_watch, num_ok, 20),
	SIZE(kfdp_activity, 40),
	OFFSET(kfdp_activity, read_index, 16),
	OFFSET(kfdp_activity, write_index, 24),
	SIZE(kfdp_sample, 40),
	OFFSET(kfdp_sample, timestamp_ns, 24),
	SIZE(kfdp_arm, 32),
	OFFSET(kfdp_arm, idle_us, 12),
	SIZE(kfdp_sim_packet, 64),
	OFFSET(kfdp_sim_packet, work_ns, 8),
	OFFSET(kfdp_sim_packet, end_ns, 40),
	SIZE(kfdp_sim_ring_create, 48),
	OFFSET(kfdp_sim_ring_create, ring_packets, 32),
	SIZE(kfdp_sim_doorbell, 8),
};

TEST(abi_layout)
{
	for (size_t i = 0; i < ARRAY_SIZE(layouts); i++) {
		const struct layout *l = &layouts[i];

		EXPECT_EQ(l->expected, l->actual) {
			TH_LOG("%s", l->what);
		}
	}
	EXPECT_EQ(0xBDu, _IOC_TYPE(KFDP_IOC_INFO));
	EXPECT_EQ(0x07u, _IOC_NR(KFDP_IOC_THAW));
	EXPECT_EQ(0x40u, _IOC_NR(KFDP_SIM_IOC_CREATE_QUEUE));
}

FIXTURE(dev) {
	int fd;
};

FIXTURE_SETUP(dev)
{
	self->fd = open(KFDP_DEV, O_RDWR | O_CLOEXEC);
	if (self->fd < 0 && errno == ENOENT)
		SKIP(return, KFDP_DEV " does not exist: kfd_preempt is not loaded");
	ASSERT_LE(0, self->fd) TH_LOG("open " KFDP_DEV ": %s", strerror(errno));
}

FIXTURE_TEARDOWN(dev)
{
	if (self->fd >= 0)
		close(self->fd);
}

/* INFO overwrites every byte: version, limits, sizes, zeroed reserved. */
TEST_F(dev, info_v1)
{
	struct kfdp_info info;

	memset(&info, 0xa5, sizeof(info));
	ASSERT_EQ(0, ioctl(self->fd, KFDP_IOC_INFO, &info));
	EXPECT_EQ(KFDP_ABI_MAJOR, info.abi_major);
	EXPECT_EQ(KFDP_ABI_MINOR, info.abi_minor);
	EXPECT_EQ(KFDP_MAX_BATCH, info.max_batch);
	EXPECT_EQ(sizeof(struct kfdp_queue_ref), info.sizeof_queue_ref);
	EXPECT_EQ(sizeof(struct kfdp_queue_info), info.sizeof_queue_info);
	/* ABI 1.1: the rate limit's interval, with its capability bit. */
	EXPECT_EQ(info.min_preempt_interval_us != 0, !!(info.caps & KFDP_CAP_RATE_LIMIT));
	/* ABI 1.2: activity detection's limits (the engine's, always set). */
	EXPECT_EQ(256, info.max_watches);
	EXPECT_EQ(10, info.min_watch_period_us);
	for (int i = 0; i < 3; i++)
		EXPECT_EQ(0, info.reserved[i]);
}

/* No capability bit outside those v1 defines. */
TEST_F(dev, info_caps_defined_bits_only)
{
	const __u64 known = KFDP_CAP_HWS_BATCH | KFDP_CAP_MES | KFDP_CAP_FREEZE |
			    KFDP_CAP_PID | KFDP_CAP_SIM | KFDP_CAP_RATE_LIMIT |
			    KFDP_CAP_ACTIVITY | KFDP_CAP_SIM_RING;
	struct kfdp_info info = { 0 };

	ASSERT_EQ(0, ioctl(self->fd, KFDP_IOC_INFO, &info));
	EXPECT_EQ(0, info.caps & ~known);
}

#define KFDP_INTERVAL_PARAM "/sys/module/kfd_preempt/parameters/min_preempt_interval_us"

static int kfdp_write_param(const char *path, unsigned int v)
{
	FILE *f = fopen(path, "w");
	int r;

	if (!f)
		return -1;
	r = fprintf(f, "%u\n", v) < 0;
	return fclose(f) || r ? -1 : 0;
}

/*
 * INFO reports the min_preempt_interval_us parameter as it is now (it is
 * writable at run time), and KFDP_CAP_RATE_LIMIT exactly when it is not 0.
 */
TEST_F(dev, info_rate_limit_follows_parameter)
{
	struct kfdp_info info = { 0 };
	unsigned int saved;
	FILE *f = fopen(KFDP_INTERVAL_PARAM, "r");

	if (!f)
		SKIP(return, "%s: not readable (not root, or module too old)", KFDP_INTERVAL_PARAM);
	ASSERT_EQ(1, fscanf(f, "%u", &saved));
	fclose(f);
	ASSERT_EQ(0, ioctl(self->fd, KFDP_IOC_INFO, &info));
	EXPECT_EQ(saved, info.min_preempt_interval_us);

	ASSERT_EQ(0, kfdp_write_param(KFDP_INTERVAL_PARAM, 250));
	ASSERT_EQ(0, ioctl(self->fd, KFDP_IOC_INFO, &info));
	EXPECT_EQ(250, info.min_preempt_interval_us);
	EXPECT_NE(0, info.caps & KFDP_CAP_RATE_LIMIT);

	ASSERT_EQ(0, kfdp_write_param(KFDP_INTERVAL_PARAM, 0));
	ASSERT_EQ(0, ioctl(self->fd, KFDP_IOC_INFO, &info));
	EXPECT_EQ(0, info.min_preempt_interval_us);
	EXPECT_EQ(0, info.caps & KFDP_CAP_RATE_LIMIT);

	ASSERT_EQ(0, kfdp_write_param(KFDP_INTERVAL_PARAM, saved));
}

/* Bad destinations: EFAULT, and the call can be repeated afterwards. */
TEST_F(dev, info_bad_pointer)
{
	struct kfdp_info info;
	void *ro;

	EXPECT_EQ(EFAULT, kfdp_ioctl_errno(self->fd, KFDP_IOC_INFO, NULL));
	EXPECT_EQ(EFAULT, kfdp_ioctl_errno(self->fd, KFDP_IOC_INFO, (void *)1));

	ro = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_TRUE(ro != MAP_FAILED);
	EXPECT_EQ(EFAULT, kfdp_ioctl_errno(self->fd, KFDP_IOC_INFO, ro));
	/* Partly mapped: the struct straddles the end of a mapping. */
	ASSERT_EQ(0, munmap(ro, 4096));
	ro = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_TRUE(ro != MAP_FAILED);
	ASSERT_EQ(0, munmap((char *)ro + 4096, 4096));
	EXPECT_EQ(EFAULT, kfdp_ioctl_errno(self->fd, KFDP_IOC_INFO, (char *)ro + 4096 - 32));
	ASSERT_EQ(0, munmap(ro, 4096));

	EXPECT_EQ(0, kfdp_ioctl_errno(self->fd, KFDP_IOC_INFO, &info));
}

/* Numbers that are not v1 ioctls: ENOTTY, including INFO with another size. */
TEST_F(dev, unknown_ioctl)
{
	char buf[256] = { 0 };

	EXPECT_EQ(ENOTTY, kfdp_ioctl_errno(self->fd, _IO(KFDP_IOC_MAGIC, 0x3f), buf));
	EXPECT_EQ(ENOTTY, kfdp_ioctl_errno(self->fd, _IOR(KFDP_IOC_MAGIC, 0x00, char[32]), buf));
	EXPECT_EQ(ENOTTY, kfdp_ioctl_errno(self->fd, _IOWR(KFDP_IOC_MAGIC, 0x00, struct kfdp_info), buf));
	EXPECT_EQ(ENOTTY, kfdp_ioctl_errno(self->fd, _IOR('K', 0x00, struct kfdp_info), buf));
	/* The tenant device's numbers mean nothing on the owner device. */
	EXPECT_EQ(ENOTTY, kfdp_ioctl_errno(self->fd, KFDP_SIM_IOC_CREATE_QUEUE, buf));
}

/*
 * Every v1 number is implemented: an all-zero argument is malformed for each
 * (kind 0, handle 0, entry_size 0) and gets EINVAL, never ENOTTY.
 */
TEST_F(dev, v1_ioctls_implemented)
{
	const unsigned long cmds[] = {
		KFDP_IOC_ATTACH, KFDP_IOC_DETACH, KFDP_IOC_QUERY, KFDP_IOC_PREEMPT,
		KFDP_IOC_RESUME, KFDP_IOC_FREEZE, KFDP_IOC_THAW,
	};
	char buf[256] = { 0 };

	for (size_t i = 0; i < ARRAY_SIZE(cmds); i++) {
		unsigned long cmd = cmds[i];

		memset(buf, 0, sizeof(buf));
		EXPECT_EQ(EINVAL, kfdp_ioctl_errno(self->fd, cmd, buf)) {
			TH_LOG("cmd %#lx", cmd);
		}
	}
}

TEST_HARNESS_MAIN
