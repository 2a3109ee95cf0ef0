#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# `make soak`: build everything, boot the debug test VM (KASAN, lockdep)
# with simulated nodes and run kfd-preemptd against the tenant zoo there
# (tests/vm/soak.sh, Documentation/testing.rst, "The soak"). Environment:
# DURATION (s, 1800), SEED (the time), NODES (4), REUSE (1: a queue made
# again may get its old ring address back; 0). Results in out/soak/:
# soak.json (the counts and violations), results.log (the run's KTAP, with
# a reproducer for each violation). Exits non-zero if a check failed.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

cd "$KFDP_ROOT"
scripts/install-toolchain.sh
scripts/build-kernel.sh >/dev/null
scripts/build-module.sh >/dev/null
scripts/build-userspace.sh
duration=${DURATION:-1800} seed=${SEED:-$(date +%s)} nodes=${NODES:-4}
out=$KFDP_ROOT/out/soak
mkdir -p "$out"
rm -f "$out/soak.json" "$out/daemon.log" "$out/kernel.log"
kfdp_log "soak: $duration s, $nodes nodes, seed $seed"
rc=0
tests/vm/run "sim_nodes=$nodes" --no-kselftest --no-kunit --quiet --timeout "$((duration + 900))" \
	--copy out/userspace/bin/kfd-preemptd --copy out/userspace/bin/kfdp-scenario \
	--copy out/userspace/bin/kfd-preempt \
	--out "$out/vm" -- "$KFDP_ROOT/tests/vm/soak.sh" "DURATION=$duration" "SEED=$seed" \
	"NODES=$nodes" "REUSE=${REUSE:-0}" || rc=$?
log=$out/vm/results.log
section() { kfdp_vm_section "$log" "kfdp-scenario soak" "$1"; }
section json >"$out/soak.json"
section daemon-log >"$out/daemon.log"
section kernel-log >"$out/kernel.log"
grep -E '^(ok|not ok) |^# (soak|VIOLATION)' "$log" | tr -d '\r' || true
[ -s "$out/soak.json" ] || kfdp_die "the soak printed no results (see $log)"
kfdp_log "soak: $out/soak.json, $out/daemon.log, $out/kernel.log, $log"
exit $rc
