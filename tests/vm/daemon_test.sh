#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# kfd-preemptd against simulated tenants, as an operator runs it: a
# misconfiguration exits 2 with nothing preempted (a [[node]] must name a
# node of this host); --once classifies by
# selector; a latency-critical request preempts the best-effort tenant and
# its end resumes it; a best-effort tenant exiting while held; the lease
# when the daemon stalls; SIGKILL at random points leaves nothing
# preempted (QUERY through `kfd-preempt list` and the simulated node's
# counters), and a restarted daemon works. KTAP.
for lib in "$(dirname "$0")/../lib" /kfdp/lib; do
	[ -f "$lib/scenario.sh" ] && break
done
. "$lib/ktap.sh"
. "$lib/scenario.sh"
STATUS=/sys/kernel/debug/kfd_preempt/sim/status
W=/tmp/daemon_test
rm -rf $W && mkdir -p $W && cd $W || exit 1

ktap_header
if [ ! -e /dev/kfd_preempt_sim ] || ! command -v kfd-preemptd >/dev/null ||
	! command -v kfdp-scenario >/dev/null; then
	ktap_skip_all "needs the simulated node (sim_nodes=N), kfd-preemptd and kfdp-scenario"
fi
ktap_plan 13

# The scenarios' configuration, scanning every 100 ms and sampling every
# 50 us, from an ordinary thread (no fifo_priority), with a third class
# chosen by the tenant's name.
config() { # hysteresis_us lease_ms
	daemon_config "$W/stats.json" scan_interval_ms=100 sample_period_us=50 \
		idle_hysteresis_us="$1" lease_ms="$2" fifo_priority=
	printf '\n[[class]]\nname = "batch"\npriority = "best-effort"\ncomm = "kfdp-batch"\n'
}

# The BE and LC tenants live through every case below, which kill them
# (or the trap does): no lifetime of theirs may race the cases. They ran
# for 120 s before, and on a slow host the cases took longer: the BE
# tenant had exited when "the restarted daemon preempts again" looked for
# it.
TENANT_S=86400
be= lc= other= d=
trap 'kill $be $lc $other $d 2>/dev/null' EXIT
trap 'exit 143' INT TERM
# Tells a tenant that exited early from a daemon that does not act.
alive() { kill -0 "$1" 2>/dev/null || { echo "# tenant $1 exited early"; return 1; }; }

# 1. A misconfiguration: exit status 2, the key named, nothing preempted.
KFD_PREEMPT_CLASS=best-effort kfdp-scenario be --work-ms 50 --duration-s $TENANT_S \
	--out be.json --ready-file be.ready >/dev/null 2>&1 &
be=$!
until_true "[ -e be.ready ]" 50
config 1000 0 >bad.toml
kfd-preemptd --config bad.toml >bad.out 2>&1
rc=$?
sed 's/^/# /' bad.out
[ $rc = 2 ] && grep -q lease_ms bad.out && [ "$(suspended)" = 0 ]
check $? "misconfiguration: exit 2 naming the key, nothing preempted"
printf '[daemon]\nsample_period_us = 5\n' >bad2.toml
kfd-preemptd --check-config bad2.toml >bad2.out 2>&1
rc=$?
[ $rc = 2 ] && grep -q sample_period_us bad2.out
check $? "--check-config refuses a period below 10 us"
# [[node]] sections must name nodes of this host (here the simulated ones,
# gpu_id 0x5100 + n, which the module's status lists).
printf '[[node]]\ngpu_id = 0x5100\nidle_hysteresis_us = 3000\n' >node.toml
kfd-preemptd --check-config node.toml >node.out 2>&1
check $? "--check-config accepts a [[node]] of a simulated node"
printf '[[node]]\ngpu_id = 0x5100\n[[node]]\ngpu_id = 0x7777\n' >bad3.toml
kfd-preemptd --config bad3.toml >bad3.out 2>&1
rc=$?
sed 's/^/# /' bad3.out
[ $rc = 2 ] && grep -q 'node\[1\].gpu_id: 0x7777 is not a node of this host' bad3.out &&
	[ "$(suspended)" = 0 ]
check $? "a [[node]] of no node of this host: exit 2 naming the key"

# 2. Selectors: env opt-in and comm; an unmatched tenant is ignored.
config 1000 200 >good.toml
kfd-preemptd --check-config good.toml
check $? "--check-config accepts the configuration"
KFD_PREEMPT_CLASS=latency-critical kfdp-scenario lc --rate 20 --chain 3 --work-ms 5 \
	--duration-s $TENANT_S --out lc.json --ready-file lc.ready >/dev/null 2>&1 &
lc=$!
kfdp-scenario be --work-ms 50 --duration-s 30 --out other.json \
	--ready-file other.ready >/dev/null 2>&1 &
other=$!
until_true "[ -e lc.ready ] && [ -e other.ready ]" 50
kfd-preemptd --config good.toml --once >once.out 2>&1
sed 's/^/# /' once.out
grep "$lc" once.out | grep -q latency-critical &&
	grep "$be" once.out | grep -q best-effort &&
	! grep "$other" once.out | grep -q -e latency-critical -e best-effort
check $? "--once classifies by env opt-in and ignores the unmatched tenant"
kill $other 2>/dev/null
wait $other 2>/dev/null
other=

# 3. Live: LC requests preempt BE, LC idleness resumes it.
kfd-preemptd --config good.toml 2>daemon.log &
d=$!
until_true "[ -e stats.json ] && grep -q latency-critical stats.json" 100
until_true "[ \"\$(held $be)\" -gt 0 ]" 100
check $? "an LC request preempts the BE tenant's queue"
until_true "[ \"\$(held $be)\" = 0 ]" 100
check $? "LC idleness resumes it"
kfd-preempt daemon --stats stats.json --json | grep -q '"preemptions": *[1-9]'
check $? "the daemon's statistics count the preemptions"

# 4. The daemon stalls (SIGSTOP) while holding BE: the lease resumes BE.
# A long hysteresis keeps BE held while the daemon runs, so that what ends
# the hold below can only be the lease.
kill -TERM $d
wait $d
config 5000000 2000 >long.toml
kfd-preemptd --config long.toml 2>>daemon.log &
d=$!
# The sim's own count (only BE is ever suspended here): a debugfs read is
# quick, where QUERY through the CLI can outlast the lease on a loaded VM.
# BE must be held once the daemon is stopped, for only the lease to end
# the hold: a stop that lands while BE runs (the minimum share resumes it
# 100 ms in every second) is tried again. The lease is 2 s, renewed at 1 s:
# on a loaded VM the daemon has woken late enough (0.8 s, Debian's 7.3
# kernel under TCG) to let a 200 ms lease lapse between renewals, and what
# this case tests is that the lease ends a stalled daemon's hold.
before=0 after=
for try in $(seq 20); do
	until_true "[ \"\$(suspended)\" -gt 0 ]" 100
	kill -STOP $d
	before=$(suspended)
	if [ "$before" -gt 0 ]; then
		until_true "[ \"\$(suspended)\" = 0 ]" 60
		after=$(suspended)
		kill -CONT $d
		break
	fi
	kill -CONT $d
done
echo "# held once stopped: $before (try $try), 6 s at most into the stall: $after"
[ "$before" -gt 0 ] && [ "$after" = 0 ]
rc=$?
[ $rc = 0 ] || { tail -8 daemon.log | sed 's/^/# /'; cat $STATUS | sed 's/^/# /'; }
check $rc "a stalled daemon's lease ends: BE runs again"
kill -TERM $d
wait $d
kfd-preemptd --config good.toml 2>>daemon.log &
d=$!

# 5. SIGKILL at random points: nothing stays preempted; a restart works.
bad=0
for i in 1 2 3 4 5; do
	sleep "0.$(awk -v s=$i 'BEGIN { srand(s); printf "%d", rand() * 9 + 1 }')"
	kill -KILL $d
	wait $d 2>/dev/null
	if [ "$(suspended)" != 0 ] || [ "$(held $be)" != 0 ]; then
		echo "# kill $i left $(suspended) queue(s) suspended"
		bad=1
	fi
	kfd-preemptd --config good.toml 2>>daemon.log &
	d=$!
done
[ $bad = 0 ]
check $? "SIGKILL at 5 random points leaves nothing preempted"
alive $be && alive $lc && until_true "[ \"\$(held $be)\" -gt 0 ]" 100
check $? "the restarted daemon preempts again"

# 6. The BE tenant exits while held: the daemon carries on.
until_true "[ \"\$(held $be)\" -gt 0 ]" 100
kill -KILL $be
wait $be 2>/dev/null
be=
sleep 0.5
kill -0 $d && [ "$(suspended)" = 0 ]
check $? "a BE tenant exiting while held: the daemon runs on, nothing left suspended"

kill -TERM $d
wait $d
echo "# kfd-preemptd exited with $?"
d=
kill $lc 2>/dev/null
wait $lc 2>/dev/null
lc=
tail -5 daemon.log | sed 's/^/# /'
ktap_finished || exit 1
