#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# The demo run inside the test VM by `make demo` (scripts/demo.sh): amdgpu is
# loaded, kfd_preempt beside it, and the CLI asks the module what it offers.
set -e
echo "== modules loaded =="
grep -E '^(amdgpu|kfd_preempt) ' /proc/modules | cut -d' ' -f1,2,3
echo "== device nodes =="
ls -l /dev/kfd /dev/kfd_preempt
echo "== kfd-preempt info =="
kfd-preempt info
