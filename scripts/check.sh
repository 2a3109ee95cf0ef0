#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# `make check`: provision what is missing, build, lint, and run every test
# suite: cargo tests on the host, then KUnit and the kselftests in the VM.
# Ends with one line "N passed, M failed, K skipped" totalling all of them.
set -uo pipefail
. "$(dirname "$0")/lib.sh"

cd "$KFDP_ROOT"
mkdir -p out
start=$(date +%s)
passed=0 failed=0 skipped=0

# Add a suite's "X passed, Y failed, Z skipped" line to the totals.
count() {
	local line p f s
	line=$(grep -Eo '[0-9]+ passed, [0-9]+ failed(, [0-9]+ skipped)?' <<<"$1" | tail -n1)
	if [ -z "$line" ]; then
		failed=$((failed + 1))
		return
	fi
	p=$(grep -Eo '^[0-9]+' <<<"$line")
	f=$(grep -Eo '[0-9]+ failed' <<<"$line" | grep -Eo '^[0-9]+')
	s=$(grep -Eo '[0-9]+ skipped' <<<"$line" | grep -Eo '^[0-9]+' || echo 0)
	passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + ${s:-0}))
}

# Run a suite that prints KTAP ending in "N passed, M failed": show what
# is not a passing line, and count its summary.
suite() {
	local name=$1 out
	shift
	out=$(kfdp_phase "$name" "$@" 2>&1)
	grep -v '^ok ' <<<"$out" || true
	count "$out"
}

finish() {
	kfdp_log "make check took $(($(date +%s) - start)) s"
	echo "$passed passed, $failed failed, $skipped skipped"
	[ "$failed" = 0 ]
	exit $?
}

abort() {
	echo "FAIL: $1"
	failed=$((failed + 1))
	finish
}

kfdp_phase toolchain scripts/install-toolchain.sh || abort "toolchain installation"
kfdp_phase kernel scripts/build-kernel.sh >/dev/null || abort "test kernel build"
kfdp_phase module scripts/build-module.sh || abort "module build (W=1 CLIPPY=1)"
kfdp_phase amdkfd-emu-build scripts/build-amdkfd-emu.sh || abort "kfdp_amdkfd_emu build (amdkfd's queue manager behind an emulated HWS)"
kfdp_phase kselftest-build scripts/build-kselftests.sh || abort "kselftest build"
kfdp_phase userspace-build scripts/build-userspace.sh || abort "userspace build (crate, CLI, C ABI and its example)"
kfdp_phase hw-kit-build scripts/build-hw-kit.sh || abort "hardware kit build (GPU workloads, kfdp-hw-tenant)"

# The kit's GPU code objects, checked by what the HSA loader reads (ELF
# header, metadata note, kernel descriptors), not only by having compiled.
suite hw-kit-objects python3 tests/hw/check_code_objects.py out/hw/kernels

# The one command for GPU hosts refuses, with its reason, on a host that
# lacks what it needs (this one has no GPU), before building anything.
suite hw-validate-refusals tests/hw/preflight_test.sh

# Documentation/ builds with Sphinx, every warning an error.
if docs=$(kfdp_phase docs scripts/build-docs.sh 2>&1); then
	count "1 passed, 0 failed"
else
	echo "$docs"
	count "0 passed, 1 failed"
fi

lint=$(kfdp_phase lint scripts/lint.sh 2>&1)
echo "$lint"
count "$(grep -c ': ok$' <<<"$lint") passed, $(grep -c ': FAILED$' <<<"$lint") failed"

cargo_out=$(kfdp_phase cargo-test bash -c 'cd userspace && cargo test --workspace --quiet 2>&1')
cargo_rc=$?
echo "$cargo_out"
cargo_p=$(grep -Eo 'test result: .* ([0-9]+) passed' <<<"$cargo_out" | grep -Eo '[0-9]+ passed' | grep -Eo '[0-9]+' | paste -sd+ | bc)
cargo_f=$(grep -Eo 'test result: .*; ([0-9]+) failed' <<<"$cargo_out" | grep -Eo '[0-9]+ failed' | grep -Eo '[0-9]+' | paste -sd+ | bc)
cargo_s=$(grep -Eo '[0-9]+ ignored' <<<"$cargo_out" | grep -Eo '[0-9]+' | paste -sd+ | bc)
[ "$cargo_rc" = 0 ] || [ "${cargo_f:-0}" != 0 ] || cargo_f=1
count "${cargo_p:-0} passed, ${cargo_f:-0} failed, ${cargo_s:-0} skipped"

# With the simulated nodes (node 0 HWS, node 1 MES): the sim_* kselftests
# prove the uapi's semantics end to end (Documentation/simulated-node.rst);
# first, the glue runs against amdkfd's own queue manager behind an
# emulated HWS (tests/amdkfd-emu).
rm -f out/vm/cases.tsv out/vm-pid-attach/cases.tsv
vm_out=$(kfdp_phase vm tests/vm/run --amdkfd-emu sim_nodes=2 sim_mes_nodes=2 --out out/vm 2>&1)
echo "$vm_out"

# The hardware kit's kfd/rls parser against what amdkfd's own packet
# manager printed in that run (KUnit hws_runlist_debugfs_dump).
suite hw-kit-rls out/hw/rls_test out/vm/console.log

# Once more with pid_attach=1 and no simulated node: the PID-mode rejection
# paths (EPERM without CAP_SYS_ADMIN, ESRCH, ENOENT) exist only then, as does
# the EOPNOTSUPP of a simulated ATTACH. Only the kselftests that mode is for
# run, and not the KUnit suites the first run ran: a case is counted once,
# and a skip means "cannot run here".
vm_out=$(kfdp_phase vm-pid-attach tests/vm/run pid_attach=1 --no-kunit \
	--kselftests "info_test info_test_32 rights_test uapi_test" --out out/vm-pid-attach 2>&1)
echo "$vm_out"
# A case of both runs counts once (tests/vm/merge_cases.py): those four
# kselftests run in both, each mode-specific case passing in its run and
# skipping in the other; a skip left after the merge means "needs a GPU".
merged=$(python3 tests/vm/merge_cases.py out/vm/cases.tsv out/vm-pid-attach/cases.tsv 2>&1)
echo "$merged"
count "$(grep -E '^vm \(merged\): ' <<<"$merged" || echo "0 passed, 1 failed")"

# The motivating scenario (make scenario) with and without kfd-preemptd:
# one case per criterion of its report.
suite scenario tests/vm/scenario_check.sh

# The module as DKMS builds it for an operator, loaded in the VM.
suite dkms tests/dkms/dkms_test.sh

# The Debian packages (make debs): built with dpkg-buildpackage, lintian,
# extracted into a throwaway root, and DKMS's build from the package.
suite debs tests/debs/debs_test.sh

finish
