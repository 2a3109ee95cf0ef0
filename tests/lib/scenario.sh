# SPDX-License-Identifier: GPL-2.0
# The scenario driver and the daemon configuration that the VM scripts
# running kfd-preemptd against simulated tenants share (tests/vm/scenario.sh,
# host_scenario.sh, daemon_test.sh, soak.sh). Sourced, never run; POSIX sh,
# as the test VM's /bin/sh is busybox's. Found as ktap.sh is, beside it:
#
#   for lib in "$(dirname "$0")/../lib" /kfdp/lib; do
#   	[ -f "$lib/scenario.sh" ] && break
#   done
#   . "$lib/scenario.sh"
#
# Waiting:
#   await_files TENTHS FILE...   every FILE exists, within TENTHS of a second
#   until_true EXPR TENTHS       EXPR, evaluated, succeeds within as long
# The simulated nodes' queues:
#   suspended                    prints how many are suspended, by any owner
#   held PID                     prints how many of PID's QUERY reports
#                                suspended; prints nothing, and fails, when
#                                QUERY fails (a tenant gone is never "0 held")
# The daemon:
#   daemon_config STATS [NAME=VALUE...]
#                                prints the configuration: [daemon] with the
#                                shared settings below, each NAME=VALUE
#                                replacing (or, with an empty VALUE,
#                                dropping) one of them or adding a key, then
#                                the two classes, "inference"
#                                (latency-critical) and "training"
#                                (best-effort), both chosen by the tenants'
#                                KFD_PREEMPT_CLASS. A script appends its own
#                                [[node]] or [[class]] sections after it.
#   daemon_start CONFIG LOG      starts kfd-preemptd ($KFDP_DAEMON if set: a
#                                build to compare), its pid in DAEMON_PID
#   daemon_stop                  SIGTERM, waits, says its exit status and
#                                returns it; DAEMON_PID empty again
#   daemon_lists STATS           the daemon's statistics file STATS lists
#                                every tenant of this mode (TENANT_PIDS)
#                                within 30 s: what a daemon_ready waits
#                                for, which a file of an earlier mode
#                                cannot satisfy
# One mode of a scenario, measured over the same window by every tenant:
#   run_mode MODE LC BE          (DURATION, s, says how long) calls the script's start_tenants MODE LC BE
#                                (LC and BE are 1 for the tenants to start),
#                                which starts each tenant through
#                                "tenant READY_FILE COMMAND...", each given
#                                "--go-file go" (its pid in TENANT_LAST;
#                                "env NAME=VALUE kfdp-scenario ..." sets its
#                                class); waits until all are ready;
#                                then, under a daemon, the script's
#                                daemon_ready, which waits until the daemon
#                                has picked them up; then before_go, starts
#                                them all at once, calls while_measuring and
#                                waits for every tenant; then
#                                after_measuring; then, under a daemon,
#                                prints its CPU time and context switches
#                                over the mode (daemon_usage).
#                                The hooks do nothing unless the script
#                                defines them after sourcing this file.
#                                Fails if a tenant, or a hook, fails.

suspended() {
	awk '$1 == "suspended" { print $2 }' /sys/kernel/debug/kfd_preempt/sim/status
}

held() { # pid
	_held_list=$(kfd-preempt list "$1" 2>/dev/null) || return 1
	printf '%s\n' "$_held_list" | awk 'NR > 1 && $4 ~ /suspended/ { n++ } END { print n + 0 }'
}

await_files() { # tenths file...
	_tenths=$1
	shift
	_i=0
	for _f in "$@"; do
		while [ ! -e "$_f" ]; do
			_i=$((_i + 1))
			[ $_i -gt "$_tenths" ] && { echo "# timed out waiting for $_f"; return 1; }
			sleep 0.1
		done
	done
}

until_true() { # expr tenths
	_i=0
	until eval "$1"; do
		_i=$((_i + 1))
		[ $_i -gt "$2" ] && return 1
		sleep 0.1
	done
}

# The settings every scenario starts from: the daemon scans for tenants
# every second, samples its watched queues every millisecond, resumes the
# lower levels 1 ms after the latency-critical queues go idle, preempts with
# 1 s leases from a SCHED_FIFO loop, and gives best-effort 100 ms of every
# second.
daemon_config() { # stats [name=value...]
	_stats=$1
	shift
	echo "[daemon]"
	# The later NAME=VALUE of a name wins, in the place of its first.
	printf '%s\n' 'tenants="sim"' scan_interval_ms=1000 sample_period_us=1000 \
		idle_hysteresis_us=1000 lease_ms=1000 fifo_priority=10 \
		min_share_period_ms=1000 min_share_budget_ms=100 "stats_path=\"$_stats\"" "$@" |
		awk '{ k = $0; sub(/=.*/, "", k); v = substr($0, length(k) + 2)
		       if (!(k in val)) order[++n] = k; val[k] = v }
		     END { for (i = 1; i <= n; i++) if (val[order[i]] != "") print order[i] " = " val[order[i]] }'
	cat <<EOF

[[class]]
name = "inference"
priority = "latency-critical"
env = "latency-critical"

[[class]]
name = "training"
priority = "best-effort"
env = "best-effort"
EOF
}

DAEMON_PID=
daemon_start() { # config log
	"${KFDP_DAEMON:-kfd-preemptd}" --config "$1" 2>>"$2" &
	DAEMON_PID=$!
}

daemon_stop() {
	kill -TERM "$DAEMON_PID"
	wait "$DAEMON_PID"
	_rc=$?
	echo "# kfd-preemptd exited with $_rc"
	DAEMON_PID=
	return $_rc
}

# The hooks of run_mode, which a script may define again.
daemon_lists() { # stats
	for _pid in $TENANT_PIDS; do
		until_true "[ -e $1 ] && grep -q '\"pid\": $_pid,' $1" 300 ||
			{ echo "# the daemon did not pick tenant $_pid up"; return 1; }
	done
}

daemon_ready() { :; }
before_go() { :; }
while_measuring() { :; }
after_measuring() { :; }

tenant() { # ready-file command...
	_ready=$1
	shift
	"$@" --ready-file "$_ready" --go-file go &
	TENANT_LAST=$!
	TENANT_PIDS="$TENANT_PIDS $!" TENANT_READY="$TENANT_READY $_ready"
}

run_mode() { # mode lc be
	rm -f go
	TENANT_PIDS= TENANT_READY=
	start_tenants "$@" || return 1
	# shellcheck disable=SC2086 # one file name per word
	await_files 200 $TENANT_READY || return 1
	if [ -n "$DAEMON_PID" ]; then
		daemon_ready || return 1
	fi
	echo "# mode $1: measuring for ${DURATION}s"
	_used=$(daemon_usage)
	before_go || return 1
	touch go
	while_measuring || return 1
	for _p in $TENANT_PIDS; do
		wait "$_p" || return 1
	done
	after_measuring || return 1
	[ -z "$DAEMON_PID" ] || echo "# mode $1: the daemon used $(daemon_usage "$_used")"
}

# The daemon's CPU time (USER_HZ ticks) and its context switches so far,
# all its threads together, or, given an earlier reading, since then: a
# daemon that wakes without cause shows as many switches for little work.
daemon_usage() { # [earlier]
	[ -n "$DAEMON_PID" ] || return 0
	_now=$(awk '{ print $14 + $15 }' /proc/"$DAEMON_PID"/stat)
	_now="$_now $(cat /proc/"$DAEMON_PID"/task/*/status 2>/dev/null |
		awk '/^voluntary_ctxt_switches/ { v += $2 } /^nonvoluntary_ctxt_switches/ { n += $2 }
		END { print v + 0, n + 0 }')"
	if [ -z "${1:-}" ]; then
		echo "$_now"
	else
		# shellcheck disable=SC2086 # three numbers each
		set -- $1 $_now
		echo "$(($4 - $1)) ticks of CPU, $(($5 - $2)) voluntary and $(($6 - $3)) involuntary switches"
	fi
}
