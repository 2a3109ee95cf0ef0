#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# In the test VM (sim_nodes=1): the two-tenant scenario of
# Documentation/userspace.rst ("The two-tenant scenario"). Two
# latency-critical tenants on node 0, one of short requests (one SHORT_MS
# dispatch, SHORT_RATE a second) and one of long chains (LONG_CHAIN
# dispatches of LONG_MS, LONG_RATE a second): first together without
# best-effort work and without a daemon, then beside a best-effort tenant
# of BE_MS dispatches under kfd-preemptd, and, if BEFORE_DAEMON names
# another kfd-preemptd binary, under that one too (an A/B comparison in
# one run). `kfdp-scenario two-lc-report` judges the run; its JSON is
# printed between markers for scripts/scenario.sh.
#
# Arguments NAME=VALUE (or the environment): DURATION (s a mode, 12),
# SHORT_RATE (40), SHORT_MS (2), LONG_RATE (8), LONG_CHAIN (6), LONG_MS (5),
# BE_MS (40), SEED (1), BEFORE_DAEMON (none).
for a; do
	case $a in
	DURATION=* | SHORT_RATE=* | SHORT_MS=* | LONG_RATE=* | LONG_CHAIN=* | LONG_MS=* | \
		BE_MS=* | SEED=* | BEFORE_DAEMON=*) export "${a?}" ;;
	*) echo "unknown argument $a" >&2; exit 2 ;;
	esac
done
D=${DURATION:-12} SEED=${SEED:-1}
W=/tmp/two-lc-scenario
rm -rf $W && mkdir -p $W && cd $W || exit 1
for lib in "$(dirname "$0")/../lib" /kfdp/lib; do
	[ -f "$lib/scenario.sh" ] && break
done
. "$lib/scenario.sh"
DURATION=$D

start_tenants() { # mode lc be
	mode=$1
	if [ "$3" = 1 ]; then
		tenant "be_$mode.ready" env KFD_PREEMPT_CLASS=best-effort kfdp-scenario be --node 0 \
			--work-ms "${BE_MS:-40}" --depth 1 --duration-s "$D" --out "be_$mode.json"
	fi
	if [ "$2" = 1 ]; then
		tenant "lc_short_$mode.ready" env KFD_PREEMPT_CLASS=latency-critical kfdp-scenario lc \
			--node 0 --rate "${SHORT_RATE:-40}" --chain 1 --work-ms "${SHORT_MS:-2}" \
			--duration-s "$D" --seed "$SEED" --out "lc_short_$mode.json"
		tenant "lc_long_$mode.ready" env KFD_PREEMPT_CLASS=latency-critical kfdp-scenario lc \
			--node 0 --rate "${LONG_RATE:-8}" --chain "${LONG_CHAIN:-6}" --work-ms "${LONG_MS:-5}" \
			--duration-s "$D" --seed "$((SEED + 1))" --out "lc_long_$mode.json"
	fi
}

# Under a daemon: it attached this mode's three tenants and watches both
# latency-critical rings.
daemon_ready() {
	daemon_lists stats.json || return 1
	until_true "grep -q '\"watched_queues\": 2' stats.json" 100
}

# A mode under a daemon, which must run it through and exit 0.
daemon_mode() { # mode
	daemon_start preemptd.toml "preemptd_$1.log"
	if ! run_mode "$1" 1 1; then
		tail -20 "preemptd_$1.log" | sed 's/^/# /'
		daemon_stop
		exit 1
	fi
	daemon_stop || exit 1
	rm -f stats.json
}

run_mode lc 1 0 || exit 1
run_mode alone 0 1 || exit 1
# The scenario's settings (tests/vm/scenario.sh).
daemon_config "$W/stats.json" scan_interval_ms=2000 sample_period_us=200 >preemptd.toml
daemon_mode daemon
if [ -n "${BEFORE_DAEMON:-}" ]; then
	KFDP_DAEMON=$BEFORE_DAEMON
	daemon_mode before
	KFDP_DAEMON=
fi

kfdp-scenario two-lc-report --dir "$W" --out-json two_lc.json >two_lc.txt 2>&1
rc=$?
cat two_lc.txt
echo "=== kfdp-scenario two-lc json begin ==="
cat two_lc.json
echo
echo "=== kfdp-scenario two-lc json end ==="
exit $rc
