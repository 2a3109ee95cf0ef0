#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# amdgpu-dkms-prepare.sh KVER KDIR [MAKE_ARG ...]: for a host whose amdgpu
# is ROCm's amdgpu-dkms, prepares what kfd_preempt's glue must be compiled
# with (Documentation/building.rst, "ROCm's amdgpu-dkms"), and prints the
# directory that holds it: amd/ (the amdgpu source, configured for Linux
# KVER) and kfd_preempt.flags (amdgpu-dkms-flags.py's output).
#
# amdgpu-dkms lays its structures out by a config.h that its DKMS pre-build
# step generates by probing the kernel, in DKMS's temporary copy of the
# source, and compiles amdkfd with its own headers and forced includes
# before the kernel's. So, as DKMS does: copy /usr/src/amdgpu-<version>,
# run its dkms.conf's PRE_BUILD there for KVER, compile one amdkfd object
# with its MAKE[0] and the kernel's own compilers (MAKE_ARG: CC=, LLVM=,
# from scripts/kernel-toolchain.sh), and take the flags from that object's
# .cmd file. The copy is kept, once per amdgpu-dkms version and kernel.
#
# KFDP_AMDGPU_DKMS_SRC     the amdgpu-dkms source (default: the amdgpu
#                          DKMS has installed for KVER, else the only one
#                          it knows)
# KFDP_AMDGPU_DKMS_OBJECT  the amdkfd object to compile (default
#                          amd/amdgpu/../amdkfd/kfd_device_queue_manager.o,
#                          as amdgpu's Makefile names it)
# KFDP_AMDGPU_DKMS_CACHE   where the copies are kept (default
#                          /var/cache/kfd-preempt/amdgpu-dkms)
set -euo pipefail
me=amdgpu-dkms-prepare.sh
here=$(cd "$(dirname "$0")" && pwd)
die() {
	echo "kfd_preempt ($me): $*" >&2
	exit 1
}
log() {
	echo "kfd_preempt ($me): $*" >&2
}

[ $# -ge 2 ] || die "usage: $me KVER KDIR [MAKE_ARG ...]"
kver=$1
kdir=$2
shift 2

# The source: named, or the amdgpu DKMS installed for this kernel, or the
# only amdgpu DKMS knows ("amdgpu/VERSION, KVER, ARCH: installed").
src=${KFDP_AMDGPU_DKMS_SRC:-}
if [ -z "$src" ]; then
	command -v dkms >/dev/null || die "no dkms to ask which amdgpu-dkms is installed: set KFDP_AMDGPU_DKMS_SRC=/usr/src/amdgpu-<version>"
	status=$(dkms status -m amdgpu 2>/dev/null || true)
	dkms_versions() { # [KVER STATE]: the versions of status's lines (for KVER in STATE)
		printf '%s\n' "$status" | awk -v k="${1:-}" -v s="${2:-}" -F', ' '
			k != "" && !($2 == k && $0 ~ ": " s "$") { next }
			{ sub(/^amdgpu\//, "", $1); sub(/:.*/, "", $1); if ($1 != "") print $1 }' |
			sort -u
	}
	versions=$(dkms_versions "$kver" installed)
	[ -n "$versions" ] || versions=$(dkms_versions)
	case $(printf '%s\n' "$versions" | grep -c .) in
	1) ;;
	0) die "amdgpu for Linux $kver is not the kernel's own, and DKMS knows no amdgpu source: set KFDP_AMDGPU_DKMS_SRC=/usr/src/amdgpu-<version>" ;;
	*) die "DKMS knows several amdgpu sources ($(echo $versions)) and none is installed for Linux $kver: set KFDP_AMDGPU_DKMS_SRC to the one the running amdgpu was built from" ;;
	esac
	src=/var/lib/dkms/amdgpu/$versions/source
	[ -d "$src" ] || src=/usr/src/amdgpu-$versions
fi
dir=$(cd "$src" 2>/dev/null && pwd -P) || die "the amdgpu-dkms source $src is not a directory"
src=$dir
[ -r "$src/dkms.conf" ] || die "$src has no dkms.conf: not an amdgpu-dkms source"

# dkms.conf is bash, read with the variables DKMS gives it.
arch=$(uname -m)
read_conf() { # DKMS_TREE VERSION: PACKAGE_VERSION, PRE_BUILD and MAKE[0], a line each
	bash -c 'kernelver=$1 kernel_source_dir=$2 dkms_tree=$3 module_version=$4 arch=$5
		source_tree=/usr/src module=amdgpu parallel_jobs=$(nproc)
		. "$6/dkms.conf" >/dev/null 2>&1 || exit 1
		printf "%s\n%s\n%s\n" "${PACKAGE_VERSION:-}" "${PRE_BUILD:-}" "${MAKE[0]:-}"' \
		sh "$kver" "$kdir" "$1" "$2" "$arch" "$src"
}
conf=$(read_conf /nonexistent "") || die "$src/dkms.conf cannot be read by bash"
version=$(sed -n 1p <<<"$conf")
case $version in
'' | */* | *..*) die "$src/dkms.conf has no usable PACKAGE_VERSION ('$version')" ;;
esac

cache=${KFDP_AMDGPU_DKMS_CACHE:-/var/cache/kfd-preempt/amdgpu-dkms}/$version/$kver
dkms_tree=$cache/dkms
build=$dkms_tree/amdgpu/$version/build
key=$( {
	echo "$version $kver $arch $*"
	cat "$src/dkms.conf"
	stat -c '%Y %s' "$src" "$src/dkms.conf"
} | sha256sum | cut -c1-16)
if [ -e "$cache/ready" ] && [ "$(cat "$cache/ready")" = "$key" ] &&
	[ -s "$build/kfd_preempt.flags" ]; then
	echo "$build"
	exit 0
fi

conf=$(read_conf "$dkms_tree" "$version") || die "$src/dkms.conf cannot be read by bash"
pre_build=$(sed -n 2p <<<"$conf")
make0=$(sed -n 3p <<<"$conf")
# DKMS's own default when dkms.conf sets no MAKE[0].
[ -n "$make0" ] || make0="make KERNELRELEASE=$kver -C $kdir M=$build"
object=${KFDP_AMDGPU_DKMS_OBJECT:-amd/amdgpu/../amdkfd/kfd_device_queue_manager.o}

log "amdgpu $version (from $src) for Linux $kver: configuring a copy in $build as DKMS would (once per version and kernel)"
rm -rf "$cache"
mkdir -p "$(dirname "$build")"
cp -a "$src/." "$build/"
[ -r "$build/amd/amdkfd/kfd_priv.h" ] || die "amdgpu $version has no amd/amdkfd/kfd_priv.h"
# The pre-build step, as DKMS runs it: the script named relative to the
# build copy, run there, with its arguments.
if [ -n "$pre_build" ]; then
	script=${pre_build%% *}
	[ -x "$build/$script" ] || die "PRE_BUILD of $src/dkms.conf ($script) is not an executable file"
	# shellcheck disable=SC2086 # PRE_BUILD is a script and its arguments
	(cd "$build" && exec "$build"/$pre_build) >"$cache/pre-build.log" 2>&1 ||
		die "amdgpu $version's pre-build step failed for Linux $kver (last lines below; all in $cache/pre-build.log): $(tail -n 5 "$cache/pre-build.log")"
fi

# One amdkfd object, by amdgpu's own build with the kernel's compilers;
# kbuild writes its command line to $cmd.
cmd=$build/$(dirname "$object")/.$(basename "$object").cmd
rm -f "$cmd"
# shellcheck disable=SC2086 # MAKE[0] and the arguments are lists of words
(cd "$build" && eval "$make0" '"$@"' "$object") >"$cache/object.log" 2>&1 ||
	die "compiling $object of amdgpu $version for Linux $kver failed (last lines below; all in $cache/object.log): $(tail -n 5 "$cache/object.log")"
[ -r "$cmd" ] || die "building $object of amdgpu $version wrote no $cmd"
python3 "$here/amdgpu-dkms-flags.py" "$cmd" "$build" >"$build/kfd_preempt.flags.tmp" ||
	die "no flags from $cmd"
mv "$build/kfd_preempt.flags.tmp" "$build/kfd_preempt.flags"
echo "$key" >"$cache/ready"
log "the glue gets $(wc -w <"$build/kfd_preempt.flags") flags of $object before the kernel's ($build/kfd_preempt.flags), forced includes: $(tr ' ' '\n' <"$build/kfd_preempt.flags" | grep -A1 -x -e -include -e -imacros | grep -v '^-' | sed "s|^$build/||" | paste -sd' ')"
echo "$build"
