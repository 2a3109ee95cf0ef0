#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# In the test VM (sim_nodes=1): the hint scenario of
# Documentation/userspace.rst ("The hint scenario"). Short latency-critical
# requests (one LC_MS dispatch, RATE a second), each prepared on the host
# for PREP_MS before its dispatch, beside a best-effort tenant of BE_MS
# dispatches, on node 0: each alone, then under one kfd-preemptd without
# hints and with them (the LC tenant hints at each arrival). The node logs
# on its own clock when it unmapped BE. `kfdp-scenario hint-report` judges
# the run; its JSON is printed between markers for scripts/scenario.sh.
#
# With two CPUs or more, the LC tenant runs on CPU 0 and the daemon and
# the BE tenant on the others, as a host gives an inference service its
# own cores and the daemon a housekeeping one (PIN=0: no pinning). On one
# CPU the daemon's handling of a hint takes the CPU the preparation it
# is to hide needs.
#
# Arguments NAME=VALUE (or the environment): DURATION (s a mode, 20), RATE
# (60), LC_MS (2), PREP_MS (2), BE_MS (40), SEED (1), PIN (1).
for a; do
	case $a in
	DURATION=* | RATE=* | LC_MS=* | PREP_MS=* | BE_MS=* | SEED=* | PIN=*) export "${a?}" ;;
	*) echo "unknown argument $a" >&2; exit 2 ;;
	esac
done
D=${DURATION:-20} RATE=${RATE:-60} LC_MS=${LC_MS:-2} PREP_MS=${PREP_MS:-2}
BE_MS=${BE_MS:-40} SEED=${SEED:-1}
# This shell first, so that everything it starts (the BE tenant, the
# daemon and each of its threads, the polls) inherits the other CPUs; the
# LC tenant is started on CPU 0.
lc_pin=
if [ "${PIN:-1}" = 1 ] && [ "$(nproc)" -gt 1 ]; then
	rest_cpus=1-$(($(nproc) - 1))
	taskset -pc "$rest_cpus" $$ >/dev/null || exit 1
	lc_pin="taskset -c 0"
	echo "# pinned: the LC tenant to CPU 0; the BE tenant and kfd-preemptd to CPUs $rest_cpus"
fi
SIM=/sys/kernel/debug/kfd_preempt/sim
W=/tmp/hint-scenario
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
			--work-ms "$BE_MS" --depth 1 --duration-s "$D" --out "be_$mode.json"
	fi
	if [ "$2" = 1 ]; then
		hint=
		[ "$mode" = hint ] && hint="--hint $W/hint.sock"
		# shellcheck disable=SC2086 # the options and their values
		tenant "lc_$mode.ready" $lc_pin env KFD_PREEMPT_CLASS=latency-critical kfdp-scenario lc \
			--node 0 --rate "$RATE" --chain 1 --work-ms "$LC_MS" --prep-ms "$PREP_MS" \
			--duration-s "$D" --seed "$SEED" --out "lc_$mode.json" $hint
	fi
}

# Under the daemon: it attached this mode's tenants (a file of the mode
# before still lists that mode's) and watches the LC ring.
daemon_ready() {
	daemon_lists stats.json || return 1
	until_true "grep -q '\"watched_queues\": 1' stats.json" 100
}

before_go() { echo >$SIM/node0/preempt_log; }
after_measuring() { cp $SIM/node0/preempt_log "preempt_log_$mode"; }

run_mode alone 1 0 || exit 1
run_mode alone 0 1 || exit 1
# The scenario's settings (tests/vm/scenario.sh), and the hint socket.
daemon_config "$W/stats.json" scan_interval_ms=2000 sample_period_us=200 \
	"hint_socket=\"$W/hint.sock\"" >preemptd.toml
daemon_start preemptd.toml preemptd.log
run_mode daemon 1 1 || { tail -20 preemptd.log | sed 's/^/# /'; exit 1; }
run_mode hint 1 1 || { tail -20 preemptd.log | sed 's/^/# /'; exit 1; }
# The statistics of the hint mode's end: the next write comes within 1 s.
sleep 1.2
cp stats.json stats_end.json
daemon_stop
# What the daemon did, by event and reason.
grep -o 'event=[a-z-]* reason=[a-z-]*' preemptd.log | sort | uniq -c | sed 's/^/# daemon: /'

kfdp-scenario hint-report --dir "$W" --out-json hint.json >hint.txt 2>&1
rc=$?
cat hint.txt
echo "=== kfdp-scenario hint json begin ==="
cat hint.json
echo
echo "=== kfdp-scenario hint json end ==="
exit $rc
