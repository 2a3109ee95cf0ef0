#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Build everything the VM suites load for one more kernel series (the
# second kernel, Documentation/building.rst "Kernels"): that series' test
# kernel (scripts/build-kernel.sh, cached), then kfd_preempt.ko with W=1
# and CLIPPY=1 and the test-only kfdp_amdkfd_emu.ko against it, both
# warning-free, from a copy of the working tree in out/kernel-<series>/tree.
#
# usage: build-on-kernel.sh SERIES
#
# A copy, because an external module's objects (and the module's generated
# bindings) are written beside its sources: building the checkout itself
# would overwrite the primary kernel's build. The copy is the tracked and
# untracked-but-not-ignored files, so that it builds what the checkout has.
# Prints "KERNEL_DIR MODULE_KO EMU_KO" on stdout.
set -euo pipefail
series=${1:-}
[ -n "$series" ] || { echo "usage: $0 SERIES" >&2; exit 2; }
export KFDP_KERNEL_SERIES=$series
. "$(dirname "$0")/lib.sh"

kernel=$("$KFDP_ROOT/scripts/build-kernel.sh")
out=$KFDP_ROOT/out/kernel-$series
tree=$out/tree
rm -rf "$tree"
mkdir -p "$tree"
(
	cd "$KFDP_ROOT"
	# Tracked files deleted in the working tree are listed too: skip them.
	git ls-files -z -co --exclude-standard -- Kbuild Makefile src uapi scripts \
		tests/amdkfd-emu | while IFS= read -r -d '' f; do
		if [ -e "$f" ]; then printf '%s\0' "$f"; fi
	done | cpio -0 -pdm --quiet "$tree"
)

mapfile -t kargs < <(kfdp_kmake_args)
build() {
	local what=$1 dir=$2
	shift 2
	kfdp_build_warning_free "$what against the $series kernel" "$out/$what-build.log" \
		make -C "$kernel" M="$dir" "${kargs[@]}" "$@" modules
}
# As scripts/build-module.sh and scripts/build-amdkfd-emu.sh build them for
# the primary kernel; the KUnit suites in, as on every test kernel.
build kfd_preempt "$tree" KFDP_KUNIT=1 W=1 CLIPPY=1 CLIPPY_DRIVER=/usr/bin/clippy-driver
build kfdp_amdkfd_emu "$tree/tests/amdkfd-emu" -j"$KFDP_JOBS"
echo "$kernel $tree/kfd_preempt.ko $tree/tests/amdkfd-emu/kfdp_amdkfd_emu.ko"
