#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# make fuzz: a kfdp-fuzz campaign (tests/fuzz) in the test VM, on the test
# kernel with KCOV (scripts/vm-kernel-kcov.config), KASAN and lockdep.
#
# usage: scripts/fuzz.sh [--seconds N] [--seed S] [--smoke] [--out DIR]
#
#   --seconds N   how long the campaign runs (default 1800)
#   --seed S      LibAFL's random seed (default: the time)
#   --smoke       what make check runs: a fresh corpus, seed 1, 150 s,
#                 stop at the first violation; the kept corpus is not used
#   --out DIR     where the results go (default out/fuzz, out/fuzz-smoke)
#
# The corpus is kept in $KFDP_CACHE/fuzz/corpus (one JSON program a file)
# and grows with each campaign. Results: summary.txt, progress.log, each
# violation (violation-N.txt, its minimized program violation-N.json and
# a replay script), and the coverage of the module's source lines
# (coverage.txt, coverage.html; scripts/fuzz-coverage.py).
# Exits 1 if an oracle failed or the VM's kernel log is not clean.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

seconds=1800 seed=$(date +%s) smoke=0 out=""
while [ $# -gt 0 ]; do
	case $1 in
	--seconds) seconds=$2; shift ;;
	--seed) seed=$2; shift ;;
	--smoke) smoke=1 seconds=150 seed=1 ;;
	--out) out=$2; shift ;;
	*) kfdp_die "usage: $0 [--seconds N] [--seed S] [--smoke] [--out DIR]" ;;
	esac
	shift
done
if [ -z "$out" ]; then
	out=$KFDP_ROOT/out/fuzz
	[ "$smoke" = 1 ] && out=$KFDP_ROOT/out/fuzz-smoke
fi

cd "$KFDP_ROOT"
scripts/install-toolchain.sh
scripts/build-kernel.sh >/dev/null
scripts/build-module.sh >/dev/null
fuzzer=$(scripts/build-fuzzer.sh)

rm -rf "$out" && mkdir -p "$out"
corpus=$KFDP_CACHE/fuzz/corpus
args=("SECONDS=$seconds" "SEED=$seed")
copies=(--copy "$fuzzer")
if [ "$smoke" = 1 ]; then
	args+=(STOP=1)
else
	mkdir -p "$corpus"
	tar -czf "$out/corpus-in.tar.gz" -C "$corpus" .
	copies+=(--copy "$out/corpus-in.tar.gz")
	args+=(CORPUS=corpus-in.tar.gz)
fi

kfdp_log "kfdp-fuzz: $seconds s, seed $seed, in the VM (sim_nodes=4, nodes 1 and 3 MES)"
vm_rc=0
tests/vm/run sim_nodes=4 sim_mes_nodes=10 pid_attach=1 --no-kselftest --no-kunit --quiet \
	--timeout $((seconds + 1200)) "${copies[@]}" --out "$out/vm" -- \
	"$KFDP_ROOT/tests/vm/fuzz.sh" "${args[@]}" >"$out/vm.txt" 2>&1 || vm_rc=$?

log=$out/vm/results.log
[ -r "$log" ] || : >"$log"
# A panic, a hang or a timeout leaves the sections out: each is then empty.
extract() { kfdp_vm_section "$log" kfdp-fuzz "$1"; }
extract summary >"$out/summary.txt"
extract progress >"$out/progress.log"
extract pcs >"$out/pcs.txt"
for name in $(grep -o '^=== kfdp-fuzz file [^ ]* begin' "$log" | awk '{print $4}' || true); do
	extract "file $name" >"$out/$name"
done
fuzz_rc=$(grep -o '^=== kfdp-fuzz rc [0-9]*' "$log" | awk '{print $4}' | tail -n1 || true)
if [ "$smoke" = 0 ] && [ "${fuzz_rc:-2}" != 2 ]; then
	tmp=$(mktemp -d)
	if extract corpus | base64 -d | tar -xzf - -C "$tmp" 2>/dev/null; then
		cp "$tmp"/*.json "$corpus/" 2>/dev/null || true
	fi
	rm -rf "$tmp"
	kfdp_log "corpus: $(find "$corpus" -name '*.json' | wc -l) programs in $corpus"
fi

python3 scripts/fuzz-coverage.py "$KFDP_ROOT/kfd_preempt.ko" "$out/pcs.txt" "$out" ||
	kfdp_log "no coverage report (see above)"
cat "$out/progress.log"
cat "$out/summary.txt"
[ -s "$out/coverage.txt" ] && head -n 40 "$out/coverage.txt"
for v in "$out"/violation-*.txt; do
	[ -e "$v" ] && { echo "== $v"; cat "$v"; }
done
if [ "$vm_rc" != 0 ]; then
	kfdp_log "the VM run failed (rc $vm_rc; its kernel log or tests: $out/vm.txt)"
	cat "$out/vm.txt"
fi
[ "${fuzz_rc:-2}" = 0 ] && [ "$vm_rc" = 0 ]
