#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# `make bench`: build everything, boot the test VM with simulated nodes and
# run `kfd-preempt bench` there (extra arguments are passed to it, e.g.
# --queues 1,64 --processes 8). Results land in out/bench/: bench.json,
# bench.svg and bench.txt (the tables). A benchmark, not a test: nothing is
# judged, and every modelled number is labelled as modelled.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

cd "$KFDP_ROOT"
scripts/install-toolchain.sh
scripts/build-kernel.sh >/dev/null
scripts/build-module.sh
scripts/build-userspace.sh
out=$KFDP_ROOT/out/bench
mkdir -p "$out"
tests/vm/run sim_nodes=2 sim_mes_nodes=2 --no-kselftest --quiet --timeout 2400 \
	--copy out/userspace/bin/kfd-preempt --out "$out/vm" -- \
	"$KFDP_ROOT/tests/vm/bench.sh" "$@"
log=$out/vm/results.log
extract() {
	sed -n "/^=== kfdp-bench $1 begin ===/,/^=== kfdp-bench $1 end ===/p" "$log" |
		sed '1d;$d' | tr -d '\r'
}
extract json >"$out/bench.json"
extract svg >"$out/bench.svg"
sed -n '/^cost model /,/^=== kfdp-bench json begin/p' "$log" | sed '$d' | tr -d '\r' >"$out/bench.txt"
[ -s "$out/bench.json" ] || kfdp_die "the bench printed no results (see $log)"
cat "$out/bench.txt"
kfdp_log "results: $out/bench.json, $out/bench.svg, $out/bench.txt"
