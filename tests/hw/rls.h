/* SPDX-License-Identifier: GPL-2.0 */
/*
 * amdkfd's runlist as its debugfs shows it (kfd/rls): the HWS's view of
 * which user queues are mapped, to hold kfd_preempt's QUERY against.
 */
#ifndef KIT_RLS_H
#define KIT_RLS_H

#include <linux/types.h>
#include <stdio.h>

#define KIT_RLS "/sys/kernel/debug/kfd/rls"

/*
 * Whether the runlist of node @gpu_id in @f (the text of kfd/rls) has a
 * MAP_QUEUES packet for the queue at @doorbell_off: 1, 0, or -errno
 * (-ENOENT: no such node in the file; -EPROTO: not a PM4 stream).
 */
int kit_rls_parse(FILE *f, __u32 gpu_id, __u32 doorbell_off);

/* The same, reading KIT_RLS now. */
int kit_rls_maps(__u32 gpu_id, __u32 doorbell_off);

#endif /* KIT_RLS_H */
