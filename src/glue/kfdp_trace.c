// SPDX-License-Identifier: GPL-2.0
/*
 * Creates kfd_preempt's trace events (kfdp_trace.h) and the
 * rust_do_trace_*() functions through which the crate emits them.
 */
#include "kfdp_glue.h"

#define CREATE_TRACE_POINTS
#define CREATE_RUST_TRACE_POINTS
#include "kfdp_trace.h"
