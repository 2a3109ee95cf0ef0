#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# `make profile`: where a PREEMPT's time goes. Boots the bench kernel (no
# KASAN, no lockdep, with the function graph tracer) with simulated nodes,
# runs tests/vm/profile.sh there, and summarises its traces
# (scripts/profile-summary.py) into out/profile/summary.txt; the raw traces
# stay in out/profile/vm/results.log. Documentation/design.rst, "Where a
# batch's time goes", is written from this output.
#
# usage: scripts/profile.sh [--baseline REV]
#
# --baseline REV also builds the module of git revision REV for the bench
# kernel and times the same calls on both builds, alternately, in one VM
# run (tests/vm/profile_compare.sh): medians per call and the ratio of each
# to INFO of the same build, in out/profile/compare.txt.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

baseline=""
case ${1:-} in
--baseline) baseline=${2:?--baseline needs a git revision} ;;
"") ;;
*) kfdp_die "usage: $0 [--baseline REV]" ;;
esac

cd "$KFDP_ROOT"
scripts/install-toolchain.sh
ko=$(scripts/build-bench-module.sh)
out=$KFDP_ROOT/out/profile
mkdir -p "$out"
gcc -static -O2 -Wall -Werror -Iuapi -o "$out/profile_batch" tests/vm/profile_batch.c
kernel=$(cat "$KFDP_CACHE/kernel-bench")

if [ -n "$baseline" ]; then
	# The baseline's sources, as DKMS would take them, built the same way.
	tree=$out/baseline-src
	rm -rf "$tree"
	mkdir -p "$tree"
	git -C "$KFDP_ROOT" archive "$baseline" Kbuild Makefile src uapi scripts/amdgpu-id.sh \
		scripts/amdkfd-fingerprint.py | tar -x -C "$tree"
	mapfile -t kargs < <(kfdp_kmake_args)
	make -s -C "$kernel" M="$tree" "${kargs[@]}" KFDP_KUNIT=0 modules >"$out/baseline.log" 2>&1 ||
		{ cat "$out/baseline.log"; kfdp_die "revision $baseline does not build for the bench kernel"; }
	cp "$tree/kfd_preempt.ko" "$out/kfd_preempt_baseline.ko"
	tests/vm/run sim_nodes=2 sim_mes_nodes=2 --kernel "$kernel" --module "$ko" --no-kunit \
		--no-kselftest --quiet --timeout 1800 --copy "$out/profile_batch" \
		--copy "$out/kfd_preempt_baseline.ko" --out "$out/vm-compare" -- \
		"$KFDP_ROOT/tests/vm/profile_compare.sh"
	scripts/profile-summary.py --compare "$baseline" "$out/vm-compare/results.log" |
		tee "$out/compare.txt"
	exit 0
fi
tests/vm/run sim_nodes=2 sim_mes_nodes=2 --kernel "$kernel" \
	--module "$ko" --no-kunit --no-kselftest --quiet --timeout 1800 \
	--copy "$out/profile_batch" --out "$out/vm" -- "$KFDP_ROOT/tests/vm/profile.sh"
scripts/profile-summary.py "$out/vm/results.log" | tee "$out/summary.txt"
