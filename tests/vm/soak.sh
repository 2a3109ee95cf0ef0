#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# In the test VM: kfd-preemptd against the tenant zoo (kfdp-scenario soak:
# processes that fork workers holding their descriptor, exec, create
# queues late, re-create them at new rings, die mid-request, and hundreds
# of brief ones) on NODES simulated nodes for DURATION seconds, checked all
# along (Documentation/testing.rst, "The soak"). Then the daemon stops and
# nothing may be left suspended, and the kernel log must be clean. KTAP;
# the soak's counts are printed between markers for scripts/soak.sh.
#
# Arguments NAME=VALUE (or the environment): DURATION (s, 90), SEED (1),
# NODES (4), REUSE (1: a queue made again may get its old ring address
# back).
for a; do
	case $a in
	DURATION=* | SEED=* | NODES=* | REUSE=*) export "${a?}" ;;
	*) echo "unknown argument $a" >&2; exit 2 ;;
	esac
done
D=${DURATION:-90} SEED=${SEED:-1} NODES=${NODES:-4}
reuse=
[ "${REUSE:-0}" = 1 ] && reuse=--reuse-ring-addresses
W=/tmp/soak
rm -rf $W && mkdir -p $W && cd $W || exit 1
for lib in "$(dirname "$0")/../lib" /kfdp/lib; do
	[ -f "$lib/scenario.sh" ] && break
done
. "$lib/ktap.sh"
. "$lib/scenario.sh"

ktap_header
if [ ! -e /dev/kfd_preempt_sim ] || ! command -v kfd-preemptd >/dev/null ||
	! command -v kfdp-scenario >/dev/null || ! command -v kfd-preempt >/dev/null; then
	ktap_skip_all "needs the simulated node (sim_nodes=N), kfd-preemptd, kfd-preempt and kfdp-scenario"
fi
ktap_plan 7
# The bound the soak judges holding by: ten scan intervals. A queue
# created while its node is held is found at the next scan, then
# attached, queried and preempted; in this debug TCG VM, with the zoo's
# processes on its one CPU, the daemon's scan thread waits for the CPU.
SCAN_MS=100 BOUND_MS=${BOUND_MS:-1000}
daemon_config "$W/stats.json" scan_interval_ms=$SCAN_MS idle_hysteresis_us=2000 lease_ms=500 \
	min_share_period_ms= min_share_budget_ms=0 >soak.toml
dmesg_before=$(dmesg | wc -l)
kfd-preemptd --config soak.toml >daemon.log 2>&1 &
d=$!
i=0
while [ ! -e stats.json ] && [ $i -lt 100 ]; do i=$((i + 1)); sleep 0.1; done
kfdp-scenario soak --nodes "$NODES" --seconds "$D" --seed "$SEED" --daemon-pid $d \
	--daemon-stats $W/stats.json --bound-ms $BOUND_MS --dir $W --out $W/soak.json $reuse
src=$?
# One case per check of the soak, each failing on its own violations.
violations() { grep -o "\"$1\": *[0-9]*" soak.json 2>/dev/null | grep -o '[0-9]*$' || echo 0; }
if [ ! -s soak.json ]; then
	for what in orphan tenants daemon hold; do
		nok "soak $what: $D s on $NODES nodes (seed $SEED) ran and reported (exit $src)"
	done
else
	for what in orphan tenants daemon hold; do
		check "$(violations $what)" "soak $what: $D s on $NODES nodes (seed $SEED), no violation"
	done
fi
# The daemon stops while it holds a tenant that lives on: a
# latency-critical one keeping node 0 busy and a best-effort one beside it.
# Once the daemon is gone nothing may stay suspended.
KFD_PREEMPT_CLASS=latency-critical kfdp-scenario lc --rate 20 --chain 3 --work-ms 30 \
	--duration-s 600 --out lc.json --ready-file lc.ready >/dev/null 2>&1 &
lc=$!
KFD_PREEMPT_CLASS=best-effort kfdp-scenario be --work-ms 50 --duration-s 600 \
	--out be.json --ready-file be.ready >/dev/null 2>&1 &
be=$!
held=0 i=0
while [ $i -lt 300 ]; do
	held=$(held $be) || held=0
	[ "${held:-0}" -gt 0 ] && break
	i=$((i + 1))
	sleep 0.1
done
kill -TERM $d
wait $d
drc=$?
check $drc "kfd-preemptd exits 0 on SIGTERM after the soak"
left=$(suspended)
[ "${held:-0}" -gt 0 ] && [ "$left" = 0 ]
check $? "the daemon held a live tenant when it stopped ($held queues), and left nothing suspended ($left)"
kill $lc $be 2>/dev/null
wait $lc $be 2>/dev/null
dmesg | tail -n +"$((dmesg_before + 1))" >kernel.log
if grep -E 'WARNING:|BUG:|KASAN|possible circular locking|Call Trace' kernel.log; then
	nok "kernel log clean during the soak"
else
	ok "kernel log clean during the soak"
fi
# What the daemon said, less its preemptions and resumes.
grep -E 'event=(detach|inherited|start|stop)|level=(warn|error)' daemon.log | sed 's/^/# daemon: /'
echo "# daemon: $(grep -c 'event=preempt' daemon.log) preempt lines"
echo "# stats: $(tr -d '\n' <stats.json | head -c 600)"
# The module's own counts: leases that ran out, queues resumed by others,
# watches pinned again after their memory moved.
grep -E '^(leases_expired|external_resumes|queues_preempted|queues_resumed|watches_remade) ' \
	/sys/kernel/debug/kfd_preempt/stats 2>/dev/null | sed 's/^/# module: /'

# The daemon's and the kernel's logs leave the VM whole, for scripts/soak.sh
# to keep in out/soak/: a violation's "unix" time finds it in the daemon's.
echo "=== kfdp-scenario soak daemon-log begin ==="
cat daemon.log
echo "=== kfdp-scenario soak daemon-log end ==="
echo "=== kfdp-scenario soak kernel-log begin ==="
cat kernel.log
echo "=== kfdp-scenario soak kernel-log end ==="
echo "=== kfdp-scenario soak json begin ==="
cat soak.json 2>/dev/null
echo "=== kfdp-scenario soak json end ==="
ktap_summary
