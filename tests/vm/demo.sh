#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# The demo run inside the test VM by `make demo` (scripts/demo.sh): amdgpu is
# loaded, kfd_preempt beside it with two simulated nodes (0: HWS, 1: MES),
# the CLI asks the module what it offers, and a daemon preempts and resumes
# a simulated tenant.
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
