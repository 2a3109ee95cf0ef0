#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# KTAP: the Python package's pytest suite (userspace/python/tests) in the
# VM, where its cases that need the module run against the simulated nodes.
# scripts/build-python.sh puts the interpreter, the wheel (installed) and
# the tests in the tree tests/vm/run lays over the VM's root.
for ktap in "$(dirname "$0")/../lib/ktap.sh" /kfdp/lib/ktap.sh; do
	[ -f "$ktap" ] && break
done
. "$ktap"

site=/kfdp/python/site
tests=/kfdp/python/tests
if [ ! -x /usr/bin/python3 ] || [ ! -d "$site" ]; then
	ktap_header
	ktap_skip_all "no Python in this VM (scripts/build-python.sh builds it)"
fi
if [ ! -e /dev/kfd_preempt_sim ]; then
	ktap_header
	ktap_skip_all "the module has no simulated nodes (sim_nodes=N)"
fi
# The cases that need the module; the others run on the host
# (tests/python/host_test.sh). The plugin prints the KTAP header, lines
# and summary (tests/ktap_report.py); pytest's own report is off.
cd /tmp || exit 1
PYTHONPATH=$site:$tests PYTHONDONTWRITEBYTECODE=1 exec /usr/bin/python3 -m pytest \
	-p ktap_report -p no:terminal -p no:cacheprovider "$tests/test_sim.py"
