#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Measure which amdkfd functions the kfdp_amdkfd_emu suites execute: build
# the module with amdkfd's objects instrumented (-finstrument-functions),
# run its suites in the VM, and compare the functions entered with the
# amdkfd functions the glue depends on (src/glue/amdkfd-reviewed.txt).
# Prints "N of M glue dependencies executed" and the list; leaves the
# ordinary (uninstrumented) module built again.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

kdir=$(kfdp_kernel_build_dir)
mapfile -t kargs < <(kfdp_kmake_args)
emu=$KFDP_ROOT/tests/amdkfd-emu
out=$KFDP_ROOT/out/amdkfd-coverage
mkdir -p "$out"

build() {
	make -C "$kdir" M="$emu" "${kargs[@]}" -j"$KFDP_JOBS" "$@" clean >/dev/null
	make -C "$kdir" M="$emu" "${kargs[@]}" -j"$KFDP_JOBS" "$@" modules >"$out/build.log" 2>&1 ||
		{ cat "$out/build.log"; kfdp_die "instrumented build failed"; }
}
trap 'build >/dev/null 2>&1 || true' EXIT
build KFDP_EMU_COVERAGE=1
"$KFDP_ROOT/tests/vm/run" --amdkfd-emu --no-kselftest --quiet --out "$out/vm" >/dev/null 2>&1 || true
sed -n 's/.*kfdp_emu_cov: \([A-Za-z0-9_]*\)\(\.[a-z0-9.]*\)\{0,1\} \[.*/\1/p' "$out/vm/console.log" |
	sort -u >"$out/entered.txt"
[ -s "$out/entered.txt" ] || kfdp_die "no coverage recorded (see $out/vm/console.log)"

# Every version's set names the same functions: each counts once.
awk '$1 == "function" && $2 ~ /\.c$/ { print $3, $2 }' "$KFDP_ROOT/src/glue/amdkfd-reviewed.txt" |
	sort -u >"$out/deps.txt"
total=0 hit=0
while read -r fn file; do
	total=$((total + 1))
	if grep -qx "$fn" "$out/entered.txt"; then
		hit=$((hit + 1))
		echo "  executed  $fn ($file)"
	else
		echo "  not run   $fn ($file)"
	fi
done <"$out/deps.txt"
echo "$(wc -l <"$out/entered.txt") amdkfd functions entered in all"
echo "$hit of $total glue dependencies executed"
