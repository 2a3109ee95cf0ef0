#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Write the DKMS source tree of kfd_preempt, out/dkms/kfd_preempt-VERSION/
# (what `dkms add` takes, and what a kfd-preempt-dkms package installs into
# /usr/src): the module's tracked sources, the two build helpers Kbuild
# runs, dkms.conf and its build step (packaging/dkms/). Prints the path.
#
# usage: dkms-source.sh [DIR]   write DIR/kfd_preempt-VERSION instead
#                               (scripts/build-debs.sh stages it this way)
set -euo pipefail
. "$(dirname "$0")/lib.sh"

version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$KFDP_ROOT/userspace/Cargo.toml" | head -n1)
[ -n "$version" ] || kfdp_die "no version in userspace/Cargo.toml"
tree=${1:-$KFDP_ROOT/out/dkms}/kfd_preempt-$version
rm -rf "$tree"
mkdir -p "$tree"
git -C "$KFDP_ROOT" ls-files -z -- Kbuild Makefile src uapi scripts/amdgpu-id.sh \
	scripts/kernel-toolchain.sh scripts/kernel-rust-metadata.sh \
	scripts/amdgpu-dkms-prepare.sh scripts/amdgpu-dkms-flags.py \
	scripts/amdkfd-fingerprint.py | (cd "$KFDP_ROOT" && cpio -0 -pdm --quiet "$tree")
install -m 0755 "$KFDP_ROOT/packaging/dkms/dkms-build.sh" "$tree/dkms-build.sh"
sed "s/@VERSION@/$version/" "$KFDP_ROOT/packaging/dkms/dkms.conf.in" >"$tree/dkms.conf"
echo "$tree"
