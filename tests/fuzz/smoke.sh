#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# make check's fuzzing smoke (KTAP): scripts/fuzz.sh --smoke, a fixed seed
# from an empty corpus for 150 s, stopping at the first oracle violation,
# on the test kernel with KCOV, KASAN and lockdep. Each case is one thing
# the smoke must show.
set -uo pipefail
. "$(dirname "$0")/../../scripts/lib.sh"

out=$KFDP_ROOT/out/fuzz-smoke
rc=0
mkdir -p "$KFDP_ROOT/out"
"$KFDP_ROOT/scripts/fuzz.sh" --smoke --out "$out" >"$out.log" 2>&1 || rc=$?
# kfdp-fuzz's own code, not a program, panicked (Rust's exit status 101;
# a program's panic is LibAFL's 134, its timeout 55) before any oracle
# failed (a violation's minimization runs outside LibAFL, so its panic
# would be 101 too: its progress line already counts the violation) and
# the VM found nothing else wrong (its one complaint is that exit status:
# the kernel log is clean, /init ran to its end): the campaign runs once
# more, from seed 2, and is judged by that run. The first run's panic and
# backtrace stay in the output (and in out/fuzz-smoke-first), so that the
# fuzzer's own failure is seen, not hidden; a kernel report, an oracle
# violation, a timeout or a hang fails at once.
# A panic's message and backtrace (RUST_BACKTRACE=1 in the VM), if any.
panic_of() {
	sed -n '/^thread .* panicked/,/^=== kfdp-fuzz rc /p' "$1/vm/results.log" 2>/dev/null | head -n 40
}
retried=
fuzz_rc=$(grep -o '^=== kfdp-fuzz rc [0-9]*' "$out/vm/results.log" 2>/dev/null | awk '{print $4}' | tail -n1)
vm_fails=$(grep '^FAIL: ' "$out/vm.txt" 2>/dev/null)
if [ "$fuzz_rc" = 101 ] && [ "$vm_fails" = "FAIL: VM extra command failed with exit status 101" ] &&
	! grep -Eq 'violations [1-9]' "$out/progress.log" 2>/dev/null; then
	retried=$(panic_of "$out")
	retried=${retried:-"(no panic message in $out/vm/results.log)"}
	rm -rf "$out-first" && mv "$out" "$out-first" && mv "$out.log" "$out-first.log"
	rc=0
	"$KFDP_ROOT/scripts/fuzz.sh" --smoke --seed 2 --out "$out" >"$out.log" 2>&1 || rc=$?
fi
sum=$out/summary.txt
val() { awk -v k="$1" '$1 == k { print $2 }' "$sum" 2>/dev/null; }

. "$(dirname "$0")/../lib/ktap.sh"
# case_ ok|fail NAME [DIAGNOSTIC]: the diagnostic as comments if it failed.
case_() {
	if [ "$1" = ok ]; then
		ok "$2"
	else
		nok "$2"
		[ -n "${3:-}" ] && sed 's/^/# /' <<<"$3"
	fi
}

ktap_header
ktap_plan 5
if [ -n "$retried" ]; then
	echo "# the seed 1 campaign ended in a panic of kfdp-fuzz's own code, outside"
	echo "# any program, with a clean kernel log; judged by a seed 2 campaign:"
	sed 's/^/#   /' <<<"$retried"
fi
execs=$(val executions)
[ "${execs:-0}" -ge 100 ] && r=ok || r=fail
# Why a campaign ended without its summary: the fuzzer's exit status and
# what it said (LibAFL exits 55 on a program's timeout, 134 on a panic),
# and the program in flight, which the VM printed as a section.
why() {
	grep -E '^=== kfdp-fuzz rc |^kfdp-fuzz: libafl|extra end rc=' \
		"$out/vm/results.log" "$out/vm/console.log" 2>/dev/null
	panic_of "$out"
	[ -s "$out/current.json" ] && { echo "program in flight:"; head -c 4000 "$out/current.json"; echo; }
	tail -n 30 "$out.log"
}
case_ $r "fuzz-smoke-ran: ${execs:-0} programs executed (at least 100)" "$([ "$r" = ok ] || why)"
pcs=$(val module_pcs)
[ "${pcs:-0}" -ge 200 ] && r=ok || r=fail
case_ $r "fuzz-smoke-kcov: ${pcs:-0} module PCs reached through KCOV (at least 200)"
v=$(val violations)
[ "${v:-1}" = 0 ] && r=ok || r=fail
case_ $r "fuzz-smoke-oracles: ${v:-no summary} oracle violations" "$(cat "$out"/violation-*.txt 2>/dev/null)"
[ "$rc" = 0 ] && r=ok || r=fail
case_ $r "fuzz-smoke-vm: the VM run and its kernel log are clean (rc $rc)" "$(tail -n 20 "$out/vm.txt" 2>/dev/null)"
[ -s "$out/coverage.txt" ] && r=ok || r=fail
case_ $r "fuzz-smoke-coverage: $(head -n1 "$out/coverage.txt" 2>/dev/null || echo 'no coverage report')"
echo "# $((n - fails)) passed, $fails failed"
ktap_summary
