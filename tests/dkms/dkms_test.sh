#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# kfd_preempt through DKMS, as an operator installs it: the DKMS source tree
# (scripts/dkms-source.sh) is added to and built by the real `dkms`, in a
# scratch DKMS tree, for the test kernel; the module DKMS built loads in the
# test VM and answers INFO; DKMS skips a kernel without CONFIG_RUST; the
# build step refuses, saying why, without amdgpu's source and when modprobe
# would load an amdgpu that is not the kernel's own (amdgpu-dkms), unless
# the operator names the source and module. KTAP, and a last line
# "N passed, M failed".
set -uo pipefail
. "$(dirname "$0")/../../scripts/lib.sh"

n=0 fails=0
ok() { n=$((n + 1)); echo "ok $n $1"; }
nok() { n=$((n + 1)); fails=$((fails + 1)); echo "not ok $n $1"; }
check() { if [ "$1" = 0 ]; then ok "$2"; else nok "$2"; fi; }
# A stand-in modinfo in BINDIR that names KO as the amdgpu modprobe loads,
# and KO itself (empty).
fake_modinfo() {
	mkdir -p "$1" "$(dirname "$2")"
	: >"$2"
	printf '#!/bin/sh\necho %s\n' "$2" >"$1/modinfo"
	chmod +x "$1/modinfo"
}

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
kb=$(kfdp_kernel_build_dir)
kver=$(cat "$kb/include/config/kernel.release")
version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$KFDP_ROOT/userspace/Cargo.toml" | head -n1)
# What a host's build tree says for itself; the test kernel's toolchain
# (clang-N, the project's bindgen) has to be named.
export KFDP_AMDGPU_SRC=$(kfdp_kernel_src_dir)/drivers/gpu/drm/amd
export KFDP_AMDGPU_KO=$kb/drivers/gpu/drm/amd/amdgpu/amdgpu.ko
export KFDP_LLVM=-$KFDP_LLVM_VERSION
KFDP_MAKE_ARGS=$(kfdp_kmake_args | grep -v '^LLVM=' | tr '\n' ' ')
export KFDP_MAKE_ARGS
dkms_args=(--sourcetree "$KFDP_ROOT/out/dkms" --dkmstree "$scratch/dkms")

echo "TAP version 13"
echo "1..8"
if ! command -v dkms >/dev/null; then
	for i in 1 2 3 4 5 6 7 8; do echo "ok $i # SKIP dkms is not installed"; done
	echo "0 passed, 0 failed, 8 skipped"
	exit 0
fi

tree=$("$KFDP_ROOT/scripts/dkms-source.sh")
grep -q "^PACKAGE_VERSION=\"$version\"" "$tree/dkms.conf" && [ -x "$tree/dkms-build.sh" ] &&
	[ -f "$tree/Kbuild" ] && [ -f "$tree/src/kfd_preempt_main.rs" ]
check $? "dkms_source_tree"

mkdir -p "$scratch/dkms"
dkms add -m kfd_preempt -v "$version" "${dkms_args[@]}" >"$scratch/add.log" 2>&1 &&
	dkms build -m kfd_preempt -v "$version" -k "$kver" --kernelsourcedir "$kb" \
		"${dkms_args[@]}" >"$scratch/build.log" 2>&1
rc=$?
ko=$scratch/dkms/kfd_preempt/$version/$kver/$(uname -m)/module/kfd_preempt.ko
[ "$rc" = 0 ] || sed 's/^/# /' "$scratch/add.log" "$scratch/build.log" \
	"$scratch"/dkms/kfd_preempt/"$version"/build/make.log 2>/dev/null
[ "$rc" = 0 ] && [ -f "$ko" ] && modinfo -F vermagic "$ko" | grep -q "^$kver " &&
	modinfo -F softdep "$ko" | grep -q 'pre: amdgpu'
check $? "dkms_build_for_the_test_kernel"

# The module DKMS built, in the VM: it loads and answers INFO (info_test).
if [ -f "$ko" ]; then
	out=$("$KFDP_ROOT/tests/vm/run" --module "$ko" --no-kunit --kselftests info_test \
		--quiet --out "$KFDP_ROOT/out/vm-dkms" 2>&1)
	rc=$?
	grep -E '^(vm|kselftest info_test):' <<<"$out" | sed 's/^/# /'
	[ "$rc" = 0 ] && grep -q '^kselftest info_test: [1-9][0-9]* passed, 0 failed' <<<"$out"
	check $? "dkms_module_loads_and_answers_info"
else
	nok "dkms_module_loads_and_answers_info # no module built"
fi

# A kernel without Rust: DKMS skips it (BUILD_EXCLUSIVE_CONFIG), builds nothing.
mkdir -p "$scratch/norust"
printf 'CONFIG_MODULES=y\nCONFIG_CC_IS_CLANG=y\n' >"$scratch/norust/.config"
out=$(dkms build -m kfd_preempt -v "$version" -k 0.0.0-norust --kernelsourcedir \
	"$scratch/norust" "${dkms_args[@]}" 2>&1)
built=$(find "$scratch/dkms/kfd_preempt/$version/0.0.0-norust" -name '*.ko' 2>/dev/null)
grep -q 'BUILD_EXCLUSIVE' <<<"$out" && [ -z "$built" ]
rc=$?
[ "$rc" = 0 ] || sed 's/^/# /' <<<"$out"
check $rc "dkms_skips_a_kernel_without_rust"

# The build step itself, on a Rust kernel whose amdgpu source is nowhere.
# Its amdgpu.ko is its own (in its build tree).
mkdir -p "$scratch/nosrc/drivers/gpu/drm/amd/amdgpu"
printf 'CONFIG_RUST=y\nCONFIG_CC_IS_CLANG=y\n' >"$scratch/nosrc/.config"
: >"$scratch/nosrc/drivers/gpu/drm/amd/amdgpu/amdgpu.ko"
out=$(env -u KFDP_AMDGPU_SRC -u KFDP_AMDGPU_KO sh "$tree/dkms-build.sh" 0.0.0-nosrc \
	"$scratch/nosrc" 2>&1)
rc=$?
sed 's/^/# /' <<<"$out"
[ "$rc" != 0 ] && grep -q 'no amdgpu source' <<<"$out"
check $? "build_step_refuses_without_amdgpu_source"

# A kernel whose amdgpu is ROCm's amdgpu-dkms (modprobe loads one from
# updates/dkms): the build step refuses before compiling anything, rather
# than build against the kernel's in-tree amdgpu source.
fake_modinfo "$scratch/rocm/bin" "$scratch/rocm-lib/updates/dkms/amdgpu.ko"
printf 'CONFIG_RUST=y\nCONFIG_CC_IS_CLANG=y\n' >"$scratch/rocm/.config"
out=$(env -u KFDP_AMDGPU_KO PATH="$scratch/rocm/bin:$PATH" \
	sh "$tree/dkms-build.sh" 0.0.0-rocm "$scratch/rocm" 2>&1)
rc=$?
sed 's/^/# /' <<<"$out"
[ "$rc" != 0 ] && grep -q 'is not the kernel.s own' <<<"$out" &&
	! grep -q 'amdgpu source .*, amdgpu.ko' <<<"$out"
check $? "build_step_refuses_amdgpu_dkms_it_cannot_match"

# The kernel's own amdgpu.ko, as modinfo names it under a merged /usr
# (/usr/lib/modules/KVER/kernel/...), passes that check: the step goes on
# to look for the source, which this kernel lacks.
# (The module tree is outside the build tree, which would pass anyway.)
fake_modinfo "$scratch/intree/bin" \
	"$scratch/root/usr/lib/modules/0.0.0-intree/kernel/drivers/gpu/drm/amd/amdgpu/amdgpu.ko"
printf 'CONFIG_RUST=y\nCONFIG_CC_IS_CLANG=y\n' >"$scratch/intree/.config"
out=$(env -u KFDP_AMDGPU_KO -u KFDP_AMDGPU_SRC PATH="$scratch/intree/bin:$PATH" \
	sh "$tree/dkms-build.sh" 0.0.0-intree "$scratch/intree" 2>&1)
rc=$?
sed 's/^/# /' <<<"$out"
[ "$rc" != 0 ] && grep -q 'no amdgpu source' <<<"$out" && ! grep -q 'not the kernel.s own' <<<"$out"
check $? "build_step_takes_the_kernels_own_amdgpu"

# Both named: the operator vouches for the pair, and the step goes on.
out=$(PATH="$scratch/rocm/bin:$PATH" KFDP_AMDGPU_KO="$scratch/rocm-lib/updates/dkms/amdgpu.ko" \
	sh "$tree/dkms-build.sh" 0.0.0-rocm "$scratch/rocm" 2>&1)
sed 's/^/# /' <<<"$out" | head -n 3
grep -q 'kfd_preempt (dkms): Linux 0.0.0-rocm, amdgpu source' <<<"$out" &&
	! grep -q 'not the kernel.s own' <<<"$out"
check $? "build_step_builds_a_named_pair"

echo "$((n - fails)) passed, $fails failed"
[ "$fails" = 0 ]
