#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# `make profile`: where a PREEMPT's time goes. Boots the bench kernel (no
# KASAN, no lockdep, with the function graph tracer) with simulated nodes,
# runs tests/vm/profile.sh there, and summarises its traces
# (scripts/profile-summary.py) into out/profile/summary.txt; the raw traces
# stay in out/profile/vm/results.log. Documentation/design.rst, "Where a
# batch's time goes", is written from this output.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

cd "$KFDP_ROOT"
scripts/install-toolchain.sh
ko=$(scripts/build-bench-module.sh)
out=$KFDP_ROOT/out/profile
mkdir -p "$out"
gcc -static -O2 -Wall -Werror -Iuapi -o "$out/profile_batch" tests/vm/profile_batch.c
tests/vm/run sim_nodes=2 sim_mes_nodes=2 --kernel "$(cat "$KFDP_CACHE/kernel-bench")" \
	--module "$ko" --no-kunit --no-kselftest --quiet --timeout 1800 \
	--copy "$out/profile_batch" --out "$out/vm" -- "$KFDP_ROOT/tests/vm/profile.sh"
scripts/profile-summary.py "$out/vm/results.log" | tee "$out/summary.txt"
