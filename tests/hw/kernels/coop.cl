// SPDX-License-Identifier: GPL-2.0
/*
 * coop: a cooperative kernel. Its workgroups meet at a global wave sync
 * (GWS) barrier every round, so it runs only on a queue that holds GWS
 * (HSA_QUEUE_TYPE_COOPERATIVE), and a preemption must save and restore
 * every workgroup of it at once. out[wg] is the rounds workgroup wg
 * finished; out[groups + wg] counts the rounds in which it passed the
 * barrier before its neighbour had arrived (must stay 0). Plain volatile
 * stores, one writer per slot: no atomics on host memory.
 *
 * The barrier's resource is initialised by a separate one-group dispatch
 * (init_only), as ROCm's runtime does, so that no workgroup can reach the
 * barrier before it. gfx12 has no GWS: this workload is not built for it.
 * The host passes the workgroup count: reading it from the dispatch would
 * need COV5's hidden kernel arguments, which the kit's raw AQL dispatcher
 * does not fill.
 */
__kernel void coop(__global volatile uint *out, uint groups, uint rounds, uint init_only)
{
	uint wg = __builtin_amdgcn_workgroup_id_x();
	uint r;

	if (__builtin_amdgcn_workitem_id_x() != 0)
		return;
	if (init_only) {
		__builtin_amdgcn_ds_gws_init(groups - 1, 0);
		return;
	}
	for (r = 0; r < rounds; r++) {
		out[wg] = r + 1;
		__builtin_amdgcn_fence(__ATOMIC_RELEASE, "agent");
		__builtin_amdgcn_ds_gws_barrier(groups - 1, 0);
		__builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "agent");
		if (out[(wg + 1) % groups] < r + 1)
			out[groups + wg] = out[groups + wg] + 1;
	}
}
