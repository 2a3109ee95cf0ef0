#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Build the test kernel (tinyconfig + scripts/vm-kernel.config) and install
# its modules into a staging root for the VM's initramfs.
#
# usage: scripts/build-kernel.sh [--bench]
#
# --bench builds the bench flavour instead: the same kernel with
# scripts/vm-kernel-bench.config merged on top (no KASAN, no lockdep, the
# function graph tracer), recorded in $KFDP_CACHE/kernel-bench for
# scripts/bench.sh. The test flavour is recorded in kernel-current (for
# KFDP_KERNEL_SERIES other than the primary, kernel-current-<series>).
#
# The build directory is keyed by everything that changes the result: the
# kernel version, the config fragment and the toolchain versions. A changed
# fragment builds anew; an unchanged one is reused without running make.
# Prints the build directory on stdout and records it in
# $KFDP_CACHE/kernel-current (kernel-bench for --bench).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

flavour=test
case ${1:-} in
--bench)
	flavour=bench
	[ "$KFDP_KERNEL_SERIES" = "$KFDP_PRIMARY_SERIES" ] ||
		kfdp_die "the bench kernel is the primary series' ($KFDP_PRIMARY_SERIES) only"
	;;
"") ;;
*) kfdp_die "usage: $0 [--bench]" ;;
esac

src=$("$KFDP_ROOT/scripts/fetch-kernel.sh")
fragments=("$KFDP_ROOT/scripts/vm-kernel.config")
# Options the rig relies on; merge_config does not fail when a dependency
# drops one, so each is checked after olddefconfig.
required=(RUST DRM_AMDGPU HSA_AMD KUNIT DEBUG_FS UNIX MODULE_UNLOAD MODULE_SRCVERSION_ALL)
absent=()
if [ "$flavour" = bench ]; then
	fragments+=("$KFDP_ROOT/scripts/vm-kernel-bench.config")
	required+=(FUNCTION_GRAPH_TRACER TRACEPOINTS)
	absent=(KASAN PROVE_LOCKING LOCKDEP DEBUG_ATOMIC_SLEEP DEBUG_LIST)
else
	required+=(KASAN PROVE_LOCKING DEBUG_ATOMIC_SLEEP DEBUG_LIST TRACEPOINTS)
	# The fuzzer (tests/fuzz) runs on the primary's test kernel only.
	if [ "$KFDP_KERNEL_SERIES" = "$KFDP_PRIMARY_SERIES" ]; then
		fragments+=("$KFDP_ROOT/scripts/vm-kernel-kcov.config")
		required+=(KCOV)
		absent+=(KCOV_INSTRUMENT_ALL)
	fi
fi

key=$( {
	echo "$src"
	cat "${fragments[@]}"
	"$KFDP_RUSTC" --version
	"$KFDP_BINDGEN" --version
	"clang-$KFDP_LLVM_VERSION" --version | head -n1
} | sha256sum | cut -c1-16)
out=$KFDP_CACHE/kbuild/$key

mapfile -t kargs < <(kfdp_kmake_args)

# One build of a tree at a time: a run asking for a kernel that another
# (make check's background build of the second kernel) is building waits
# for it, rather than building into the same tree at once.
mkdir -p "$out"
exec 9>"$out/.lock"
flock 9

fresh=0
if [ ! -e "$out/.built" ]; then
	fresh=1
	kfdp_log "building the $flavour kernel $key in $out (a cold build takes about 20 minutes on 2 cores)"
	mkdir -p "$out"
	make -s -C "$src" O="$out" "${kargs[@]}" tinyconfig
	"$src/scripts/kconfig/merge_config.sh" -m -O "$out" "$out/.config" "${fragments[@]}" >/dev/null
	make -s -C "$src" O="$out" "${kargs[@]}" olddefconfig

	for opt in "${required[@]}"; do
		grep -Eq "^CONFIG_$opt=(y|m)$" "$out/.config" ||
			kfdp_die "CONFIG_$opt did not survive olddefconfig; check ${fragments[*]}"
	done
	for opt in "${absent[@]}"; do
		! grep -Eq "^CONFIG_$opt=(y|m)$" "$out/.config" ||
			kfdp_die "CONFIG_$opt is still set in the $flavour kernel; check ${fragments[*]}"
	done

	make -s -C "$src" O="$out" "${kargs[@]}" -j"$KFDP_JOBS" bzImage modules
	rm -rf "$out/modroot"
	make -s -C "$src" O="$out" "${kargs[@]}" INSTALL_MOD_PATH="$out/modroot" \
		INSTALL_MOD_STRIP=1 modules_install
	touch "$out/.built"
fi

if [ "$flavour" = bench ]; then
	echo "$out" >"$KFDP_CACHE/kernel-bench"
else
	echo "$out" >"$KFDP_KERNEL_RECORD"
fi
# The tree a new build replaced, if any, is named by no record now. (make
# check prunes at its start anyway; this serves make bench and make demo.)
[ "$fresh" = 0 ] || "$KFDP_ROOT/scripts/prune-kernels.sh" >&2
echo "$out"
