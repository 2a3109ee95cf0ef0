#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# DKMS's build step for kfd_preempt: finds what the build needs for kernel
# KVER (whose build tree is KDIR) and refuses, saying what is missing, if
# it is not there.
#
# usage: dkms-build.sh KVER KDIR [VAR=value ...] | --clean
#
# DKMS appends CC= and LD= for a kernel built with clang; LLVM= chooses the
# whole toolchain here, so those are dropped.
#
# The environment may name what cannot be found (DKMS passes it through):
#   KFDP_AMDGPU_SRC  the amdgpu source the loaded amdgpu.ko was built from
#                    (.../drivers/gpu/drm/amd)
#   KFDP_AMDGPU_KO   that amdgpu.ko (for its srcversion)
#   KFDP_LLVM        LLVM= of the kernel's own build (default 1)
#   KFDP_MAKE_ARGS   more make arguments (RUSTC=, BINDGEN=, RUST_LIB_SRC=)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
die() {
	echo "kfd_preempt (dkms): $*" >&2
	exit 1
}

if [ "${1:-}" = --clean ]; then
	find "$here" \( -name '*.o' -o -name '*.ko' -o -name '*.mod' -o -name '*.mod.c' \
		-o -name '.*.cmd' -o -name '*.rmeta' -o -name '*_generated.rs' \) -delete
	exit 0
fi
[ $# -ge 2 ] || die "usage: dkms-build.sh KVER KDIR [VAR=value ...]"
kver=$1
kdir=$2

grep -q '^CONFIG_RUST=y' "$kdir/.config" 2>/dev/null ||
	die "Linux $kver ($kdir) is built without CONFIG_RUST: kfd_preempt is a Rust module"
grep -q '^CONFIG_CC_IS_CLANG=y' "$kdir/.config" ||
	die "Linux $kver was not built with clang: its Rust support needs the LLVM toolchain it was built with"

amd=${KFDP_AMDGPU_SRC:-}
if [ -z "$amd" ]; then
	for d in "$kdir/source/drivers/gpu/drm/amd" "$kdir/drivers/gpu/drm/amd" \
		"/usr/src/linux-source-${kver%%-*}/drivers/gpu/drm/amd"; do
		if [ -r "$d/amdkfd/kfd_priv.h" ]; then
			amd=$d
			break
		fi
	done
fi
if [ -z "$amd" ] && ls -d /usr/src/amdgpu-*/amd >/dev/null 2>&1; then
	die "ROCm's amdgpu-dkms is installed, but building against its source needs its own build environment (its generated config header and include order), which this build does not reproduce yet; set KFDP_AMDGPU_SRC to the in-tree amdgpu source of Linux $kver and use the in-tree amdgpu"
fi
[ -n "$amd" ] && [ -r "$amd/amdkfd/kfd_priv.h" ] ||
	die "no amdgpu source for Linux $kver (want .../drivers/gpu/drm/amd/amdkfd/kfd_priv.h): install the kernel's source, or set KFDP_AMDGPU_SRC"

ko=${KFDP_AMDGPU_KO:-}
if [ -z "$ko" ]; then
	for f in /lib/modules/"$kver"/kernel/drivers/gpu/drm/amd/amdgpu/amdgpu.ko* \
		"$kdir/drivers/gpu/drm/amd/amdgpu/amdgpu.ko"; do
		if [ -e "$f" ]; then
			ko=$f
			break
		fi
	done
fi
[ -n "$ko" ] || die "no amdgpu.ko for Linux $kver: set KFDP_AMDGPU_KO"

echo "kfd_preempt (dkms): Linux $kver, amdgpu source $amd, amdgpu.ko $ko"
# shellcheck disable=SC2086 # KFDP_MAKE_ARGS is a list of arguments
exec make -C "$here" KDIR="$kdir" LLVM="${KFDP_LLVM:-1}" AMDGPU_SRC="$amd" \
	AMDGPU_KO="$ko" ${KFDP_MAKE_ARGS:-} modules
