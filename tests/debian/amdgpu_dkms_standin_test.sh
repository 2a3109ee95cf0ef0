#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# kfd_preempt built as on a host whose amdgpu is ROCm's amdgpu-dkms, by a
# stand-in for that package's source (tests/amdgpu-dkms-standin): run.sh
# had DKMS's build step of kfd_preempt (packaging/dkms/dkms-build.sh)
# configure a copy of the stand-in for this kernel, take the flags of one
# of its amdkfd objects and compile the glue with them, once with the
# stand-in configured as the kernel's own amdgpu ("same") and once with a
# config.h that moves struct kfd_node's fields by 8 bytes ("differs").
# The amdgpu running here is the kernel's own, as the stand-in's amdgpu.ko
# (a copy of it) stands for. So "same" must load with the layout gate
# finding every field where its BTF has it, and "differs" must be refused
# at load, naming a field of struct kfd_node, leaving nothing loaded.
# Runs with kfd_preempt not loaded. KTAP.
dir=/kfdp/amdgpu-dkms
k=$(uname -r)
for ktap in "$(dirname "$0")/../lib/ktap.sh" /kfdp/lib/ktap.sh; do
	[ -f "$ktap" ] && break
done
. "$ktap"
# How many kernel log lines match $1 (to see what one insmod added).
count() { dmesg | grep -c "$1"; }

ktap_header
if [ "$(id -u)" != 0 ] || grep -q '^kfd_preempt ' /proc/modules; then
	ktap_skip_all "needs root and kfd_preempt not loaded"
fi
ktap_plan 2
modprobe amdgpu

matches="kfd_preempt: the layout of [0-9]* amdkfd fields matches amdgpu's BTF"
before=$(count "$matches")
if [ -e "$dir/$k.same.ko" ] && insmod "$dir/$k.same.ko" sim_nodes=1; then
	[ "$(count "$matches")" -gt "$before" ] && [ -c /dev/kfd_preempt ]
	rc=$?
	dmesg | grep "$matches" | tail -n1 | sed 's/^/# /'
	rmmod kfd_preempt || rc=1
else
	echo "# $dir/$k.same.ko is missing or insmod refused it"
	rc=1
fi
check $rc "built with the flags of a stand-in configured as the kernel's amdgpu: loads, layout matches"

refused="kfd_preempt: refusing amdgpu: struct kfd_node\."
before=$(count "$refused")
if [ -e "$dir/$k.differs.ko" ] && ! insmod "$dir/$k.differs.ko" sim_nodes=1 2>/dev/null; then
	[ "$(count "$refused")" -gt "$before" ] && ! grep -q '^kfd_preempt ' /proc/modules
	rc=$?
	dmesg | grep "$refused" | tail -n1 | sed 's/^/# /'
else
	echo "# $dir/$k.differs.ko is missing or was loaded"
	grep -q '^kfd_preempt ' /proc/modules && rmmod kfd_preempt
	rc=1
fi
check $rc "built with the flags of a stand-in whose config.h moves kfd_node's fields: refused at load, naming one"

ktap_finished
