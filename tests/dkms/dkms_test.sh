#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# kfd_preempt through DKMS, as an operator installs it: the DKMS source tree
# (scripts/dkms-source.sh) is added to and built by the real `dkms`, in a
# scratch DKMS tree, for the test kernel; the module DKMS built loads in the
# test VM and answers INFO; DKMS skips a kernel without CONFIG_RUST; the
# build step refuses, saying why, without amdgpu's source and when modprobe
# would load an amdgpu that is not the kernel's own (amdgpu-dkms) whose
# source DKMS does not know, unless the operator names the source and
# module; it picks that source as DKMS knows it, and takes amdkfd's flags
# from an object's .cmd file; it refuses, naming what to
# install, a kernel whose own compilers (GCC or clang, rustc, bindgen) are
# not there or not those named, and headers without Rust metadata when no
# kernel source can make it; Rust metadata whose exports are not the
# kernel's is refused; the Makefile refuses other compilers. KTAP, and a last line
# "N passed, M failed".
set -uo pipefail
. "$(dirname "$0")/../../scripts/lib.sh"

. "$(dirname "$0")/../lib/ktap.sh"
# A stand-in modinfo in BINDIR that names KO as the amdgpu modprobe loads,
# and KO itself (empty).
fake_modinfo() {
	mkdir -p "$1" "$(dirname "$2")"
	: >"$2"
	printf '#!/bin/sh\necho %s\n' "$2" >"$1/modinfo"
	chmod +x "$1/modinfo"
}

# A stand-in kernel build tree in DIR: the test kernel's own compiler lines
# (so that the build step finds its compilers) and Rust metadata files, and
# a .config saying CONFIG_RUST=y, with LINE... appended (later lines win).
fake_kernel() {
	local dir=$1
	shift
	mkdir -p "$dir/rust" "$dir/scripts"
	{
		echo CONFIG_RUST=y
		grep -E '^CONFIG_(CC_IS_[A-Z]+|CC_VERSION_TEXT|CLANG_VERSION|RUSTC_VERSION_TEXT|BINDGEN_VERSION_TEXT)=' \
			"$kb/.config"
		printf '%s\n' "$@"
	} | tac | awk -F= '!seen[$1]++' | tac >"$dir/.config"
	: >"$dir/rust/libkernel.rmeta"
	: >"$dir/scripts/target.json"
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
export KFDP_LLVM=-$KFDP_LLVM_VERSION KFDP_RUSTC=$KFDP_RUSTC KFDP_BINDGEN=$KFDP_BINDGEN
export KFDP_MAKE_ARGS=RUST_LIB_SRC=$KFDP_RUST_LIB_SRC
dkms_args=(--sourcetree "$KFDP_ROOT/out/dkms" --dkmstree "$scratch/dkms")

ktap_header
ktap_plan 21
if ! command -v dkms >/dev/null; then
	for i in $(seq 17); do skip "dkms_case_$i" "dkms is not installed"; done
	ktap_summary
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
fake_kernel "$scratch/nosrc"
: >"$scratch/nosrc/drivers/gpu/drm/amd/amdgpu/amdgpu.ko"
out=$(env -u KFDP_AMDGPU_SRC -u KFDP_AMDGPU_KO sh "$tree/dkms-build.sh" 0.0.0-nosrc \
	"$scratch/nosrc" 2>&1)
rc=$?
sed 's/^/# /' <<<"$out"
[ "$rc" != 0 ] && grep -q 'no amdgpu source' <<<"$out"
check $? "build_step_refuses_without_amdgpu_source"

# A kernel whose amdgpu is ROCm's amdgpu-dkms (modprobe loads one from
# updates/dkms) and DKMS knows no amdgpu source: the build step refuses
# before compiling anything, rather than build against the kernel's
# in-tree amdgpu source. (The Debian run builds on a stand-in source.)
fake_modinfo "$scratch/rocm/bin" "$scratch/rocm-lib/updates/dkms/amdgpu.ko"
fake_kernel "$scratch/rocm"
# A `dkms` whose status is the lines of $DKMS_STATUS.
printf '#!/bin/sh
[ "$1" = status ] && printf "%%s" "$DKMS_STATUS"
' >"$scratch/rocm/bin/dkms"
chmod +x "$scratch/rocm/bin/dkms"
out=$(env -u KFDP_AMDGPU_KO -u KFDP_AMDGPU_SRC PATH="$scratch/rocm/bin:$PATH" DKMS_STATUS="" \
	sh "$tree/dkms-build.sh" 0.0.0-rocm "$scratch/rocm" 2>&1)
rc=$?
sed 's/^/# /' <<<"$out"
[ "$rc" != 0 ] && grep -q 'DKMS knows no amdgpu source' <<<"$out" &&
	grep -q "ROCm's amdgpu-dkms or another out-of-tree build" <<<"$out" &&
	! grep -q 'amdgpu source .*, amdgpu.ko' <<<"$out"
check $? "build_step_refuses_amdgpu_dkms_without_its_source"

# Which amdgpu-dkms source (scripts/amdgpu-dkms-prepare.sh): the one DKMS
# installed for the kernel, before any other it knows; of several, none
# installed for the kernel, none, saying which.
prepare() {
	env -u KFDP_AMDGPU_DKMS_SRC PATH="$scratch/rocm/bin:$PATH" DKMS_STATUS="$1" \
		bash "$tree/scripts/amdgpu-dkms-prepare.sh" 0.0.0-rocm "$scratch/rocm" 2>&1
}
out=$(prepare "amdgpu/2.0: added
amdgpu/1.0, 0.0.0-rocm, x86_64: installed
amdgpu/3.0, 9.9.9, x86_64: installed
")
sed 's/^/# /' <<<"$out"
grep -q 'the amdgpu-dkms source /usr/src/amdgpu-1.0 is not a directory' <<<"$out"
check $? "amdgpu_dkms_source_is_the_one_installed_for_the_kernel"
out=$(prepare "amdgpu/2.0: added
amdgpu/3.0, 9.9.9, x86_64: installed
")
sed 's/^/# /' <<<"$out"
grep -q 'DKMS knows several amdgpu sources (2.0 3.0) and none is installed for Linux 0.0.0-rocm' <<<"$out"
check $? "amdgpu_dkms_source_of_several_is_refused"

# The flags of an amdgpu-dkms amdkfd object (scripts/amdgpu-dkms-flags.py):
# the package's own directories and forced includes, made absolute, and
# its defines, in order; the kernel's paths and kbuild's per-object names
# dropped. An object of another tree gives none, and is refused.
mkdir -p "$scratch/flags/amd/amdkfd" "$scratch/flags/amd/amdgpu" "$scratch/flags/include"
: >"$scratch/flags/amd/amdkfd/kfd_x.c"
printf '%s\n' "savedcmd_amd/amdgpu/../amdkfd/kfd_x.o := gcc -Wp,-MMD,amd/amdkfd/.kfd_x.o.d -nostdinc -I./include -include ./include/rename_symbol.h -include amd/dkms/config/config.h -I/kernel/arch/x86/include -I /kernel/arch/x86/include/generated -include /kernel/include/linux/kconfig.h -D__KERNEL__ -DHAVE_CONFIG_H -D TTM_NAME=amdttm -Iamd/amdgpu/../amdkfd -DMODULE -DKBUILD_BASENAME='\"kfd_x\"' -DKBUILD_MODNAME='\"amdgpu\"' -D__KBUILD_MODNAME=kmod_amdgpu -c -o amd/amdgpu/../amdkfd/kfd_x.o amd/amdgpu/../amdkfd/kfd_x.c" \
	>"$scratch/flags/amd/amdkfd/.kfd_x.o.cmd"
t=$(cd "$scratch/flags" && pwd -P)
out=$(python3 "$tree/scripts/amdgpu-dkms-flags.py" "$scratch/flags/amd/amdkfd/.kfd_x.o.cmd" "$scratch/flags" 2>&1)
want="-I$t/include -include $t/include/rename_symbol.h -include $t/amd/dkms/config/config.h -D__KERNEL__ -DHAVE_CONFIG_H -DTTM_NAME=amdttm -I$t/amd/amdkfd"
echo "# $out"
[ "$out" = "$want" ]
check $? "amdgpu_dkms_flags_are_the_packages_own_in_order"
mkdir -p "$scratch/other"
out=$(python3 "$tree/scripts/amdgpu-dkms-flags.py" "$scratch/flags/amd/amdkfd/.kfd_x.o.cmd" "$scratch/other" 2>&1)
rc=$?
echo "# $out"
[ "$rc" != 0 ] && grep -q 'names nothing of' <<<"$out"
check $? "amdgpu_dkms_flags_of_another_tree_are_refused"

# The kernel's own amdgpu.ko, as modinfo names it under a merged /usr
# (/usr/lib/modules/KVER/kernel/...), passes that check: the step goes on
# to look for the source, which this kernel lacks.
# (The module tree is outside the build tree, which would pass anyway.)
fake_modinfo "$scratch/intree/bin" \
	"$scratch/root/usr/lib/modules/0.0.0-intree/kernel/drivers/gpu/drm/amd/amdgpu/amdgpu.ko"
fake_kernel "$scratch/intree"
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

# The kernel's own compilers (scripts/kernel-toolchain.sh), or a refusal
# that names them before anything is compiled. Each stand-in kernel has its
# amdgpu.ko in its tree, and the build step would go on to look for its
# amdgpu source, which none has: a refusal must come before that.
# usage: build_step_refuses CASE KDIR PATTERN [env's arguments ...]
build_step_refuses() {
	local name=$1 kdir=$2 pattern=$3 out rc
	shift 3
	mkdir -p "$kdir/drivers/gpu/drm/amd/amdgpu"
	: >"$kdir/drivers/gpu/drm/amd/amdgpu/amdgpu.ko"
	out=$(env -u KFDP_AMDGPU_SRC -u KFDP_AMDGPU_KO "$@" \
		sh "$tree/dkms-build.sh" 0.0.0-test "$kdir" 2>&1)
	rc=$?
	sed 's/^/# /' <<<"$out"
	[ "$rc" != 0 ] && grep -q "$pattern" <<<"$out" && ! grep -q 'no amdgpu source' <<<"$out"
	check $? "$name"
}
debian_rustc='rustc 1.85.1 (4eb161250 2025-03-15) (built from a source tarball)'
mkdir -p "$scratch/bin"
printf '#!/bin/sh\necho "rustc 1.96.0 (ac68faa20 2026-05-25)"\n' >"$scratch/bin/rustc"
chmod +x "$scratch/bin/rustc"
fake_kernel "$scratch/rustc" "CONFIG_RUSTC_VERSION_TEXT=\"$debian_rustc\""
build_step_refuses build_step_refuses_another_rustc "$scratch/rustc" \
	"built with '$debian_rustc'.*rustc is 'rustc 1.96.0.*Install rustc 1.85.1 (Debian 13: package rustc" \
	-u KFDP_RUSTC PATH="$scratch/bin:$PATH"
build_step_refuses build_step_refuses_a_named_rustc_that_is_not_the_kernels "$scratch/rustc" \
	"found: $scratch/bin/rustc is 'rustc 1.96.0" KFDP_RUSTC="$scratch/bin/rustc"

gcc_text="x86_64-linux-gnu-gcc-14 (Debian 14.2.0-19) 14.2.0"
fake_kernel "$scratch/gcc" "CONFIG_CC_IS_GCC=y" "CONFIG_CC_IS_CLANG=n" "CONFIG_CC_VERSION_TEXT=\"$gcc_text\""
build_step_refuses build_step_refuses_clang_for_a_gcc_kernel "$scratch/gcc" \
	"was built with GCC ('$gcc_text'), but LLVM=1 asks for clang" KFDP_LLVM=1

fake_kernel "$scratch/gcc-missing" "CONFIG_CC_IS_GCC=y" "CONFIG_CC_IS_CLANG=n" \
	'CONFIG_CC_VERSION_TEXT="x86_64-linux-gnu-gcc-99 (Debian 99.1.0-1) 99.1.0"'
build_step_refuses build_step_refuses_a_gcc_kernel_without_its_gcc "$scratch/gcc-missing" \
	"install x86_64-linux-gnu-gcc-99 (Debian: package gcc-99)" -u KFDP_LLVM

fake_kernel "$scratch/clang-other" "CONFIG_CLANG_VERSION=990100" \
	'CONFIG_CC_VERSION_TEXT="Debian clang version 99.1.0 (1)"'
build_step_refuses build_step_refuses_a_clang_kernel_without_its_clang "$scratch/clang-other" \
	"install clang-99 (Debian: package clang-99)\|but clang.* is '" -u KFDP_LLVM

fake_kernel "$scratch/bindgen" 'CONFIG_BINDGEN_VERSION_TEXT="bindgen 0.71.1"'
build_step_refuses build_step_refuses_another_bindgen "$scratch/bindgen" \
	"built with 'bindgen 0.71.1'.*Install bindgen 0.71.1 (Debian 13: package bindgen)" -u KFDP_BINDGEN

# Headers without Rust metadata (Debian's), and no kernel source to make
# it from: a refusal naming the package.
fake_kernel "$scratch/nometa"
rm -f "$scratch/nometa/rust/libkernel.rmeta"
: >"$scratch/nometa/Module.symvers"
build_step_refuses build_step_refuses_headers_without_rust_metadata_or_source "$scratch/nometa" \
	"carry no Rust metadata.*install linux-source-0.0 (Debian)" -u KFDP_LINUX_SRC

# Rust metadata made by another rustc names the kernel crate's symbols
# with another hash: the check of a prepared tree's exports against the
# kernel's Module.symvers passes for the test kernel's own tree, and
# refuses once one of the kernel's Rust symbols is renamed as another
# rustc would name it.
meta=$tree/scripts/kernel-rust-metadata.sh
sym=$(awk '$2 ~ /^_R/ { print $2; exit }' "$kb/Module.symvers")
sed "s/\t$sym\t/\t${sym}X\t/" "$kb/Module.symvers" >"$scratch/other-rustc.symvers"
sh "$meta" --check-exports "$kb" "$kb/Module.symvers" >/dev/null 2>&1 && {
	out=$(sh "$meta" --check-exports "$kb" "$scratch/other-rustc.symvers" 2>&1)
	rc=$?
	sed 's/^/# /' <<<"$out"
	[ "$rc" != 0 ] && grep -q "1 Rust symbols it exports are not in .*(the first: $sym)" <<<"$out"
}
check $? "rust_metadata_of_another_rustc_is_refused"

# The Makefile reads the kernel's compilers too: LLVM= for a GCC kernel is
# refused before anything is compiled.
out=$(make -C "$tree" KDIR="$scratch/gcc" LLVM=1 modules 2>&1)
rc=$?
sed 's/^/# /' <<<"$out"
[ "$rc" != 0 ] && grep -q "but LLVM=1 asks for clang" <<<"$out" && ! grep -q '^ *\(CC\|RUSTC\) \[M\]' <<<"$out"
check $? "makefile_refuses_other_compilers_than_the_kernels"

ktap_summary
