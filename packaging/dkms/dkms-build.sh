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
#   KFDP_AMDGPU_SRC  the amdgpu source the loaded amdgpu.ko was built from
#                    (.../drivers/gpu/drm/amd)
#   KFDP_AMDGPU_KO   that amdgpu.ko (for its srcversion; default: the one
#                    modprobe loads, which must be the kernel's own unless
#                    both KFDP_AMDGPU_SRC and KFDP_AMDGPU_KO are given)
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

# An amdgpu.ko outside the kernel's own tree is ROCm's amdgpu-dkms (or
# another out-of-tree build). Its structures are laid out by its own
# generated config.h (struct kfd_process has fields under #ifndef
# HAVE_...), which exists only inside its DKMS build: the kernel's in-tree
# amdgpu source would silently misdescribe them. Refuse, unless the
# operator names a matching source and module explicitly.
# The module directory is /lib/modules, or /usr/lib/modules where kmod
# was built for a merged /usr (Debian 13).
case $ko in
*/modules/"$kver"/kernel/* | "$kdir"/*) ;;
*)
	[ -n "${KFDP_AMDGPU_SRC:-}" ] && [ -n "${KFDP_AMDGPU_KO:-}" ] ||
		die "amdgpu for Linux $kver is not the kernel's own but $ko (ROCm's amdgpu-dkms?): kfd_preempt's glue must be compiled with that amdgpu's generated config header and include order, which this build does not reproduce yet, and the kernel's in-tree amdgpu source would misdescribe its structures (Documentation/building.rst, \"DKMS\"); set KFDP_AMDGPU_SRC and KFDP_AMDGPU_KO to a matching, prepared pair to build anyway"
	;;
esac

# The kernel's own compilers, then its Rust metadata: where the headers
# lack it, the build tree becomes one prepared from the kernel's source.
toolchain=$(LLVM=${KFDP_LLVM:-} RUSTC=${KFDP_RUSTC:-} BINDGEN=${KFDP_BINDGEN:-} \
	sh "$here/scripts/kernel-toolchain.sh" "$kdir") || exit 1
kdir=$(LLVM=${KFDP_LLVM:-} RUSTC=${KFDP_RUSTC:-} BINDGEN=${KFDP_BINDGEN:-} \
	sh "$here/scripts/kernel-rust-metadata.sh" "$kver" "$kdir") || exit 1

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
[ -n "$amd" ] && [ -r "$amd/amdkfd/kfd_priv.h" ] ||
	die "no amdgpu source for Linux $kver (want .../drivers/gpu/drm/amd/amdkfd/kfd_priv.h): install the kernel's source, or set KFDP_AMDGPU_SRC"

echo "kfd_preempt (dkms): Linux $kver, amdgpu source $amd, amdgpu.ko $ko, build tree $kdir," \
	"compilers" $toolchain
# shellcheck disable=SC2086 # toolchain and KFDP_MAKE_ARGS are lists of arguments
make -C "$here" KDIR="$kdir" $toolchain AMDGPU_SRC="$amd" AMDGPU_KO="$ko" \
	${KFDP_MAKE_ARGS:-} modules

# The module binds to the kernel's Rust symbols by name: each one it
# imports must be one the kernel exports (modpost checked the C ones).
[ -s "$kdir/Module.symvers" ] || die "$kdir/Module.symvers is empty or missing"
undefined=$(nm -u "$here/kfd_preempt.ko" | awk '$2 ~ /^_R/ { print $2 }' | sort -u |
	awk 'FILENAME == ARGV[1] { have[$2] = 1; next } !($1 in have)' "$kdir/Module.symvers" - |
	head -n 3)
[ -z "$undefined" ] ||
	die "kfd_preempt.ko imports Rust symbols Linux $kver does not export ($(echo $undefined)): it was built by another rustc than the kernel's"
