#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# In the test VM (the fuzzing kernel, kfd_preempt with sim_nodes=4): one
# kfdp-fuzz campaign (tests/fuzz). Its results leave the VM on the results
# console between markers, for scripts/fuzz.sh: the summary, the PCs
# reached, each violation, and the corpus as a base64 tarball.
#
# Arguments NAME=VALUE: SECONDS (default 60), SEED (1), CORPUS (a .tar.gz
# of JSON programs on PATH, or "none"), STOP (1: stop at the first
# violation).
for a; do
	case $a in
	SECONDS=* | SEED=* | CORPUS=* | STOP=*) export "${a?}" ;;
	*) echo "unknown argument $a" >&2; exit 2 ;;
	esac
done
S=${SECONDS:-60} SEED=${SEED:-1} CORPUS=${CORPUS:-none}
W=/tmp/fuzz
rm -rf $W && mkdir -p $W/out $W/corpus || exit 1
if [ "$CORPUS" != none ] && [ -r "/kfdp/extra/$CORPUS" ]; then
	tar -xzf "/kfdp/extra/$CORPUS" -C $W/corpus || echo "# unreadable corpus $CORPUS"
fi
stop=
[ "${STOP:-0}" = 1 ] && stop=--stop-on-violation
RUST_BACKTRACE=1 kfdp-fuzz fuzz --out $W/out --corpus $W/corpus --seconds "$S" --seed "$SEED" $stop
rc=$?
echo "=== kfdp-fuzz rc $rc ==="
section() {
	echo "=== kfdp-fuzz $1 begin ==="
	cat "$2" 2>/dev/null
	echo
	echo "=== kfdp-fuzz $1 end ==="
}
section summary $W/out/summary.txt
section progress $W/out/progress.log
section pcs $W/out/pcs.txt
for f in $W/out/violation-*.txt $W/out/violation-*.json $W/out/violation-*.c $W/out/violation-*.sh; do
	[ -e "$f" ] && section "file $(basename "$f")" "$f"
done
[ -e $W/out/current.json ] && section "file current.json" $W/out/current.json
echo "=== kfdp-fuzz corpus begin ==="
(cd $W/corpus && tar -czf - .) | base64
echo "=== kfdp-fuzz corpus end ==="
exit $rc
