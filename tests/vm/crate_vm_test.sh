#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Runs the kfd-preempt crate's VM integration tests (userspace/kfd-preempt/
# tests/vm.rs, #[ignore]d on hosts without the module) and reports them as
# KTAP, one line per libtest result.
t=/kfdp/extra/kfd_preempt_vm_tests
echo "TAP version 13"
if [ ! -x "$t" ]; then
	echo "1..0 # SKIP $t missing (scripts/build-userspace.sh)"
	exit 4
fi
if [ ! -e /dev/kfd_preempt_sim ]; then
	echo "1..0 # SKIP needs the simulated nodes (kfd_preempt sim_nodes=2 sim_mes_nodes=2)"
	exit 4
fi
n=$("$t" --list --include-ignored 2>/dev/null | grep -c ': test$')
echo "1..$n"
"$t" --include-ignored --test-threads=1 2>&1 | awk '
	/^test .* \.\.\. ok$/ { sub(/^test /, ""); sub(/ \.\.\. ok$/, ""); print "ok " ++i " " $0; next }
	/^test .* \.\.\. FAILED$/ { sub(/^test /, ""); sub(/ \.\.\. FAILED$/, ""); print "not ok " ++i " " $0; next }
	/^test .* \.\.\. ignored/ { sub(/^test /, ""); sub(/ \.\.\. ignored.*$/, ""); print "ok " ++i " " $0 " # SKIP ignored"; next }
	{ print "# " $0 }'
