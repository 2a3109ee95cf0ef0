#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# make-standin.sh AMD_SRC DEST VERSION same|differs: writes DEST, a small
# stand-in for ROCm's amdgpu-dkms source (/usr/src/amdgpu-VERSION), whose
# amdgpu is the kernel's own (AMD_SRC, .../drivers/gpu/drm/amd) arranged as
# amdgpu-dkms arranges it: amd/, a top-level Makefile that puts the
# package's headers and config.h before the kernel's, a dkms.conf with its
# PRE_BUILD, and a pre-build step and configure that write config.h for the
# target kernel. AMD's tree cannot be fetched or committed here
# (Documentation/testing.rst, "amdgpu-dkms stand-in").
#
# As in amdgpu-dkms, config.h decides a layout: amdkfd's kfd_priv.h gets,
# in struct kfd_vmid_info (which struct kfd_node embeds, and which the
# build's fingerprints do not cover), a member under
# HAVE_KFD_VMID_INFO_RESERVED. "same" configures it off, so the layout is
# the kernel's amdgpu's; "differs" configures it on, so every kfd_node
# field after vm_info moves by 8 bytes: a glue built that way must be
# refused by the layout gate on the kernel's own amdgpu.
set -eu
[ $# -eq 4 ] || { echo "usage: make-standin.sh AMD_SRC DEST VERSION same|differs" >&2; exit 2; }
amd=$1 dest=$2 version=$3 variant=$4
here=$(cd "$(dirname "$0")" && pwd)
case $variant in
same) reserved=n ;;
differs) reserved=y ;;
*) echo "make-standin.sh: variant is same or differs, not '$variant'" >&2; exit 2 ;;
esac
[ -r "$amd/amdkfd/kfd_priv.h" ] || { echo "make-standin.sh: $amd has no amdkfd/kfd_priv.h" >&2; exit 1; }
rm -rf "$dest"
mkdir -p "$dest/amd/dkms"
cp -a "$amd/." "$dest/amd/"
cp "$here/Makefile" "$dest/Makefile"
sed "s/@VERSION@/$version/" "$here/dkms.conf" >"$dest/dkms.conf"
cp "$here/amd/dkms/pre-build.sh" "$here/amd/dkms/configure" "$dest/amd/dkms/"
echo "STANDIN_VMID_INFO_RESERVED=$reserved" >"$dest/amd/dkms/standin.conf"
priv=$dest/amd/amdkfd/kfd_priv.h
sed '/^struct kfd_vmid_info {$/,/^};$/ s/^};$/#ifdef HAVE_KFD_VMID_INFO_RESERVED\n\tuint64_t reserved;\n#endif\n};/' \
	"$priv" >"$priv.tmp"
grep -q HAVE_KFD_VMID_INFO_RESERVED "$priv.tmp" ||
	{ echo "make-standin.sh: no struct kfd_vmid_info in $priv" >&2; exit 1; }
mv "$priv.tmp" "$priv"
