#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# In the test VM (sim_nodes=2): the motivating scenario on simulated node 0
# (Documentation/userspace.rst, "The scenario"). A latency-critical tenant
# issues Poisson requests (each a short chain of dispatches) beside a
# best-effort tenant that saturates the node with long dispatches, three
# ways: each alone, together, and together under kfd-preemptd. Then
# `kfdp-scenario report` judges the issue's criteria; its JSON, SVG and
# table are printed between markers for scripts/scenario.sh.
#
# Arguments NAME=VALUE (or the environment): DURATION (s, default 30), RATE
# (requests/s, 20), CHAIN (3), LC_MS (5), BE_MS (250), SEED (1).
for a; do
	case $a in
	DURATION=* | RATE=* | CHAIN=* | LC_MS=* | BE_MS=* | SEED=*) export "${a?}" ;;
	*) echo "unknown argument $a" >&2; exit 2 ;;
	esac
done
D=${DURATION:-30}
RATE=${RATE:-20} CHAIN=${CHAIN:-3} LC_MS=${LC_MS:-5} BE_MS=${BE_MS:-250} SEED=${SEED:-1}
W=/tmp/scenario
rm -rf $W && mkdir -p $W && cd $W || exit 1

for lib in "$(dirname "$0")/../lib" /kfdp/lib; do
	[ -f "$lib/scenario.sh" ] && break
done
. "$lib/scenario.sh"
DURATION=$D

start_tenants() { # mode lc be
	if [ "$3" = 1 ]; then
		tenant "be_$1.ready" env KFD_PREEMPT_CLASS=best-effort kfdp-scenario be --node 0 \
			--work-ms "$BE_MS" --depth 1 --duration-s "$D" --out "be_$1.json"
	fi
	if [ "$2" = 1 ]; then
		tenant "lc_$1.ready" env KFD_PREEMPT_CLASS=latency-critical kfdp-scenario lc --node 0 \
			--rate "$RATE" --chain "$CHAIN" --work-ms "$LC_MS" --duration-s "$D" \
			--seed "$SEED" --out "lc_$1.json"
	fi
}

# Under the daemon: it attached both and classified them.
daemon_ready() {
	daemon_lists $W/preemptd.json || return 1
	until_true "kfd-preempt daemon --stats $W/preemptd.json --json 2>/dev/null |
		grep -q '\"priority\": *\"best-effort\"' &&
		kfd-preempt daemon --stats $W/preemptd.json --json |
		grep -q '\"priority\": *\"latency-critical\"'" 100 ||
		{ echo "# the daemon did not pick the tenants up"; return 1; }
}

run_mode alone 1 0 || exit 1
run_mode alone 0 1 || exit 1
run_mode together 1 1 || exit 1

# Scanning for new tenants every 2 s (this scenario's two are there from
# the start) and sampling every 200 us.
daemon_config "$W/preemptd.json" scan_interval_ms=2000 sample_period_us=200 >preemptd.toml
daemon_start preemptd.toml preemptd.log
run_mode daemon 1 1 || { tail -20 preemptd.log | sed 's/^/# /'; exit 1; }
kfd-preempt daemon --stats $W/preemptd.json | sed 's/^/# /'
daemon_stop
grep -c . preemptd.log | sed 's/^/# daemon log lines: /'

# Into a file, then shown: the exit status is the report's (a pipe to tee
# made it tee's), and its notes on stderr stay off the table's lines.
kfdp-scenario report --alone-lc lc_alone.json --alone-be be_alone.json \
	--together-lc lc_together.json --together-be be_together.json \
	--daemon-lc lc_daemon.json --daemon-be be_daemon.json --be-work-ms "$BE_MS" \
	--out-json report.json --out-svg report.svg >report.txt 2>&1
rc=$?
cat report.txt
echo "=== kfdp-scenario json begin ==="
cat report.json
echo
echo "=== kfdp-scenario json end ==="
echo "=== kfdp-scenario svg begin ==="
cat report.svg
echo
echo "=== kfdp-scenario svg end ==="
exit $rc
