#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# The demo run inside the test VM by `make demo` (scripts/demo.sh): amdgpu is
# loaded, kfd_preempt beside it with two simulated nodes (0: HWS, 1: MES),
# the CLI asks the module what it offers, and a daemon preempts and resumes
# a simulated tenant, first as a small C daemon (tests/vm/sim_demo.c), then with
# the kfd-preempt CLI (the tenant is the developer tool's, kfdp-scenario
# sim-tenant).
set -e
echo "== modules loaded =="
grep -E '^(amdgpu|kfd_preempt) ' /proc/modules | cut -d' ' -f1,2,3
echo "== device nodes =="
ls -l /dev/kfd /dev/kfd_preempt /dev/kfd_preempt_sim
echo "== kfd-preempt info =="
kfd-preempt info
echo "== a scheduler preempts and resumes a tenant (simulated node) =="
sim_demo
echo "== simulated node counters =="
cat /sys/kernel/debug/kfd_preempt/sim/status
echo "== the same from the shell: kfd-preempt list / preempt / resume =="
kfdp-scenario sim-tenant --queues 3 --node 0 >/tmp/tenant.out &
tenant=$!
sleep 1
echo "\$ kfd-preempt list $tenant"
kfd-preempt list "$tenant"
echo "\$ kfd-preempt preempt $tenant --all &"
kfd-preempt preempt "$tenant" --all &
holder=$!
sleep 1
echo "\$ kfd-preempt list $tenant    # preempted"
kfd-preempt list "$tenant"
sleep 1
# Not the whole table again: only what a second changed (nothing retired).
echo "\$ sleep 1; kfd-preempt list $tenant | awk '{print \$1, \$2, \$NF}'    # a second later"
kfd-preempt list "$tenant" | awk '{print $1, $2, $NF}'
echo "\$ kfd-preempt resume $tenant"
kfd-preempt resume "$tenant"
wait "$holder"
sleep 1
echo "\$ kfd-preempt list $tenant    # running again"
kfd-preempt list "$tenant"
# Waited for, so that its files are closed before the module is unloaded.
kill "$tenant"
wait "$tenant"
