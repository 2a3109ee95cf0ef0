#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Build the test kernel (tinyconfig + scripts/vm-kernel.config) and install
# its modules into a staging root for the VM's initramfs.
#
# The build directory is keyed by everything that changes the result: the
# kernel version, the config fragment and the toolchain versions. A changed
# fragment builds anew; an unchanged one is reused without running make.
# Prints the build directory on stdout and records it in
# $KFDP_CACHE/kernel-current.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

src=$("$KFDP_ROOT/scripts/fetch-kernel.sh")
fragment=$KFDP_ROOT/scripts/vm-kernel.config

key=$( {
	echo "$src"
	cat "$fragment"
	"$KFDP_RUSTC" --version
	"$KFDP_BINDGEN" --version
	"clang-$KFDP_LLVM_VERSION" --version | head -n1
} | sha256sum | cut -c1-16)
out=$KFDP_CACHE/kbuild/$key

mapfile -t kargs < <(kfdp_kmake_args)

if [ ! -e "$out/.built" ]; then
	kfdp_log "building kernel $key in $out (a cold build takes about 20 minutes on 2 cores)"
	mkdir -p "$out"
	make -s -C "$src" O="$out" "${kargs[@]}" tinyconfig
	"$src/scripts/kconfig/merge_config.sh" -m -O "$out" "$out/.config" "$fragment" >/dev/null
	make -s -C "$src" O="$out" "${kargs[@]}" olddefconfig

	# merge_config does not fail when a dependency drops an option; check
	# the ones the rig relies on so a silent drop cannot pass unnoticed.
	for opt in RUST DRM_AMDGPU HSA_AMD KUNIT DEBUG_FS KASAN PROVE_LOCKING \
		DEBUG_ATOMIC_SLEEP DEBUG_LIST UNIX MODULE_UNLOAD MODULE_SRCVERSION_ALL; do
		grep -Eq "^CONFIG_$opt=(y|m)$" "$out/.config" ||
			kfdp_die "CONFIG_$opt did not survive olddefconfig; check $fragment"
	done

	make -s -C "$src" O="$out" "${kargs[@]}" -j"$KFDP_JOBS" bzImage modules
	rm -rf "$out/modroot"
	make -s -C "$src" O="$out" "${kargs[@]}" INSTALL_MOD_PATH="$out/modroot" \
		INSTALL_MOD_STRIP=1 modules_install
	touch "$out/.built"
fi

echo "$out" >"$KFDP_CACHE/kernel-current"
echo "$out"
