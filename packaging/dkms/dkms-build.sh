#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# DKMS's build step for kfd_preempt: finds what the build needs for kernel
# KVER (whose build tree is KDIR) and refuses, saying what is missing, if
# it is not there.
#
# usage: dkms-build.sh KVER KDIR [VAR=value ...] | --clean
#
# DKMS appends CC= and LD= for a kernel built with clang; the compilers are
# chosen here from the kernel's own .config (scripts/kernel-toolchain.sh),
# so those are dropped. A kernel whose headers carry no Rust metadata
# (Debian's) is built against a tree prepared from its source
# (scripts/kernel-rust-metadata.sh), once per kernel.
#
# The environment may name what cannot be found (DKMS passes it through):
#   KFDP_AMDGPU_KO   the amdgpu.ko the module is for (default: the one
#                    modprobe loads); one outside the kernel's tree is
#                    amdgpu-dkms's, see scripts/amdgpu-dkms-prepare.sh for
#                    what it reads (KFDP_AMDGPU_DKMS_SRC, ...)
#   KFDP_AMDGPU_SRC  the amdgpu source it was built from, prepared as its
#                    build prepared it (.../amd; for amdgpu-dkms, instead
#                    of the configured copy made here)
#   KFDP_LLVM        LLVM= for a clang-built kernel (default: its clang-N)
#   KFDP_RUSTC       the kernel's rustc, where it is not on PATH by a usual
#   KFDP_BINDGEN     name, and its bindgen (both checked against .config)
#   KFDP_LINUX_SRC   the kernel's source, for its Rust metadata (default
#                    /usr/src/linux-source-X.Y.tar.xz)
#   KFDP_MAKE_ARGS   more make arguments
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

# The amdgpu.ko that loads for Linux $kver: modprobe's choice, which
# depmod makes from updates/ before the kernel's own (kernel/).
ko=${KFDP_AMDGPU_KO:-}
if [ -z "$ko" ]; then
	ko=$(modinfo -k "$kver" -n amdgpu 2>/dev/null || true)
	[ -n "$ko" ] && [ -e "$ko" ] || ko=""
fi
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

# The kernel's own compilers.
toolchain=$(LLVM=${KFDP_LLVM:-} RUSTC=${KFDP_RUSTC:-} BINDGEN=${KFDP_BINDGEN:-} \
	sh "$here/scripts/kernel-toolchain.sh" "$kdir") || exit 1

# An amdgpu.ko outside the kernel's own tree is ROCm's amdgpu-dkms (or
# another out-of-tree build). Its structures are laid out by its own
# generated config.h, which exists only inside a DKMS build, and its
# amdkfd is compiled with its own headers before the kernel's: the
# kernel's in-tree amdgpu source would silently misdescribe it. So the
# glue is compiled as that amdkfd is, in a configured copy of its source
# (scripts/amdgpu-dkms-prepare.sh), unless the operator names a prepared
# source and module (KFDP_AMDGPU_SRC and KFDP_AMDGPU_KO).
# The module directory is /lib/modules, or /usr/lib/modules where kmod
# was built for a merged /usr (Debian 13).
amd=${KFDP_AMDGPU_SRC:-}
dkms_flags=""
case $ko in
*/modules/"$kver"/kernel/* | "$kdir"/*) ;;
*)
	if [ -z "$amd" ]; then
		# shellcheck disable=SC2086 # the compilers are a list of arguments
		prepared=$(bash "$here/scripts/amdgpu-dkms-prepare.sh" "$kver" "$kdir" $toolchain) ||
			die "amdgpu for Linux $kver is ROCm's amdgpu-dkms or another out-of-tree build ($ko), and its source could not be prepared (above); or set KFDP_AMDGPU_SRC and KFDP_AMDGPU_KO to a matching, prepared pair (Documentation/building.rst, \"ROCm's amdgpu-dkms\")"
		amd=$prepared/amd
		dkms_flags=$prepared/kfd_preempt.flags
	fi
	;;
esac
# The kernel's Rust metadata: where the headers lack it, the build tree
# becomes one prepared from the kernel's source.
kdir=$(LLVM=${KFDP_LLVM:-} RUSTC=${KFDP_RUSTC:-} BINDGEN=${KFDP_BINDGEN:-} \
	sh "$here/scripts/kernel-rust-metadata.sh" "$kver" "$kdir") || exit 1

if [ -z "$amd" ]; then
	for d in "$kdir/source/drivers/gpu/drm/amd" "$kdir/drivers/gpu/drm/amd" \
		"/usr/src/linux-source-${kver%%-*}/drivers/gpu/drm/amd"; do
		if [ -r "$d/amdkfd/kfd_priv.h" ]; then
			amd=$d
			break
		fi
	done
fi
[ -n "$amd" ] && [ -r "$amd/amdkfd/kfd_priv.h" ] ||
	die "no amdgpu source for Linux $kver (want .../drivers/gpu/drm/amd/amdkfd/kfd_priv.h): install the kernel's source, or set KFDP_AMDGPU_SRC"

echo "kfd_preempt (dkms): Linux $kver, amdgpu source $amd${dkms_flags:+ (amdgpu-dkms, flags $dkms_flags)}," \
	"amdgpu.ko $ko, build tree $kdir, compilers" $toolchain
# shellcheck disable=SC2086 # toolchain and KFDP_MAKE_ARGS are lists of arguments
make -C "$here" KDIR="$kdir" $toolchain AMDGPU_SRC="$amd" AMDGPU_KO="$ko" \
	${dkms_flags:+AMDGPU_DKMS_FLAGS="$dkms_flags"} \
	${KFDP_MAKE_ARGS:-} modules

# The module binds to the kernel's Rust symbols by name: each one it
# imports must be one the kernel exports (modpost checked the C ones).
[ -s "$kdir/Module.symvers" ] || die "$kdir/Module.symvers is empty or missing"
undefined=$(nm -u "$here/kfd_preempt.ko" | awk '$2 ~ /^_R/ { print $2 }' | sort -u |
	awk 'FILENAME == ARGV[1] { have[$2] = 1; next } !($1 in have)' "$kdir/Module.symvers" - |
	head -n 3)
[ -z "$undefined" ] ||
	die "kfd_preempt.ko imports Rust symbols Linux $kver does not export ($(echo $undefined)): it was built by another rustc than the kernel's"
