#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# The kfd-preempt CLI against a simulated tenant (kfdp-scenario sim-tenant,
# the developer tool's), as an operator uses it:
# list shows the queues, preempt/resume visibly stop and restart their
# progress, stats shows who holds them, a lease ends by itself, freeze/thaw,
# and errors exit non-zero
# with a message. KTAP.
cli=kfd-preempt
tenant_tool=kfdp-scenario
for ktap in "$(dirname "$0")/../lib/ktap.sh" /kfdp/lib/ktap.sh; do
	[ -f "$ktap" ] && break
done
. "$ktap"
# Sum of the RETIRED column of `kfd-preempt list`.
retired() { $cli list "$1" | awk 'NR > 1 { s += $NF } END { print s + 0 }'; }
# The state column of queue $2.
state() { $cli list "$1" | awk -v q="$2" 'NR > 1 && $2 == q { print $4 }'; }

ktap_header
if [ ! -e /dev/kfd_preempt_sim ] || ! command -v $cli >/dev/null ||
	! command -v $tenant_tool >/dev/null; then
	ktap_skip_all "needs the simulated node (sim_nodes=N), and kfd-preempt and kfdp-scenario on PATH"
fi
ktap_plan 11
$tenant_tool sim-tenant --queues 3 --node 0 >/tmp/cli_tenant.out &
tenant=$!
sleep 1
grep -q "^ready pid=$tenant" /tmp/cli_tenant.out
check $? "sim-tenant starts"

out=$($cli list $tenant)
echo "$out" | sed 's/^/# /'
[ "$(echo "$out" | grep -c '^0x5100 .* compute-aql .*active')" = 3 ]
check $? "list shows the three queues, active, with their GPU and type"

$cli list $tenant --json | grep -q '"ring_base_address": "0x'
check $? "list --json has the ring addresses"

$cli preempt $tenant --all >/tmp/cli_preempt.out &
holder=$!
sleep 1
cat /tmp/cli_preempt.out | sed 's/^/# /'
a=$(retired $tenant); sleep 0.3; b=$(retired $tenant)
echo "# retired while preempted: $a -> $b"
[ "$a" -gt 0 ] && [ "$a" = "$b" ] && [ "$(state $tenant 1)" = "suspended,owned-other" ]
check $? "preempt holds every queue and progress stops"

# The module's statistics name the holder's file and what it preempted.
$cli stats >/tmp/cli_stats.out 2>&1
rc=$?
sed 's/^/# /' /tmp/cli_stats.out
[ "$rc" = 0 ] && grep -q "^owner [0-9]*  tgid $holder  batches 1  queues_preempted 3 " /tmp/cli_stats.out &&
	$cli stats --json | grep -q '"queues_preempted": [1-9]'
check $? "stats shows the holder's file and its batch"

$cli resume $tenant | sed 's/^/# /'
wait $holder
rc=$?
sleep 0.3
c=$(retired $tenant)
echo "# retired after resume: $b -> $c"
[ "$rc" = 0 ] && [ "$c" -gt "$b" ] && grep -q "^resumed after .* 3/3 queue" /tmp/cli_preempt.out
check $? "resume releases the holder and progress restarts"

$cli preempt $tenant --queue 1 --lease 300 >/tmp/cli_lease.out
rc=$?
cat /tmp/cli_lease.out | sed 's/^/# /'
[ "$rc" = 0 ] && grep -q "lease ended .* the module resumed 1/1" /tmp/cli_lease.out &&
	[ "$(state $tenant 1)" = active ]
check $? "a lease ends by itself"

$cli freeze $tenant --for 200 | sed 's/^/# /'
[ "$(state $tenant 0)" = active ]
check $? "freeze --for thaws by itself"

$cli preempt $tenant --queue 99 2>/tmp/cli_err.out
rc=$?
sed 's/^/# /' /tmp/cli_err.out
[ "$rc" = 1 ] && grep -q "has no queue 99" /tmp/cli_err.out
check $? "an unknown queue exits 1 and says so"

$cli resume $tenant 2>/tmp/cli_err.out
rc=$?
[ "$rc" = 1 ] && grep -q "nothing holds" /tmp/cli_err.out
check $? "resume with no holder exits 1 and says so"

$cli list 1 2>/tmp/cli_err.out
rc=$?
[ "$rc" = 1 ] && grep -q "no /dev/kfd open" /tmp/cli_err.out
check $? "a process without KFD exits 1 and says so"

kill $tenant
wait $tenant
ktap_finished
