# SPDX-License-Identifier: GPL-2.0
# KTAP cases for the host-side script tests. Sourced, never run.
#
# check NAME EXPR: case NAME passes if EXPR (evaluated) succeeds.
# ktap_end: the summary line make check counts, and the status.
n=0 passed=0 failed=0
check() {
	n=$((n + 1))
	if eval "$2"; then
		echo "ok $n $1"
		passed=$((passed + 1))
	else
		echo "not ok $n $1"
		failed=$((failed + 1))
	fi
}
ktap_end() {
	echo "$passed passed, $failed failed"
	[ "$failed" = 0 ]
}
