#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# make check's run of the motivating scenario (scripts/scenario.sh,
# `make scenario`), 20 s per mode. Each of the report's checks is one KTAP
# case: ratios of the run's own numbers (the contention shows, the daemon
# removes most of it, best-effort keeps most of its fair part), with margins
# a loaded TCG host cannot eat but a daemon that preempts nothing or never
# resumes fails. The issue's criteria (absolute bounds, a benchmark's) are
# printed, not judged: `make scenario` judges them. Ends with
# "N passed, M failed".
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
log=$root/out/scenario/check.log
mkdir -p "$root/out/scenario"
rm -f "$root/out/scenario/report.json"
DURATION=${DURATION:-20} "$root/scripts/scenario.sh" >"$log" 2>&1
rc=$?
sed -n '/^mode /,/^\[kfdp/p' "$log" | grep -v '^\[kfdp' | sed 's/^/# /'
echo "TAP version 13"
python3 - "$root/out/scenario/report.json" "$rc" <<'PY'
import json, sys
path, rc = sys.argv[1], int(sys.argv[2])
try:
    checks = json.load(open(path))["checks"]
except (OSError, ValueError, KeyError) as e:
    print("1..1")
    print(f"not ok 1 scenario ran and reported (exit {rc}: {e})")
    print("0 passed, 1 failed")
    sys.exit(0)
print(f"1..{len(checks)}")
ok = 0
for i, c in enumerate(checks, 1):
    ok += bool(c["pass"])
    print(f"{'ok' if c['pass'] else 'not ok'} {i} {c['name']}: {c['value']:.3f} ({c['rule']})")
print(f"{ok} passed, {len(checks) - ok} failed")
PY
