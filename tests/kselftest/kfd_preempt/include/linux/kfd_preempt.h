/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note OR MIT */
/*
 * kfd_preempt: take selected amdkfd user-mode queues off the GPU and put
 * them back, keeping their MQDs and CWSR state.
 *
 * Version 1 of the interface of /dev/kfd_preempt (and, with the module
 * parameter sim_nodes > 0, of the simulated tenant device
 * /dev/kfd_preempt_sim). Documentation/uapi.rst is the reference.
 *
 * Common rules:
 *  - every struct is built from __u32, __s32 and __u64 only, naturally
 *    aligned, with explicit padding; the sizes given are exact;
 *  - reserved fields must be zero on input (EINVAL) and are written as zero;
 *  - unknown flag bits are EINVAL, unknown ioctl numbers ENOTTY;
 *  - arrays are (entries_ptr, count, entry_size); entry_size below the
 *    kernel's element size is EINVAL, above it the tail must be zero on input
 *    and is left untouched on output;
 *  - num_entries above KFDP_MAX_BATCH is E2BIG;
 *  - per-entry outcomes go in each entry's status: 0 done, > 0 KFDP_R_*,
 *    < 0 -errno; the ioctl itself fails only for errors of the whole call;
 *  - nothing returned contains a kernel address.
 */
#ifndef _UAPI_LINUX_KFD_PREEMPT_H
#define _UAPI_LINUX_KFD_PREEMPT_H

#include <linux/ioctl.h>
#include <linux/types.h>

#define KFDP_IOC_MAGIC 0xBD
#define KFDP_ABI_MAJOR 1
#define KFDP_ABI_MINOR 2
#define KFDP_MAX_BATCH 4096

/* KFDP_IOC_INFO: 64 bytes. */
#define KFDP_CAP_HWS_BATCH (1ULL << 0) /* one runlist update per node per batch */
#define KFDP_CAP_MES (1ULL << 1)
#define KFDP_CAP_FREEZE (1ULL << 2)
#define KFDP_CAP_PID (1ULL << 3) /* PID attach enabled (module parameter) */
#define KFDP_CAP_SIM (1ULL << 4) /* simulated nodes present */
/*
 * ABI 1.1: PREEMPT entries and FREEZE of a KFD node less than
 * min_preempt_interval_us after its last PREEMPT or FREEZE trigger fail
 * with EAGAIN and change nothing; RESUME and THAW never do.
 */
#define KFDP_CAP_RATE_LIMIT (1ULL << 5)
/* ABI 1.2: KFDP_IOC_WATCH, UNWATCH, SAMPLE and ARM (activity detection). */
#define KFDP_CAP_ACTIVITY (1ULL << 6)
/* ABI 1.2: simulated ring queues that execute dispatches (with KFDP_CAP_SIM). */
#define KFDP_CAP_SIM_RING (1ULL << 7)

struct kfdp_info {
	__u32 abi_major;		/*  0 out: KFDP_ABI_MAJOR */
	__u32 abi_minor;		/*  4 out: KFDP_ABI_MINOR */
	__u64 caps;			/*  8 out: KFDP_CAP_* */
	__u32 max_batch;		/* 16 out: KFDP_MAX_BATCH */
	__u32 sizeof_queue_ref;		/* 20 out: sizeof(struct kfdp_queue_ref) */
	__u32 sizeof_queue_info;	/* 24 out: sizeof(struct kfdp_queue_info) */
	__u32 min_preempt_interval_us;	/* 28 out (1.1): 0 = no limit */
	__u32 max_watches;		/* 32 out (1.2): per owner */
	__u32 min_watch_period_us;	/* 36 out (1.2): smallest ARM period */
	__u64 reserved[3];		/* 40 */
};

/* KFDP_IOC_ATTACH: 40 bytes. Authorises one target process for this owner. */
enum {
	KFDP_TARGET_KFD_FD = 1,
	KFDP_TARGET_PID = 2,
	KFDP_TARGET_SIM_FD = 3,
};

/*
 * An fd that is not the right kind of file: EBADF (not an fd) or EINVAL
 * (wrong file). KFDP_TARGET_PID without the module parameter: EOPNOTSUPP;
 * without CAP_SYS_ADMIN: EPERM; no such process: ESRCH; process without KFD
 * state: ENOENT. Attaching the same process twice from one owner returns the
 * existing handle.
 */
struct kfdp_attach {
	__u32 kind;		/*  0 in: KFDP_TARGET_* */
	/*  4 in: the target's /dev/kfd (or /dev/kfd_preempt_sim) fd, e.g.
	 *    from pidfd_getfd(2); -1 for KFDP_TARGET_PID
	 */
	__s32 fd;
	__s32 pid;		/*  8 in: pid for KFDP_TARGET_PID, else 0 */
	__u32 flags;		/* 12 in: 0 */
	__u32 handle;		/* 16 out: attachment handle, never 0 */
	__s32 tgid;		/* 20 out: target tgid in the caller's pid ns */
	__u32 num_gpus;		/* 24 out */
	__u32 reserved0;	/* 28 */
	__u64 reserved1;	/* 32 */
};

/* KFDP_IOC_DETACH: 16 bytes. Resumes and thaws everything this owner did
 * to the target, then forgets the handle.
 */
struct kfdp_detach {
	__u32 handle;		/*  0 in */
	__u32 flags;		/*  4 in: 0 */
	__u64 reserved;		/*  8 */
};

/* KFDP_IOC_QUERY: 48 bytes. Lists the target's queues. */
struct kfdp_query {
	__u32 handle;		/*  0 in */
	__u32 gpu_id;		/*  4 in: 0 = all nodes */
	__u64 entries_ptr;	/*  8 in: struct kfdp_queue_info[] */
	__u32 entry_size;	/* 16 in */
	__u32 capacity;		/* 20 in */
	__u32 num_queues;	/* 24 out: may exceed capacity */
	__u32 num_written;	/* 28 out */
	__u64 reserved[2];	/* 32 */
};

/* kfdp_queue_info.state */
enum {
	KFDP_QS_ACTIVE = 1u << 0,	/* in the runlist (or added to MES) */
	KFDP_QS_SUSPENDED = 1u << 1,	/* suspended, by anyone */
	KFDP_QS_OWNED = 1u << 2,	/* preempted by this owner */
	KFDP_QS_OWNED_OTHER = 1u << 3,	/* preempted by another owner */
	KFDP_QS_EVICTED = 1u << 4,	/* the process's queues are evicted */
	KFDP_QS_FROZEN = 1u << 5,	/* frozen by a kfd_preempt owner */
	KFDP_QS_BEING_DESTROYED = 1u << 6,
	KFDP_QS_RESET = 1u << 7,	/* the queue or its node was reset */
	KFDP_QS_GWS = 1u << 8,
	KFDP_QS_NEW = 1u << 9,		/* EC_QUEUE_NEW still set */
	KFDP_QS_DEBUGGED = 1u << 10,	/* the process has the debugger enabled */
};

struct kfdp_queue_info {		/* 96 bytes */
	__u32 gpu_id;			/*  0 topology gpu_id */
	__u32 queue_id;			/*  4 */
	__u32 queue_type;		/*  8 KFD_IOC_QUEUE_TYPE_* values */
	__u32 state;			/* 12 KFDP_QS_* */
	__u64 ring_base_address;	/* 16 == hsa_queue_t base_address */
	__u64 ring_size;		/* 24 */
	__u64 read_pointer_address;	/* 32 */
	__u64 write_pointer_address;	/* 40 */
	__u64 ctx_save_restore_address;	/* 48 */
	__u32 ctx_save_restore_size;	/* 56 */
	__u32 doorbell_id;		/* 60 */
	__u32 doorbell_off;		/* 64 */
	__u32 priority;			/* 68 */
	__u32 queue_percent;		/* 72 */
	__u32 gc_ip_version;		/* 76 e.g. 0x090403 for MI300 */
	__u64 reserved[2];		/* 80 */
};

/* KFDP_IOC_PREEMPT / KFDP_IOC_RESUME: 56 bytes, entries of 16 bytes. */
struct kfdp_queue_ref {
	__u32 handle;		/*  0 in */
	__u32 gpu_id;		/*  4 in */
	__u32 queue_id;		/*  8 in */
	__s32 status;		/* 12 out: 0, KFDP_R_* or -errno */
};

enum {
	KFDP_R_ALREADY = 1,	/* already in the requested state (or a duplicate) */
	KFDP_R_DEFERRED = 2,	/* recorded; takes effect when the node runs again */
	KFDP_R_EXTERNAL = 3,	/* resumed behind our back (debugger); ownership dropped */
};

/*
 * Entry errnos: ENOENT queue gone; ESRCH target exited; EBUSY being
 * destroyed, debugged, or owned by another owner; EOPNOTSUPP queue type or
 * scheduler mode not supported; EIO node reset or scheduler hang (the mark is
 * kept, nothing is reactivated that KFD would not); EINVAL bad handle or
 * gpu_id. Duplicate entries in one batch: the later ones get KFDP_R_ALREADY.
 */
#define KFDP_BATCH_VALIDATE_ONLY (1u << 0)	/* check every entry, change nothing */
#define KFDP_BATCH_ALL_OR_NOTHING (1u << 1)	/* any entry invalid: change nothing */

struct kfdp_batch {
	__u64 entries_ptr;		/*  0 in/out: struct kfdp_queue_ref[] */
	__u32 num_entries;		/*  8 in */
	__u32 entry_size;		/* 12 in */
	__u32 flags;			/* 16 in: KFDP_BATCH_* */
	__u32 num_ok;			/* 20 out: entries with status 0 */
	__u32 num_runlist_updates;	/* 24 out: HWS cycles or MES calls issued */
	/* 28 PREEMPT in: 0 = until RESUME, DETACH or close; else the module
	 *    resumes the queues itself when the lease ends. RESUME: must be 0.
	 */
	__u32 lease_ms;
	__u64 elapsed_ns;		/* 32 out: wall time of the hardware phase */
	__u64 reserved[2];		/* 40 */
};

/*
 * KFDP_IOC_FREEZE / KFDP_IOC_THAW: 24 bytes. Process-level preemption the
 * tenant cannot undo; also holds back queues the tenant creates while
 * frozen. Freezes nest per owner.
 */
struct kfdp_freeze {
	__u32 handle;		/*  0 in */
	__u32 gpu_id;		/*  4 in: 0 = all nodes of the target */
	__u32 flags;		/*  8 in: 0 */
	__s32 status;		/* 12 out: 0 or -errno */
	__u64 elapsed_ns;	/* 16 out */
};

/*
 * Activity detection (ABI 1.2, KFDP_CAP_ACTIVITY): whether watched queues
 * have work pending, read from the queue's own read and write indices (the
 * AQL read_dispatch_id the CP writes back and the write_dispatch_id the
 * runtime writes) without touching the tenant.
 *
 * KFDP_IOC_WATCH / KFDP_IOC_UNWATCH: 32 bytes, entries struct kfdp_queue_ref.
 * WATCH pins the page(s) holding the queue's two indices until UNWATCH,
 * DETACH or close. A watch is of one queue: WATCH of a queue id whose
 * queue was destroyed drops the old watch (ENOENT), and of an id given to
 * a new queue (a new ring or indices) watches the new queue in the old
 * one's place (0). A watch follows its addresses: once the tenant unmaps
 * the memory a watch pinned, that watch reads as idle until the module pins
 * it again where QUERY says its queue's indices are now (memory mapped anew
 * at the same addresses included): at a WATCH of it, or by itself within
 * 100 ms (then 200, 400, 800 ms and each second while that fails).
 * Entry statuses: 0; KFDP_R_ALREADY (already watched, or
 * not watched for UNWATCH); EINVAL bad handle or gpu_id; ESRCH target
 * exited; ENOENT no such queue; EOPNOTSUPP a queue without AQL indices
 * (SDMA, or a simulated queue without a ring); EFAULT the indices are not
 * in pinnable memory; EAGAIN their page is not resident and faulting it in
 * could wait on another process (a file mapping's server, a userfaultfd
 * handler): WATCH again once the tenant has used the queue; ENOSPC the
 * owner already watches max_watches queues;
 * ENOMEM the caller's RLIMIT_MEMLOCK (a watch pins up to two pages, charged
 * to the caller).
 */
struct kfdp_watch {
	__u64 entries_ptr;	/*  0 in/out: struct kfdp_queue_ref[] */
	__u32 num_entries;	/*  8 in: <= KFDP_MAX_BATCH */
	__u32 entry_size;	/* 12 in */
	__u32 flags;		/* 16 in: 0 */
	__u32 num_ok;		/* 20 out: entries with status 0 */
	__u64 reserved;		/* 24 */
};

/* kfdp_activity.flags */
enum {
	KFDP_ACT_PENDING = 1u << 0,	/* write_index != read_index */
	KFDP_ACT_GONE = 1u << 1,	/* the target exited: indices are stale */
};

struct kfdp_activity {		/* 40 bytes: one watched queue */
	__u32 handle;		/*  0 */
	__u32 gpu_id;		/*  4 */
	__u32 queue_id;		/*  8 */
	__u32 flags;		/* 12 KFDP_ACT_* */
	__u64 read_index;	/* 16 packets retired (written by the CP) */
	__u64 write_index;	/* 24 packets published (written by the tenant) */
	__u64 reserved;		/* 32 */
};

/*
 * KFDP_IOC_SAMPLE: 40 bytes. Reads every watched queue of this owner, in
 * the order they were watched.
 */
struct kfdp_sample {
	__u64 entries_ptr;	/*  0 out: struct kfdp_activity[] */
	__u32 entry_size;	/*  8 in */
	__u32 capacity;		/* 12 in */
	__u32 num_watches;	/* 16 out: may exceed capacity */
	__u32 num_pending;	/* 20 out: watched queues with work pending */
	__u64 timestamp_ns;	/* 24 out: CLOCK_MONOTONIC of the reads */
	__u64 reserved;		/* 32 */
};

/*
 * KFDP_IOC_ARM: 32 bytes. Samples this owner's watched queues every
 * period_us in the kernel and signals the eventfd once, then disarms, when
 * the condition holds:
 *  - KFDP_ARM_ANY_BUSY: some watched queue has work pending, or its write
 *    index moved since the ARM (a burst that retired within one period);
 *  - KFDP_ARM_ALL_IDLE: no watched queue had work pending or a moving write
 *    index for idle_us.
 * A new ARM replaces the previous one; KFDP_ARM_OFF (eventfd -1) disarms.
 * EINVAL: unknown condition, period_us outside [min_watch_period_us,
 * 1000000], idle_us with ANY_BUSY or above 10000000, nonzero reserved, or
 * an fd that is not an eventfd; EBADF: not an open fd.
 */
enum {
	KFDP_ARM_OFF = 0,
	KFDP_ARM_ANY_BUSY = 1,
	KFDP_ARM_ALL_IDLE = 2,
};

struct kfdp_arm {
	__u32 condition;	/*  0 in: KFDP_ARM_* */
	__s32 eventfd;		/*  4 in: eventfd(2) to signal; -1 with OFF */
	__u32 period_us;	/*  8 in */
	__u32 idle_us;		/* 12 in: ALL_IDLE only, else 0 */
	__u64 reserved[2];	/* 16 */
};

#define KFDP_IOC_INFO		_IOR(KFDP_IOC_MAGIC, 0x00, struct kfdp_info)
#define KFDP_IOC_ATTACH		_IOWR(KFDP_IOC_MAGIC, 0x01, struct kfdp_attach)
#define KFDP_IOC_DETACH		_IOW(KFDP_IOC_MAGIC, 0x02, struct kfdp_detach)
#define KFDP_IOC_QUERY		_IOWR(KFDP_IOC_MAGIC, 0x03, struct kfdp_query)
#define KFDP_IOC_PREEMPT	_IOWR(KFDP_IOC_MAGIC, 0x04, struct kfdp_batch)
#define KFDP_IOC_RESUME		_IOWR(KFDP_IOC_MAGIC, 0x05, struct kfdp_batch)
#define KFDP_IOC_FREEZE		_IOWR(KFDP_IOC_MAGIC, 0x06, struct kfdp_freeze)
#define KFDP_IOC_THAW		_IOWR(KFDP_IOC_MAGIC, 0x07, struct kfdp_freeze)
#define KFDP_IOC_WATCH		_IOWR(KFDP_IOC_MAGIC, 0x08, struct kfdp_watch)
#define KFDP_IOC_UNWATCH	_IOWR(KFDP_IOC_MAGIC, 0x09, struct kfdp_watch)
#define KFDP_IOC_SAMPLE		_IOWR(KFDP_IOC_MAGIC, 0x0A, struct kfdp_sample)
#define KFDP_IOC_ARM		_IOW(KFDP_IOC_MAGIC, 0x0B, struct kfdp_arm)

/*
 * Simulated nodes (present only with the module parameter sim_nodes=N > 0).
 * Tenant device /dev/kfd_preempt_sim, mode 0666, one simulated KFD process
 * per open file.
 */
struct kfdp_sim_queue_create {	/* 32 bytes */
	__u32 node;		/*  0 in: node index < N */
	__u32 queue_type;	/*  4 in: KFD_IOC_QUEUE_TYPE_* */
	__u32 priority;		/*  8 in: 0..15 */
	__u32 queue_id;		/* 12 out */
	__u32 gpu_id;		/* 16 out */
	__u32 reserved0;	/* 20 */
	__u64 reserved1;	/* 24 */
};

struct kfdp_sim_queue_destroy {	/* 8 bytes */
	__u32 queue_id;		/*  0 in */
	__u32 reserved;		/*  4 */
};

struct kfdp_sim_queue_status {	/* 40 bytes */
	__u32 queue_id;		/*  0 in */
	__u32 state;		/*  4 out: KFDP_QS_* */
	__u64 retired;		/*  8 out: work units retired so far */
	__u64 in_flight;	/* 16 out: dispatched, not retired */
	__u64 reserved[2];	/* 24 */
};

/*
 * Ring queues (ABI 1.2, KFDP_CAP_SIM_RING): the tenant owns a ring of
 * 64-byte packets and two 64-bit indices in its own memory, as a ROCm
 * process owns its AQL ring and amd_queue_t. It writes packets, moves its
 * write index and rings the doorbell; the node executes the dispatches of
 * mapped queues (Documentation/simulated-node.rst, "Workloads") and writes
 * the read index back as they retire. A doorbell of an unmapped queue is
 * dropped, as on hardware; mapping reads the write index from memory.
 */
enum {
	KFDP_SIM_PKT_INVALID = 0,	/* retired at once, with no work */
	KFDP_SIM_PKT_DISPATCH = 1,
};

struct kfdp_sim_packet {	/* 64 bytes */
	__u32 header;		/*  0 in: KFDP_SIM_PKT_* */
	__u32 reserved0;	/*  4 */
	__u64 work_ns;		/*  8 in: node time the dispatch needs alone */
	__u64 tag;		/* 16 in: the tenant's; untouched */
	__u64 submit_ns;	/* 24 out: CLOCK_MONOTONIC when the node saw it */
	__u64 start_ns;		/* 32 out: when it first ran */
	__u64 end_ns;		/* 40 out: when it retired */
	__u64 reserved1[2];	/* 48 */
};

/*
 * EINVAL: node out of range, ring_packets not a power of two in
 * [1, 1024], addresses not aligned (ring: 64 bytes; indices: 8 bytes),
 * the two indices overlapping each other or the ring, or nonzero
 * reserved; EFAULT: memory that cannot be pinned writable; ENOMEM: the
 * caller's RLIMIT_MEMLOCK; EBADF: the tenant file used from another process.
 */
struct kfdp_sim_ring_create {	/* 48 bytes */
	__u32 node;		/*  0 in */
	__u32 priority;		/*  4 in: 0..15 */
	__u64 ring_address;	/*  8 in: struct kfdp_sim_packet[ring_packets] */
	__u64 read_index_address;	/* 16 in: __u64, written by the node */
	__u64 write_index_address;	/* 24 in: __u64, written by the tenant */
	__u32 ring_packets;	/* 32 in */
	__u32 queue_id;		/* 36 out */
	__u32 gpu_id;		/* 40 out */
	__u32 reserved;		/* 44 */
};

struct kfdp_sim_doorbell {	/* 8 bytes */
	__u32 queue_id;		/*  0 in */
	__u32 reserved;		/*  4 */
};

#define KFDP_SIM_IOC_CREATE_QUEUE	_IOWR(KFDP_IOC_MAGIC, 0x40, struct kfdp_sim_queue_create)
#define KFDP_SIM_IOC_DESTROY_QUEUE	_IOW(KFDP_IOC_MAGIC, 0x41, struct kfdp_sim_queue_destroy)
#define KFDP_SIM_IOC_QUEUE_STATUS	_IOWR(KFDP_IOC_MAGIC, 0x42, struct kfdp_sim_queue_status)
#define KFDP_SIM_IOC_CREATE_RING	_IOWR(KFDP_IOC_MAGIC, 0x43, struct kfdp_sim_ring_create)
#define KFDP_SIM_IOC_DOORBELL		_IOW(KFDP_IOC_MAGIC, 0x44, struct kfdp_sim_doorbell)

#endif /* _UAPI_LINUX_KFD_PREEMPT_H */
