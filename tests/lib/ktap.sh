# SPDX-License-Identifier: GPL-2.0
# The KTAP helper of every shell test: sourced, never run; POSIX sh, as the
# test VM's /bin/sh is busybox's. A test finds it beside its own directory,
# in lib/ (tests/lib/ktap.sh in the tree, /kfdp/lib/ktap.sh in the VMs,
# out/hw/lib/ktap.sh beside the hardware kit):
#
#   for ktap in "$(dirname "$0")/../lib/ktap.sh" /kfdp/lib/ktap.sh; do
#   	[ -f "$ktap" ] && break
#   done
#   . "$ktap"
#
# Cases, numbered in order; every check takes its condition first and the
# case's name last:
#   ok NAME, nok NAME          a case that passed, or failed
#   skip NAME WHY              a case that could not run here
#   check RC NAME              ok if RC is 0, else not ok
#   check_eval EXPR NAME       ok if EXPR, evaluated, succeeds
# Around them:
#   ktap_header                "TAP version 13"
#   ktap_plan N                "1..N"
#   ktap_skip_all WHY          "1..0 # SKIP WHY", and exit 4 (KSFT_SKIP)
# and one of the two ends, whose status is 0 only if no case failed:
#   ktap_summary               "N passed, M failed[, K skipped]": the line
#                              make check adds up, for tests it runs itself
#   ktap_finished              "# Totals: pass:N fail:M ... skip:K", as the
#                              kernel's ktap_helpers.sh ends a kselftest
# The counts are n (cases), fails and skips.

n=0 fails=0 skips=0

ok() {
	n=$((n + 1))
	echo "ok $n $1"
}

nok() {
	n=$((n + 1))
	fails=$((fails + 1))
	echo "not ok $n $1"
}

skip() {
	n=$((n + 1))
	skips=$((skips + 1))
	echo "ok $n $1 # SKIP $2"
}

check() {
	if [ "$1" = 0 ]; then ok "$2"; else nok "$2"; fi
}

check_eval() {
	if eval "$1"; then ok "$2"; else nok "$2"; fi
}

ktap_header() {
	echo "TAP version 13"
}

ktap_plan() {
	echo "1..$1"
}

ktap_skip_all() {
	echo "1..0 # SKIP $1"
	exit 4
}

ktap_summary() {
	if [ "$skips" -gt 0 ]; then
		echo "$((n - fails - skips)) passed, $fails failed, $skips skipped"
	else
		echo "$((n - fails)) passed, $fails failed"
	fi
	[ "$fails" = 0 ]
}

ktap_finished() {
	echo "# Totals: pass:$((n - fails - skips)) fail:$fails xfail:0 xpass:0 skip:$skips error:0"
	[ "$fails" = 0 ]
}
