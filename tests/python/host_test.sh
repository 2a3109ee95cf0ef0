#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# KTAP: the Python package kfd_preempt on the host (scripts/build-python.sh
# built it): pip installs the wheel, the typed stubs match the compiled
# module (mypy's stubtest), the package and its examples type-check (mypy
# --strict), and the pytest cases that need no module pass (the module's
# run in the VM: tests/vm/python_test.sh). Ends with the line make check
# counts.
set -uo pipefail
. "$(dirname "$0")/../../scripts/lib.sh"
. "$KFDP_ROOT/tests/lib/ktap.sh"

venv=$KFDP_CACHE/python-venv
py=$KFDP_ROOT/userspace/python
wheel=$(ls "$KFDP_ROOT"/out/python/wheels/kfd_preempt-*.whl 2>/dev/null | head -n1)
ktap_header
if [ -z "$wheel" ] || [ ! -x "$venv/bin/python" ]; then
	nok "the wheel and the tools are built (scripts/build-python.sh)"
	ktap_summary
	exit 1
fi
# Out of the tree, so that the package imported is the installed one.
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cd "$scratch" || exit 1
# No __pycache__ left in the source tree (nor copied into the VM's).
export PYTHONDONTWRITEBYTECODE=1
"$venv/bin/pip" install --quiet --disable-pip-version-check --force-reinstall --no-deps "$wheel"
check $? "pip install $(basename "$wheel")"
"$venv/bin/python" -m mypy.stubtest --ignore-disjoint-bases kfd_preempt._native
check $? "the stubs match the compiled module (stubtest)"
"$venv/bin/python" -m mypy --strict --no-error-summary -p kfd_preempt
check $? "the package type-checks (mypy --strict)"
"$venv/bin/python" -m mypy --strict --no-error-summary "$py"/examples/*.py
check $? "the examples type-check against it (mypy --strict)"
# The plugin (tests/ktap_report.py) prints the cases and a summary line of
# its own: this script's counts take them in, and the plugin's summary
# line is dropped for this script's.
report=$(PYTHONPATH=$py/tests "$venv/bin/python" -m pytest -p ktap_report -p no:terminal \
	-p no:cacheprovider "$py/tests/test_api.py" "$py/tests/test_hint.py" 2>&1)
rc=$?
while IFS= read -r line; do
	case $line in
	"ok "*"# SKIP "*)
		name=${line#ok } name=${name#* }
		skip "${name%% # SKIP*}" "${name#*# SKIP }" ;;
	"ok "*) name=${line#ok }; ok "${name#* }" ;;
	"not ok "*) name=${line#not ok }; nok "${name#* }" ;;
	"#"*) echo "$line" ;;
	esac
done <<<"$report"
[ "$rc" = 0 ] || [ "$fails" -gt 0 ] || nok "pytest exited $rc: $(tail -n1 <<<"$report")"
ktap_summary
