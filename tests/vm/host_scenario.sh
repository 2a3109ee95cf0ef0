#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# In the test VM (sim_nodes=16, every node HWS like an MI300X in CPX mode):
# the host scenario of Documentation/userspace.rst. Latency-critical (LC)
# tenants on nodes 0 and 1, a tenant of short, frequent requests on node 2,
# an LC tenant whose requests return to the host for 2 ms between their
# dispatches on node 3 (the daemon's hysteresis must learn to cover them:
# judged by the preemptions a request cost),
# a best-effort (BE) tenant saturating every node (three 250 ms dispatches
# outstanding, looked at every 100 ms: sixteen of them must leave the VM's
# CPU to the rest, and one not scheduled for half a second, as happens in
# the debug VM, must still not leave its node idle; eight on the nodes
# without LC work, whose check is that the daemon leaves their node alone);
# each measured alone (the LC tenants together, then the BE tenants
# together: every tenant is alone on its node), all together without a
# daemon, and all together under kfd-preemptd. The simulated
# node counts the queues each node had preempted and logs, on its own
# clock, the doorbell each preemption answered. The LC tenants run at nice
# -10 in every mode, as a serving process would be given the CPU: with
# twenty tenants on the VM's one CPU, a request submitted late measures
# the CPUs, not the GPU. `kfdp-scenario
# host-report` judges the criteria; its JSON is printed between markers
# for scripts/scenario.sh.
#
# Arguments NAME=VALUE (or the environment): DURATION (s, default 20),
# NODES (16), SEED (1), IDLE_MAX_US (idle_hysteresis_max_us of node 3's
# [[node]] section, 10000; 0 keeps its hysteresis fixed at 1 ms, which node
# 3's criterion must catch).
for a; do
	case $a in
	DURATION=* | NODES=* | SEED=* | IDLE_MAX_US=*) export "${a?}" ;;
	*) echo "unknown argument $a" >&2; exit 2 ;;
	esac
done
D=${DURATION:-20} NODES=${NODES:-16} SEED=${SEED:-1}
LC_NODES="0 1" SHORT_NODE=2 SEQ_NODE=3 BE_MS=250 LC_NICE=-10
# BE dispatches outstanding on the nodes with LC work (0 to SEQ_NODE) and
# on those without (above).
BE_DEPTH_LC=3 BE_DEPTH_ALONE=8
SIM=/sys/kernel/debug/kfd_preempt/sim
W=/tmp/host-scenario
rm -rf $W && mkdir -p $W && cd $W || exit 1

for lib in "$(dirname "$0")/../lib" /kfdp/lib; do
	[ -f "$lib/scenario.sh" ] && break
done
. "$lib/scenario.sh"
DURATION=$D

# One scrape of the daemon's metrics and its statistics from the same
# snapshot (a write comes every second: retried until the two match), for
# tests/metrics/metrics_test.sh --scrape on the host (no TCP in the VM).
# Taken halfway through the daemon's run, while every tenant is attached.
capture_metrics() {
	i=0
	while [ $i -lt 10 ]; do
		kfdp-scenario scrape --unix $W/metrics.sock --out metrics.txt &&
			cp preemptd.json metrics-stats.json &&
			[ "$(awk '/^kfd_preemptd_stats_written_timestamp_seconds/ { printf "%.0f", $2 * 1000 }' metrics.txt)" = \
				"$(sed -n 's/.*"written_at_unix_ms": *\([0-9]*\).*/\1/p' metrics-stats.json)" ] && return 0
		i=$((i + 1))
		sleep 0.3
	done
	echo "# no scrape matched the statistics of its moment"
}

# The VM's local timer interrupts so far, every CPU's: the ARM samplers
# tick in them (the report gives each mode's rate). Nothing where there is
# no LOC line (not x86): the report then leaves the rates out.
timer_irqs() {
	awk '/^ *LOC:/ { n = 1; for (i = 2; i <= NF; i++) if ($i ~ /^[0-9]+$/) s += $i } END { if (n) print s }' /proc/interrupts
}

start_tenants() { # mode lc be
	mode=$1 label=$1
	[ "$mode" = alone ] && { [ "$2" = 1 ] && label=alone_lc || label=alone_be; }
	if [ "$3" = 1 ]; then
		n=0
		while [ $n -lt "$NODES" ]; do
			depth=$BE_DEPTH_ALONE
			[ $n -le $SEQ_NODE ] && depth=$BE_DEPTH_LC
			tenant "be_${mode}_n$n.ready" env KFD_PREEMPT_CLASS=best-effort kfdp-scenario be \
				--node $n --work-ms $BE_MS --depth $depth --poll-ms 100 --duration-s "$D" \
				--out "be_${mode}_n$n.json"
			n=$((n + 1))
		done
	fi
	[ "$2" = 1 ] || return 0
	for n in $LC_NODES; do
		lc_tenant $n --rate 20 --chain 3 --work-ms 5 --seed $((SEED + n))
	done
	# Short, frequent requests: one 2 ms dispatch, 50 a second.
	lc_tenant $SHORT_NODE --rate 50 --chain 1 --work-ms 2 --seed $((SEED + 100))
	# Requests of three 3 ms dispatches, each submitted 2 ms after the
	# one before it ended, 10 a second.
	lc_tenant $SEQ_NODE --rate 10 --chain 3 --work-ms 3 --gap-ms 2 --seed $((SEED + 200))
}

lc_tenant() { # node kfdp-scenario-lc-options...
	node=$1
	shift
	tenant "lc_${mode}_n$node.ready" env KFD_PREEMPT_CLASS=latency-critical kfdp-scenario lc \
		--node "$node" --duration-s "$D" --out "lc_${mode}_n$node.json" "$@"
	renice -n $LC_NICE -p "$TENANT_LAST" >/dev/null
}

# The daemon attached every tenant and made its decisions; the simulated
# nodes' counts start from here.
daemon_ready() {
	daemon_lists preemptd.json || return 1
	want=$(($(echo $LC_NODES | wc -w) + 2))
	# (no python in the VM: the pretty-printed JSON has one tenant per
	# "class" line, one watching decision per non-zero watched_queues)
	until_true '[ -e preemptd.json ] &&
		[ "$(grep -c "\"class\":" preemptd.json)" -eq $((NODES + want)) ] &&
		[ "$(grep -c "\"watched_queues\": [1-9]" preemptd.json)" -eq $want ]' 600 ||
		{ echo "# the daemon did not pick the tenants up"; return 1; }
	echo "# the daemon picked the tenants up (its CPU ticks so far: $(awk '{ print $14 + $15 }' /proc/"$DAEMON_PID"/stat))"
	for f in $SIM/node*/preempt_log; do echo >"$f"; done
	n=0
	while [ $n -lt "$NODES" ]; do
		cat $SIM/node$n/suspended_queues >"suspended_before_n$n"
		n=$((n + 1))
	done
	cpu_before=$(awk '{ print $14 + $15 }' /proc/"$DAEMON_PID"/stat)
}

before_go() {
	start=$(cut -d" " -f1 /proc/uptime)
	irqs_before=$(timer_irqs)
}

# Halfway through the daemon's run, while every tenant is attached.
while_measuring() {
	if [ -n "$DAEMON_PID" ]; then
		sleep $((D / 2))
		capture_metrics
	fi
}

after_measuring() {
	end=$(cut -d" " -f1 /proc/uptime)
	echo "$irqs_before $(timer_irqs) $start $end" >"timer_irqs_$label"
	[ -n "$DAEMON_PID" ] || return 0
	cpu_after=$(awk '{ print $14 + $15 }' /proc/"$DAEMON_PID"/stat)
	# /proc/PID/stat counts USER_HZ ticks, 100 a second on Linux.
	echo "$cpu_before $cpu_after 100 $start $end" >daemon_cpu
	n=0
	while [ $n -lt "$NODES" ]; do
		echo $(($(cat $SIM/node$n/suspended_queues) - $(cat suspended_before_n$n))) \
			>"suspended_n$n"
		cat $SIM/node$n/preempt_log >"preempt_log_n$n"
		n=$((n + 1))
	done
}

[ -d $SIM/node$((NODES - 1)) ] || { echo "# the module has fewer than $NODES simulated nodes"; exit 1; }
[ "$NODES" -gt "$SEQ_NODE" ] || { echo "# NODES must be above $SEQ_NODE (the LC tenants' nodes)"; exit 1; }
# The CPUs every tenant and the daemon share (tests/vm/run --cpus).
grep -c '^processor' /proc/cpuinfo >cpus
echo "# the VM's CPUs: $(cat cpus)"
run_mode alone 1 0 || exit 1
run_mode alone 0 1 || exit 1
run_mode together 1 1 || exit 1

# Sampling every 1 ms, not 200 us: each armed decision's sampler ticks in
# a timer interrupt, which costs the VM's one CPU tens of microseconds
# (a host's, one or two), taken from whichever tenant it interrupts.
# Only node 3's requests return to the host between their dispatches: its
# decision learns its hysteresis; the others keep 1 ms (learning from the
# random gaps between Poisson requests would cost their BE, for a reaction
# of about a millisecond saved).
{
	daemon_config "$W/preemptd.json" "metrics=\"unix:$W/metrics.sock\""
	printf '\n[[node]]\ngpu_id = %d\nidle_hysteresis_max_us = %d\n' \
		$((0x5100 + SEQ_NODE)) "${IDLE_MAX_US:-10000}"
} >preemptd.toml
daemon_start preemptd.toml preemptd.log
run_mode daemon 1 1 || { sed "s/^/# /" preemptd.log | tail -80; sed "s/^/# /" preemptd.json; exit 1; }
cp preemptd.json preemptd_run.json
echo "=== kfdp-scenario metrics begin ==="
cat metrics.txt
echo "=== kfdp-scenario metrics end ==="
echo "=== kfdp-scenario metrics-stats begin ==="
cat metrics-stats.json
echo "=== kfdp-scenario metrics-stats end ==="
kfd-preempt daemon --stats $W/preemptd.json | sed 's/^/# /'
daemon_stop
grep -c . preemptd.log | sed 's/^/# daemon log lines: /'

# Into a file, then shown: the exit status is the report's (a pipe to tee
# made it tee's).
# shellcheck disable=SC2086 # node lists
kfdp-scenario host-report --dir "$W" --nodes "$NODES" --lc-nodes "$(echo $LC_NODES | tr ' ' ,)" \
	--short-nodes $SHORT_NODE --seq-nodes $SEQ_NODE --stats preemptd_run.json --out-json host.json \
	>host.txt 2>&1
rc=$?
cat host.txt
echo "=== kfdp-scenario host json begin ==="
cat host.json
echo
echo "=== kfdp-scenario host json end ==="
exit $rc
