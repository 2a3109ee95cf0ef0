#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# make check's run of the motivating scenario (scripts/scenario.sh,
# `make scenario`), 20 s per mode. Each of the report's checks is one KTAP
# case: ratios of the run's own numbers (the contention shows, the daemon
# removes most of it, best-effort keeps most of its fair part), with margins
# a loaded TCG host cannot eat but a daemon that preempts nothing or never
# resumes fails. The issue's criteria (absolute bounds, a benchmark's) are
# printed, not judged: `make scenario` judges them, on the bench kernel.
# This run is on the debug test kernel (SCENARIO_KERNEL=test). Then the
# host scenario's checks (host.json), one case per node and check: node
# time and the node's counts on nodes without latency-critical work, ratios
# of the run's own numbers on the others. Then the hint scenario's checks
# (hint.json), with 8 ms of preparation: the debug kernel's daemon answers
# a hint in about 4.5 ms. Ends with "N passed, M failed".
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
log=$root/out/scenario/check.log
mkdir -p "$root/out/scenario"
rm -f "$root/out/scenario/report.json" "$root/out/scenario/host.json" "$root/out/scenario/hint.json"
DURATION=${DURATION:-20} SCENARIO_KERNEL=test HINT_PREP_MS=8 TWO_LC_SCENARIO=0 "$root/scripts/scenario.sh" >"$log" 2>&1
rc=$?
sed -n '/^mode /,/^\[kfdp/p' "$log" | grep -v '^\[kfdp' | sed 's/^/# /'
echo "TAP version 13"
python3 - "$root/out/scenario/report.json" "$root/out/scenario/host.json" "$root/out/scenario/hint.json" "$rc" <<'PY'
import json, sys
paths, rc = sys.argv[1:4], int(sys.argv[4])
cases = []
for label, prefix, path in zip(("scenario", "host scenario", "hint scenario"), ("", "host-", "hint-"), paths):
    try:
        cases += [(f"{prefix}{c['name']}", c) for c in json.load(open(path))["checks"]]
    except (OSError, ValueError, KeyError) as e:
        cases.append((f"{label} ran and reported (exit {rc}: {e})", None))
print(f"1..{len(cases)}")
ok = 0
for i, (name, c) in enumerate(cases, 1):
    good = c is not None and bool(c["pass"])
    ok += good
    detail = f": {c['value']:.3f} ({c['rule']})" if c else ""
    print(f"{'ok' if good else 'not ok'} {i} {name}{detail}")
print(f"{ok} passed, {len(cases) - ok} failed")
PY
