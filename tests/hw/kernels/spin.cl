// SPDX-License-Identifier: GPL-2.0
/*
 * spin: every workgroup's first lane counts in host-visible memory until
 * the host sets *stop. The host reads the counters to see whether the queue
 * is on the hardware: they stop while it is preempted and go on after.
 * Plain volatile stores, one writer per slot: no system-scope atomics, which
 * need PCIe atomics to host memory.
 */
__kernel void spin(__global volatile ulong *progress,
		   __global volatile const uint *stop)
{
	ulong n = 0;

	if (__builtin_amdgcn_workitem_id_x() != 0)
		return;
	while (!*stop)
		progress[__builtin_amdgcn_workgroup_id_x()] = ++n;
}
