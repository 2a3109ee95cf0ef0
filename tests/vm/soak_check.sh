#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# make check's smoke of the soak (make soak, scripts/soak.sh): 90 s of the
# tenant zoo against kfd-preemptd on 4 simulated nodes, seed 1, on the
# debug test kernel. Each of the VM script's KTAP cases is one case here.
# Ends with "N passed, M failed".
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
log=$root/out/soak/check.log
mkdir -p "$root/out/soak"
DURATION=${SOAK_DURATION:-90} SEED=${SOAK_SEED:-1} NODES=4 "$root/scripts/soak.sh" >"$log" 2>&1
rc=$?
results=$root/out/soak/vm/results.log
grep -E '^# (soak|VIOLATION|  )' "$results" 2>/dev/null | tr -d '\r' | head -n 60
echo "TAP version 13"
cases=$(grep -E '^(ok|not ok) [0-9]+ ' "$results" 2>/dev/null | tr -d '\r')
if [ -z "$cases" ]; then
	echo "1..1"
	echo "not ok 1 the soak ran and reported (exit $rc; see $log)"
	echo "0 passed, 1 failed"
	exit 1
fi
echo "$cases"
p=$(grep -c '^ok ' <<<"$cases")
f=$(grep -c '^not ok ' <<<"$cases")
echo "$p passed, $f failed"
[ "$f" = 0 ]
