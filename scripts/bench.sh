#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# `make bench`: build everything, boot the VM with simulated nodes and run
# `kfdp-scenario bench` there (a developer command: kfdp-scenario is not
# packaged), twice:
#
#  * on the bench kernel (scripts/build-kernel.sh --bench: no KASAN, no
#    lockdep), the whole matrix, against a module built for that kernel
#    without its KUnit suites; these are the numbers to quote;
#  * on the debug test kernel, the software-cost points only (K = 1 and 64,
#    cost model off), so that the debug kernel's figures stand beside them.
#
# Extra arguments go to the first run (e.g. --queues 1,64 --processes 8).
# Results land in out/bench/: bench.json, bench.svg and bench.txt from the
# bench kernel, debug.json and debug.txt from the test kernel. A benchmark,
# not a test: nothing is judged, and every modelled number says so.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

cd "$KFDP_ROOT"
scripts/install-toolchain.sh
scripts/build-kernel.sh >/dev/null
bench_ko=$(scripts/build-bench-module.sh)
bench_kernel=$(cat "$KFDP_CACHE/kernel-bench")
scripts/build-module.sh
scripts/build-userspace.sh
out=$KFDP_ROOT/out/bench
mkdir -p "$out"

# run NAME KERNEL MODULE LABEL BENCH-ARGS...: one VM run, its JSON and tables.
run() {
	local name=$1 kernel=$2 ko=$3 label=$4
	shift 4
	tests/vm/run sim_nodes=2 sim_mes_nodes=2 --kernel "$kernel" --module "$ko" \
		--no-kunit --no-kselftest --quiet --timeout 2400 \
		--copy out/userspace/bin/kfdp-scenario --out "$out/vm-$name" -- \
		"$KFDP_ROOT/tests/vm/bench.sh" --label "$label" "$@"
	local log=$out/vm-$name/results.log
	extract() {
		sed -n "/^=== kfdp-bench $1 begin ===/,/^=== kfdp-bench $1 end ===/p" "$log" |
			sed '1d;$d' | tr -d '\r'
	}
	extract json >"$out/$name.json"
	[ -s "$out/$name.json" ] || kfdp_die "the $name bench printed no results (see $log)"
	[ "$name" = debug ] || extract svg >"$out/$name.svg"
	sed -n '/^cost model /,/^=== kfdp-bench json begin/p' "$log" | sed '$d' | tr -d '\r' |
		grep -v '^bench: ' >"$out/$name.txt"
}

# The default grid, plus the scale point of 1,024 queues over 64 tenants.
[ $# -gt 0 ] || set -- --processes 1,4,8,16,64
run bench "$bench_kernel" "$bench_ko" \
	"bench kernel $(cat "$bench_kernel/include/config/kernel.release"): no KASAN, no lockdep" "$@"
run debug "$(kfdp_kernel_build_dir)" "$KFDP_ROOT/kfd_preempt.ko" \
	"debug test kernel: KASAN and lockdep" --queues 1,64 --processes 1 --cost zero

cat "$out/bench.txt"
echo "--- the same software-cost points on the debug kernel ---"
sed -n '/^software cost/,$p' "$out/debug.txt"
kfdp_log "results: $out/bench.{json,svg,txt}, $out/debug.{json,txt}"
