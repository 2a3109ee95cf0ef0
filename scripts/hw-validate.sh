#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# The first hour on a real AMD GPU host (MI300) in one command: build
# kfd_preempt and the hardware validation kit against the running kernel,
# load the module, run the kit's checks and its measurement, unload, and
# leave one report directory (Documentation/hardware-validation.rst).
#
# usage: sudo scripts/hw-validate.sh [--report DIR] [--amdgpu-src DIR]
#                                    [--kernel-src DIR] [--preflight]
#
#   --report DIR      where the report goes (default out/hw-report-<date>)
#   --amdgpu-src DIR  amdgpu's source as the running amdgpu was built from:
#                     <linux source>/drivers/gpu/drm/amd, or ROCm's
#                     /usr/src/amdgpu-<version>/amd (default: $AMDGPU_SRC,
#                     else the first of those found)
#   --kernel-src DIR  a source tree of the running kernel, for the kselftest
#                     harness header (default: derived from --amdgpu-src)
#   --preflight       check what the host has, build and load nothing
#
# AMDGPU_KO names the loaded amdgpu.ko if `modinfo -n amdgpu` does not; CLANG
# a clang with the AMDGPU target (ROCm's /opt/rocm/llvm/bin/clang works);
# KDIR a kernel build tree other than /lib/modules/$(uname -r)/build.
#
# Refuses, changing nothing, on a host without root, /dev/kfd, a kernel
# build directory with CONFIG_RUST, or amdgpu's source.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
report="" amdgpu_src=${AMDGPU_SRC:-} kernel_src="" preflight=0
while [ $# -gt 0 ]; do
	case $1 in
	--report) report=$2; shift ;;
	--amdgpu-src) amdgpu_src=$2; shift ;;
	--kernel-src) kernel_src=$2; shift ;;
	--preflight) preflight=1 ;;
	-h|--help) sed -n '3,26p' "$0"; exit 0 ;;
	*) echo "hw-validate: unknown argument '$1' (see --help)" >&2; exit 2 ;;
	esac
	shift
done
refuse() { echo "hw-validate: refusing: $*" >&2; exit 2; }
say() { echo "hw-validate: $*" >&2; }

# --- What the host must have -------------------------------------------------
kver=$(uname -r)
kdir=${KDIR:-/lib/modules/$kver/build}
# KFDP_KFD_DEV only lets tests/hw/preflight_test.sh reach the later refusals.
[ -e "${KFDP_KFD_DEV:-/dev/kfd}" ] || refuse "no /dev/kfd: this host has no AMD GPU with amdkfd loaded"
[ "$(id -u)" = 0 ] || refuse "run as root: it loads a module and reads amdkfd's debugfs"
[ -d "$kdir" ] || refuse "no kernel build directory $kdir (install the headers of $kver)"
config=$kdir/.config
[ -r "$config" ] || config=/boot/config-$kver
grep -q '^CONFIG_RUST=y' "$config" 2>/dev/null ||
	refuse "kernel $kver is built without CONFIG_RUST ($config): kfd_preempt is a Rust module"
if [ -z "$amdgpu_src" ]; then
	for d in /usr/src/amdgpu-*/amd "/usr/src/linux-source-${kver%%-*}/drivers/gpu/drm/amd" \
		"$kdir/../source/drivers/gpu/drm/amd"; do
		[ -d "$d/amdkfd" ] && { amdgpu_src=$d; break; }
	done
fi
[ -n "$amdgpu_src" ] && [ -r "$amdgpu_src/amdkfd/kfd_priv.h" ] ||
	refuse "no amdgpu source (want <dir>/amdkfd/kfd_priv.h): pass --amdgpu-src, the source the running amdgpu was built from"
# The amdgpu.ko that is loaded: the module records its identity (srcversion).
amdgpu_ko=${AMDGPU_KO:-$(modinfo -n amdgpu 2>/dev/null || true)}
[ -n "$amdgpu_ko" ] && [ -r "$amdgpu_ko" ] ||
	refuse "cannot find the loaded amdgpu.ko (modinfo -n amdgpu): set AMDGPU_KO"
if [ -z "$kernel_src" ]; then
	for d in "$amdgpu_src/../../../.." "$kdir/../source" "$kdir"; do
		[ -r "$d/tools/testing/selftests/kselftest_harness.h" ] && { kernel_src=$d; break; }
	done
fi
[ -n "$kernel_src" ] && [ -r "$kernel_src/tools/testing/selftests/kselftest_harness.h" ] ||
	refuse "no kselftest harness header: pass --kernel-src, a source tree of Linux $kver"
[ -d /sys/kernel/debug/kfd ] || mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null || true
[ -d /sys/kernel/debug/kfd ] || refuse "amdkfd's debugfs (/sys/kernel/debug/kfd) is not available"
! grep -q '^kfd_preempt ' /proc/modules ||
	refuse "kfd_preempt is already loaded: unload it (rmmod kfd_preempt) so the run starts clean"
for tool in cargo rustc bindgen make gcc python3; do
	command -v "$tool" >/dev/null ||
		refuse "no $tool on PATH (under sudo, keep the user's: sudo env PATH=\"\$PATH\" $0)"
done
# The running kernel's own C compiler, rustc and bindgen, from its .config:
# a module built by any other rustc cannot load.
toolchain=$(sh "$root/scripts/kernel-toolchain.sh" "$kdir") ||
	refuse "this host lacks the compilers Linux $kver was built with (above)"
clang=${CLANG:-clang}
command -v "$clang" >/dev/null && "$clang" -print-targets 2>/dev/null | grep -q amdgcn ||
	refuse "no clang with the AMDGPU target (set CLANG, e.g. /opt/rocm/llvm/bin/clang)"
# The kit itself (GPU workloads, HSA host programs) builds here: this
# proves clang, the HSA headers and gcc at once. Into the checkout's out/hw,
# as the run below would build it, so the run does not build it again.
mkdir -p "$root/out/hw"
make -C "$root/tests/hw" OUTPUT="$root/out/hw" CLANG="$clang" KFDP_UAPI="$root/uapi" \
	KSFT_DIR="$kernel_src/tools/testing/selftests" all \
	>"$root/out/hw/build.log" 2>&1 || {
	tail -n 20 "$root/out/hw/build.log" >&2
	refuse "the kit does not build here (HSA headers: set HSA_INCLUDE; clang: set CLANG)"
}
# The amdkfd source must be the one the glue was reviewed against (the
# module build checks it too; this says so before anything is built).
fingerprint=$(mktemp)
python3 "$root/scripts/amdkfd-fingerprint.py" check "$amdgpu_src" \
	"$root/src/glue/amdkfd-reviewed.txt" "$fingerprint" ||
	refuse "amdkfd in $amdgpu_src differs from the reviewed one (listed above)"
rm -f "$fingerprint"
say "host: Linux $kver, amdgpu source $amdgpu_src ($amdgpu_ko), kernel source $kernel_src"
[ "$preflight" = 1 ] && { say "preflight passed"; exit 0; }

# --- Build against the running kernel ----------------------------------------
report=${report:-$root/out/hw-report-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$report"
cp "$root/out/hw/build.log" "$report/kit-build.log"
say "building kfd_preempt for $kver with" $toolchain
# Headers without Rust metadata (Debian's): a tree prepared from the
# kernel's source, once (scripts/kernel-rust-metadata.sh).
kdir=$(sh "$root/scripts/kernel-rust-metadata.sh" "$kver" "$kdir") ||
	refuse "no Rust metadata for Linux $kver (above)"
make -C "$root" KDIR="$kdir" AMDGPU_SRC="$amdgpu_src" AMDGPU_KO="$amdgpu_ko" \
	>"$report/build.log" 2>&1 ||
	{ tail -n 30 "$report/build.log"; refuse "module build failed ($report/build.log)"; }
say "building kfd-preempt and kfdp-scenario (the kit's workloads and hw_test were built above)"
(cd "$root/userspace" && cargo build --release --quiet -p kfd-preempt-cli -p kfdp-scenario) \
	>>"$report/build.log" 2>&1 || { tail -n 30 "$report/build.log"; refuse "kit build failed"; }
python3 "$root/tests/hw/check_code_objects.py" "$root/out/hw/kernels" >"$report/code_objects.ktap" ||
	refuse "the kit's code objects are wrong ($report/code_objects.ktap)"

# --- Load, run, unload ---------------------------------------------------------
say "loading kfd_preempt"
insmod "$root/kfd_preempt.ko"
trap 'rmmod kfd_preempt 2>/dev/null || say "rmmod kfd_preempt failed: see dmesg"' EXIT
export PATH=$root/out/hw/bin:$root/userspace/target/release:$PATH
export KFDP_HW_KERNELS=$root/out/hw/kernels KFDP_HW_TEST=$root/out/hw/hw_test
rc=0
"$root/tests/hw/run-kit.sh" --report "$report" | tee "$report/kit.ktap" || rc=$?
say "report: $report ($(tail -n1 "$report/kit.ktap"))"
exit $rc
