#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# In the VM (scripts/profile.sh): for each call of profile_batch, its mean
# time untraced, then a function_graph trace of a few repetitions, rooted at
# the ioctl syscall, between markers for the host to summarise. Rust code
# has no ftrace entry, so the C functions it calls show as the syscall's
# direct children; what the children do not account for is Rust's own time.
T=/sys/kernel/tracing
[ -e $T/trace ] || mount -t tracefs nodev $T
if ! grep -qw function_graph $T/available_tracers 2>/dev/null; then
	echo "# profile: this kernel has no function_graph tracer (use the bench kernel)"
	exit 1
fi
echo 0 >$T/tracing_on
echo function_graph >$T/current_tracer
echo __x64_sys_ioctl >$T/set_graph_function
echo 4 >$T/max_graph_depth
echo 1 >$T/options/funcgraph-tail
echo 0 >$T/options/funcgraph-irqs
echo 8192 >$T/buffer_size_kb
for spec in "info 1" "preempt 1" "validate 1" "preempt 64" "validate 64" "freeze 1" "query 64"; do
	set -- $spec
	untraced=$(profile_batch "$1" "$2" 300) || exit 1
	echo >$T/trace
	echo 1 >$T/tracing_on
	sh -c "echo \$\$ >$T/set_ftrace_pid; exec profile_batch $1 $2 30" >/dev/null || exit 1
	echo 0 >$T/tracing_on
	echo >$T/set_ftrace_pid
	echo "=== kfdp-profile $1 $2 begin: $untraced ==="
	cat $T/trace
	echo "=== kfdp-profile $1 $2 end ==="
done
echo nop >$T/current_tracer
