// SPDX-License-Identifier: GPL-2.0
/*
 * coop: a cooperative kernel. Its workgroups meet at a global wave sync
 * (GWS) barrier every round, so it runs only on a queue that holds GWS
 * (HSA_QUEUE_TYPE_COOPERATIVE), and a preemption must save and restore
 * every workgroup of it at once. out[0] counts completed rounds; each
 * workgroup adds its id to out[1 + round % 64], which the host checks.
 * gfx12 has no GWS: this workload is not built for it. The host passes the
 * workgroup count: reading it from the dispatch would need COV5's hidden
 * kernel arguments, which the kit's raw AQL dispatcher does not fill.
 */
__kernel void coop(__global volatile uint *out, uint groups, uint rounds)
{
	uint wg = __builtin_amdgcn_workgroup_id_x();
	uint r;

	if (__builtin_amdgcn_workitem_id_x() != 0)
		return;
	if (wg == 0)
		__builtin_amdgcn_ds_gws_init(groups - 1, 0);
	for (r = 0; r < rounds; r++) {
		__scoped_atomic_fetch_add(&out[1 + r % 64], wg, __ATOMIC_RELAXED,
					  __MEMORY_SCOPE_DEVICE);
		__builtin_amdgcn_ds_gws_barrier(groups - 1, 0);
		if (wg == 0)
			out[0] = r + 1;
	}
}
