#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Build the bench kernel (scripts/build-kernel.sh --bench) if needed, and
# kfd_preempt.ko for it from the tracked sources, as DKMS builds it and
# without the KUnit suites, in out/bench/module/. Prints the .ko's path.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

kernel=$("$KFDP_ROOT/scripts/build-kernel.sh" --bench)
out=$KFDP_ROOT/out/bench
mkdir -p "$out"
src=$("$KFDP_ROOT/scripts/dkms-source.sh" "$out/module")
mapfile -t kargs < <(kfdp_kmake_args)
make -s -C "$kernel" M="$src" "${kargs[@]}" KFDP_KUNIT=0 modules >"$out/module.log" 2>&1 ||
	{ cat "$out/module.log" >&2; kfdp_die "the module does not build for the bench kernel"; }
echo "$src/kfd_preempt.ko"
