#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Stand-in for amdgpu-dkms's DKMS pre-build step: run by DKMS in its copy
# of the source with the target kernel's release; it edits that copy in
# place (here: rename_symbol.h) and runs configure, which writes
# amd/dkms/config/config.h for that kernel.
set -eu
kernelver=${1:?usage: pre-build.sh KERNELVER}
cd "$(dirname "$0")/../.."
[ -r "/lib/modules/$kernelver/build/.config" ] ||
	{ echo "pre-build.sh: no kernel build tree for $kernelver" >&2; exit 1; }
mkdir -p include
{
	echo "/* Written by amd/dkms/pre-build.sh: amdkcl's exports, renamed. */"
	echo "#ifndef AMDGPU_STANDIN_RENAME_SYMBOL_H"
	echo "#define AMDGPU_STANDIN_RENAME_SYMBOL_H"
	echo "#endif"
} >include/rename_symbol.h
amd/dkms/configure --with-linux="/lib/modules/$kernelver/build"
