// SPDX-License-Identifier: GPL-2.0
/*
 * stamp: a short kernel for a stream of dispatches. It writes the GPU's
 * constant-rate clock (s_memrealtime, 100 MHz) into its slot when it runs,
 * so the host learns when each dispatch of the stream executed: whether
 * packets rung while the queue was preempted ran after the resume, and how
 * long after a dispatch's end the CP writes the read pointer back.
 */
static ulong now(void)
{
#if __has_builtin(__builtin_readsteadycounter)
	return __builtin_readsteadycounter();	/* clang 19 and later */
#elif defined(__GFX11__) || defined(__GFX12__)
	return __builtin_amdgcn_s_sendmsg_rtnl(0x83);	/* MSG_RTN_GET_REALTIME */
#else
	return __builtin_amdgcn_s_memrealtime();
#endif
}

__kernel void stamp(__global volatile ulong *stamps, uint slot)
{
	if (__builtin_amdgcn_workitem_id_x() == 0 &&
	    __builtin_amdgcn_workgroup_id_x() == 0)
		stamps[slot] = now();
}
