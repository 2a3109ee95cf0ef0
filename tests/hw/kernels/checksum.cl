// SPDX-License-Identifier: GPL-2.0
/*
 * checksum: a long computation whose result depends on every VGPR of its
 * state and on LDS shared across the workgroup, round after round. A
 * context save or restore that loses or mixes up a register, a lane or an
 * LDS word changes out[]; the host compares it with an unpreempted run.
 * The LDS is the dispatch's dynamic group segment (KFDP_WG words, kernarg
 * offset 0): a __local variable would live in clang's non-kernel body.
 */
#define KFDP_STATE 24 /* live 32-bit values per lane, kept in VGPRs */
#define KFDP_WG 256   /* workgroup size the host dispatches with */

/* A workgroup barrier with LDS ordering, without the OpenCL library. */
static void wg_barrier(void)
{
	__builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
	__builtin_amdgcn_s_barrier();
	__builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
}

static uint mix(uint x)
{
	x ^= x >> 16;
	x *= 0x7feb352dU;
	x ^= x >> 15;
	x *= 0x846ca68bU;
	return x ^ (x >> 16);
}

__kernel __attribute__((reqd_work_group_size(KFDP_WG, 1, 1)))
void checksum(__global uint *out, __local uint *lds, uint rounds)
{
	uint lid = __builtin_amdgcn_workitem_id_x();
	uint gid = __builtin_amdgcn_workgroup_id_x() * KFDP_WG + lid;
	uint s[KFDP_STATE];
	uint r, j;

	for (j = 0; j < KFDP_STATE; j++)
		s[j] = mix(gid * KFDP_STATE + j + 1);
	for (r = 0; r < rounds; r++) {
#pragma unroll
		for (j = 0; j < KFDP_STATE; j++)
			s[j] = mix(s[j] + s[(j + 1) % KFDP_STATE] + r);
		lds[lid] = s[r % KFDP_STATE];
		wg_barrier();
		s[0] ^= lds[(lid + 1 + r) % KFDP_WG];
		wg_barrier();
	}
	r = 0;
	for (j = 0; j < KFDP_STATE; j++)
		r = mix(r ^ s[j]);
	out[gid] = r;
}
