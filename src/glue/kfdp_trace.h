/* SPDX-License-Identifier: GPL-2.0 */
/*
 * kfd_preempt's trace events
 * (Documentation/admin-guide.rst, "Statistics and tracing").
 *
 * Defined in C, as Rust binder defines its events: kfdp_trace.c creates
 * them and, with CREATE_RUST_TRACE_POINTS, the rust_do_trace_*() functions
 * the crate calls once it has seen the tracepoint's static key enabled
 * (src/trace.rs). The prototypes Rust sees are repeated in kfdp_glue.h,
 * where the compiler checks them against these.
 *
 * Owners are the module's own numbers (1, 2, ...), never pointers.
 */
#undef TRACE_SYSTEM
#define TRACE_SYSTEM kfd_preempt

#if !defined(_KFDP_TRACE_H) || defined(TRACE_HEADER_MULTI_READ)
#define _KFDP_TRACE_H

#include <linux/tracepoint.h>

#define kfdp_show_op(op) __print_symbolic(op, { 1, "preempt" }, { 2, "resume" })

TRACE_EVENT(kfdp_attach,
	TP_PROTO(u64 owner, u32 handle, s32 tgid, u32 kind),
	TP_ARGS(owner, handle, tgid, kind),
	TP_STRUCT__entry(
		__field(u64, owner)
		__field(u32, handle)
		__field(s32, tgid)
		__field(u32, kind)
	),
	TP_fast_assign(
		__entry->owner = owner;
		__entry->handle = handle;
		__entry->tgid = tgid;
		__entry->kind = kind;
	),
	TP_printk("owner=%llu handle=%u tgid=%d kind=%u", __entry->owner,
		  __entry->handle, __entry->tgid, __entry->kind)
);

DECLARE_EVENT_CLASS(kfdp_handle_class,
	TP_PROTO(u64 owner, u32 handle),
	TP_ARGS(owner, handle),
	TP_STRUCT__entry(
		__field(u64, owner)
		__field(u32, handle)
	),
	TP_fast_assign(
		__entry->owner = owner;
		__entry->handle = handle;
	),
	TP_printk("owner=%llu handle=%u", __entry->owner, __entry->handle)
);

/* DETACH, or the owner's file closing. */
DEFINE_EVENT(kfdp_handle_class, kfdp_detach,
	TP_PROTO(u64 owner, u32 handle),
	TP_ARGS(owner, handle));

/* The attached process exited: its pin and marks were dropped. */
DEFINE_EVENT(kfdp_handle_class, kfdp_target_exit,
	TP_PROTO(u64 owner, u32 handle),
	TP_ARGS(owner, handle));

/* One PREEMPT or RESUME that reached the backend (a lease's end included). */
TRACE_EVENT(kfdp_batch,
	TP_PROTO(u64 owner, u32 op, u32 flags, u32 entries, u32 ok, u32 nodes,
		 u32 runlist_updates, u64 elapsed_ns),
	TP_ARGS(owner, op, flags, entries, ok, nodes, runlist_updates,
		elapsed_ns),
	TP_STRUCT__entry(
		__field(u64, owner)
		__field(u32, op)
		__field(u32, flags)
		__field(u32, entries)
		__field(u32, ok)
		__field(u32, nodes)
		__field(u32, runlist_updates)
		__field(u64, elapsed_ns)
	),
	TP_fast_assign(
		__entry->owner = owner;
		__entry->op = op;
		__entry->flags = flags;
		__entry->entries = entries;
		__entry->ok = ok;
		__entry->nodes = nodes;
		__entry->runlist_updates = runlist_updates;
		__entry->elapsed_ns = elapsed_ns;
	),
	TP_printk("owner=%llu op=%s flags=0x%x entries=%u ok=%u nodes=%u runlist_updates=%u elapsed_ns=%llu",
		  __entry->owner, kfdp_show_op(__entry->op), __entry->flags,
		  __entry->entries, __entry->ok, __entry->nodes,
		  __entry->runlist_updates, __entry->elapsed_ns)
);

/* One entry of that batch, with its kfdp_queue_ref status. */
TRACE_EVENT(kfdp_queue,
	TP_PROTO(u64 owner, u32 op, u32 handle, u32 gpu_id, u32 queue_id,
		 s32 status),
	TP_ARGS(owner, op, handle, gpu_id, queue_id, status),
	TP_STRUCT__entry(
		__field(u64, owner)
		__field(u32, op)
		__field(u32, handle)
		__field(u32, gpu_id)
		__field(u32, queue_id)
		__field(s32, status)
	),
	TP_fast_assign(
		__entry->owner = owner;
		__entry->op = op;
		__entry->handle = handle;
		__entry->gpu_id = gpu_id;
		__entry->queue_id = queue_id;
		__entry->status = status;
	),
	TP_printk("owner=%llu op=%s handle=%u gpu_id=%u queue_id=%u status=%d",
		  __entry->owner, kfdp_show_op(__entry->op), __entry->handle,
		  __entry->gpu_id, __entry->queue_id, __entry->status)
);

/* One node of a FREEZE or THAW. */
TRACE_EVENT(kfdp_freeze,
	TP_PROTO(u64 owner, u32 handle, u32 gpu_id, bool thaw, s32 status,
		 u64 elapsed_ns),
	TP_ARGS(owner, handle, gpu_id, thaw, status, elapsed_ns),
	TP_STRUCT__entry(
		__field(u64, owner)
		__field(u32, handle)
		__field(u32, gpu_id)
		__field(bool, thaw)
		__field(s32, status)
		__field(u64, elapsed_ns)
	),
	TP_fast_assign(
		__entry->owner = owner;
		__entry->handle = handle;
		__entry->gpu_id = gpu_id;
		__entry->thaw = thaw;
		__entry->status = status;
		__entry->elapsed_ns = elapsed_ns;
	),
	TP_printk("owner=%llu handle=%u gpu_id=%u %s status=%d elapsed_ns=%llu",
		  __entry->owner, __entry->handle, __entry->gpu_id,
		  __entry->thaw ? "thaw" : "freeze", __entry->status,
		  __entry->elapsed_ns)
);

/* Leases that ended: the module resumes their queues in one batch. */
TRACE_EVENT(kfdp_lease_expired,
	TP_PROTO(u64 owner, u32 queues),
	TP_ARGS(owner, queues),
	TP_STRUCT__entry(
		__field(u64, owner)
		__field(u32, queues)
	),
	TP_fast_assign(
		__entry->owner = owner;
		__entry->queues = queues;
	),
	TP_printk("owner=%llu queues=%u", __entry->owner, __entry->queues)
);

#endif /* _KFDP_TRACE_H */

/* This part must be outside the include guard. */
#undef TRACE_INCLUDE_PATH
#undef TRACE_INCLUDE_FILE
#define TRACE_INCLUDE_PATH .
#define TRACE_INCLUDE_FILE kfdp_trace
#include <trace/define_trace.h>
