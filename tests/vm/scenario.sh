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

lc() { kfdp-scenario lc --node 0 --rate "$RATE" --chain "$CHAIN" --work-ms "$LC_MS" \
	--duration-s "$D" --seed "$SEED" "$@"; }
be() { kfdp-scenario be --node 0 --work-ms "$BE_MS" --depth 1 --duration-s "$D" "$@"; }

# Waits until every file named exists (at most 10 s).
await() {
	i=0
	for f in "$@"; do
		while [ ! -e "$f" ]; do
			i=$((i + 1))
			[ $i -gt 100 ] && { echo "# timed out waiting for $f"; return 1; }
			sleep 0.1
		done
	done
}

# Starts the tenants of one mode, lets them measure the same window, waits.
run() { # mode lc? be? [env...]
	mode=$1 want_lc=$2 want_be=$3
	rm -f go
	pids=
	set --
	if [ "$want_be" = 1 ]; then
		KFD_PREEMPT_CLASS=best-effort be --out "be_$mode.json" --ready-file "be_$mode.ready" \
			--go-file go &
		pids="$pids $!"
		set -- "$@" "be_$mode.ready"
	fi
	if [ "$want_lc" = 1 ]; then
		KFD_PREEMPT_CLASS=latency-critical lc --out "lc_$mode.json" \
			--ready-file "lc_$mode.ready" --go-file go &
		pids="$pids $!"
		set -- "$@" "lc_$mode.ready"
	fi
	await "$@" || return 1
	if [ -n "$DAEMON_PID" ]; then
		# The daemon attached both and watches the LC queue.
		i=0
		until kfd-preempt daemon --stats $W/preemptd.json --json 2>/dev/null |
			grep -q '"priority": *"best-effort"' &&
			kfd-preempt daemon --stats $W/preemptd.json --json |
			grep -q '"priority": *"latency-critical"'; do
			i=$((i + 1))
			[ $i -gt 100 ] && { echo "# the daemon did not pick the tenants up"; return 1; }
			sleep 0.1
		done
	fi
	echo "# mode $mode: measuring for ${D}s"
	touch go
	for p in $pids; do
		wait "$p" || return 1
	done
}

DAEMON_PID=
run alone 1 0 || exit 1
run alone 0 1 || exit 1
run together 1 1 || exit 1

cat >preemptd.toml <<EOF
[daemon]
tenants = "sim"
scan_interval_ms = 2000
sample_period_us = 200
idle_hysteresis_us = 1000
lease_ms = 1000
fifo_priority = 10
min_share_period_ms = 1000
min_share_budget_ms = 100
stats_path = "$W/preemptd.json"

[[class]]
name = "inference"
priority = "latency-critical"
env = "latency-critical"

[[class]]
name = "training"
priority = "best-effort"
env = "best-effort"
EOF
kfd-preemptd --config preemptd.toml 2>preemptd.log &
DAEMON_PID=$!
run daemon 1 1 || { tail -20 preemptd.log | sed 's/^/# /'; exit 1; }
kfd-preempt daemon --stats $W/preemptd.json | sed 's/^/# /'
kill -TERM "$DAEMON_PID"
wait "$DAEMON_PID"
echo "# kfd-preemptd exited with $?"
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
