#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# kselftest: the hardware validation kit's dry run. The whole kit (checks,
# measurement, report) runs against kfd_preempt's simulated node, so that
# every check the model can express is shown to pass here (and, with a
# planted bug, to fail). KTAP from tests/hw/run-kit.sh.
here=$(dirname "$0")
if [ ! -e /dev/kfd_preempt_sim ]; then
	echo "TAP version 13"
	echo "1..0 # SKIP the dry run needs the simulated node (kfd_preempt sim_nodes=N)"
	exit 4
fi
export KFDP_HW_TEST=${KFDP_HW_TEST:-$here/hw_test}
exec kfdp-hw-run --dry-run --report "${TMPDIR:-/tmp}/kfdp-hw-report"
