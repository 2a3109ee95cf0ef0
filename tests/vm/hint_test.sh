#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# kfd-preemptd's hints against simulated tenants (Documentation/userspace.rst,
# HINTS): a process that is not a tenant and a best-effort tenant are
# refused and preempt nothing; a latency-critical tenant's hint takes the
# best-effort tenant's queues off its node before it makes any work, and
# with no work the hint ends at its time; the statistics count all of it.
# KTAP.
for lib in "$(dirname "$0")/../lib" /kfdp/lib; do
	[ -f "$lib/scenario.sh" ] && break
done
. "$lib/ktap.sh"
. "$lib/scenario.sh"
W=/tmp/hint_test
rm -rf $W && mkdir -p $W && cd $W || exit 1
# The number after "KEY": in the statistics (0 if absent).
stat() { tr -d ' \n' <stats.json | grep -o "\"$1\":[0-9]*" | head -n 1 | grep -o '[0-9]*$' || echo 0; }

ktap_header
if [ ! -e /dev/kfd_preempt_sim ] || ! command -v kfd-preemptd >/dev/null ||
	! command -v kfdp-scenario >/dev/null || ! command -v kfd-preempt >/dev/null; then
	ktap_skip_all "needs the simulated node (sim_nodes=N), kfd-preemptd, kfd-preempt and kfdp-scenario"
fi
ktap_plan 8

be= probe=
trap 'kill $be $probe $DAEMON_PID 2>/dev/null' EXIT
trap 'exit 143' INT TERM

# No minimum share: a hint held for seconds is not interrupted by it.
daemon_config "$W/stats.json" scan_interval_ms=100 min_share_budget_ms=0 \
	"hint_socket=\"$W/run/hint.sock\"" hint_max_ms=5000 >hint.toml
KFD_PREEMPT_CLASS=best-effort kfdp-scenario be --work-ms 50 --duration-s 600 \
	--out be.json --ready-file be.ready >/dev/null 2>&1 &
be=$!
await_files 100 be.ready
daemon_start hint.toml daemon.log
until_true "[ -S $W/run/hint.sock ] && [ -e stats.json ] && grep -q best-effort stats.json" 100
check $? "the daemon listens on its hint socket (made in a new directory)"

probe() { # answer-file probe-options...
	_a=$1
	shift
	kfdp-scenario hint-probe --socket $W/run/hint.sock --answer-file "$_a" "$@" >/dev/null 2>&1
}

probe other.answer --no-queue
answer=$(cat other.answer 2>/dev/null)
echo "# not a tenant: $answer"
check_eval '[ "$answer" = "refused not-a-tenant" ] && [ "$(suspended)" = 0 ]' \
	"a process that is not a tenant is refused, nothing preempted"

KFD_PREEMPT_CLASS=best-effort probe be.answer --node 0
answer=$(cat be.answer 2>/dev/null)
echo "# best-effort: $answer"
check_eval '[ "$answer" = "refused lowest-level" ] && [ "$(suspended)" = 0 ]' \
	"a best-effort tenant's hint is refused, nothing preempted"

# The probe makes its ring and no work, and keeps its connection open well
# past the hint's time (3 s against 20 s), so that only the hint's time,
# not the connection's close, can end it.
KFD_PREEMPT_CLASS=latency-critical probe lc.answer --node 0 --within-ms 3000 --hold-ms 20000 &
probe=$!
await_files 300 lc.answer
answer=$(cat lc.answer 2>/dev/null)
echo "# latency-critical: $answer"
check_eval '[ "$answer" = "ok 1" ]' "a latency-critical tenant's hint is taken on its node"
# The module's own count of suspended queues (BE's is the only one that
# can be): a cheap read, where QUERYing the tenant through a new process
# takes long enough on a loaded debug VM to miss a 3 s hint.
until_true '[ "$(suspended)" -gt 0 ]' 20
rc=$?
[ $rc = 0 ] || { kfd-preempt list $be 2>&1 | sed 's/^/# list: /'; tail -5 daemon.log | sed 's/^/# log: /'; }
check $rc "the best-effort tenant is off the node before any latency-critical work"
until_true '[ "$(suspended)" = 0 ]' 100 && kill -0 $probe 2>/dev/null
check $? "with no work the hint ends at its time, its connection still open, and the best-effort tenant runs again"
kill $probe 2>/dev/null
wait $probe
probe=

until_true "[ \"\$(stat hints_expired)\" -gt 0 ]" 30
echo "# stats: accepted $(stat accepted), not-a-tenant $(stat not-a-tenant), lowest-level $(stat lowest-level), expired $(stat hints_expired)"
check_eval '[ "$(stat accepted)" -ge 1 ] && [ "$(stat not-a-tenant)" -ge 1 ] &&
	[ "$(stat lowest-level)" -ge 1 ] && [ "$(stat hints_expired)" -ge 1 ]' \
	"the statistics count the hints taken, refused and expired"

daemon_stop
rc=$?
check_eval '[ $rc = 0 ] && [ ! -e $W/run/hint.sock ] && [ "$(suspended)" = 0 ]' \
	"kfd-preemptd exits 0, removes its hint socket and leaves nothing suspended"
grep -E 'reason=hint|level=(warn|error)' daemon.log | head -5 | sed 's/^/# daemon: /'
kill $be 2>/dev/null
wait $be 2>/dev/null
be=
ktap_finished || exit 1
