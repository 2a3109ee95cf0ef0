#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# In the test VM: run `kfdp-scenario bench` on simulated node 0 (HWS) and
# print its JSON and SVG between markers for scripts/bench.sh to extract.
kfdp-scenario bench --json /tmp/bench.json --svg /tmp/bench.svg "$@" || exit 1
echo "=== kfdp-bench json begin ==="
cat /tmp/bench.json
echo
echo "=== kfdp-bench json end ==="
echo "=== kfdp-bench svg begin ==="
cat /tmp/bench.svg
echo
echo "=== kfdp-bench svg end ==="
