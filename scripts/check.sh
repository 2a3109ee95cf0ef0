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

# The kernel trees of configurations left behind go first, then the run
# starts only if the disk can hold it.
kfdp_phase prune scripts/prune-kernels.sh || abort "pruning the cache's kernel trees"
kfdp_phase disk scripts/disk-check.sh || abort "not enough free disk for the run (above)"
kfdp_phase toolchain scripts/install-toolchain.sh || abort "toolchain installation"
kfdp_phase kernel scripts/build-kernel.sh >/dev/null || abort "test kernel build"

# The second kernel (Documentation/building.rst, "Kernels"), when the cache
# lacks it, builds from here on in the background at the lowest CPU and I/O
# priority, while the suites below run on the first: most of them keep one
# of the two cores busy at most (a TCG guest has one CPU), and the build
# takes the other. Its VM runs come last, after it is joined. A cached
# kernel returns at once. Its failure shows where it is joined, as
# build-on-kernel.sh builds it again in the foreground.
second_kernel=7.2
second_kernel_log=out/kernel-$second_kernel-background.log
# In a process group of its own (set -m), which the traps kill should make
# check end early; and which kills itself should make check go without
# them (SIGKILL), so that no build outlives the run.
set -m
(
	set +m
	KFDP_KERNEL_SERIES=$second_kernel nice -n 19 ionice -c 3 scripts/build-kernel.sh \
		>"$second_kernel_log" 2>&1 </dev/null &
	build=$!
	while kill -0 "$build" 2>/dev/null; do
		kill -0 $$ 2>/dev/null || kill -- -"$BASHPID"
		sleep 2
	done
	wait "$build"
) &
second_kernel_pid=$!
set +m
trap 'kill -- -"$second_kernel_pid" 2>/dev/null' EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM
kfdp_phase module scripts/build-module.sh || abort "module build (W=1 CLIPPY=1)"
kfdp_phase amdkfd-emu-build scripts/build-amdkfd-emu.sh || abort "kfdp_amdkfd_emu build (amdkfd's queue manager behind an emulated HWS)"
kfdp_phase kselftest-build scripts/build-kselftests.sh || abort "kselftest build"
kfdp_phase userspace-build scripts/build-userspace.sh || abort "userspace build (crate, CLI, C ABI and its example)"
kfdp_phase python-build scripts/build-python.sh || abort "Python package build (the wheel, its tools, its VM tree)"
kfdp_phase hw-kit-build scripts/build-hw-kit.sh || abort "hardware kit build (GPU workloads, kfdp-hw-tenant)"

# The kit's GPU code objects, checked by what the HSA loader reads (ELF
# header, metadata note, kernel descriptors), not only by having compiled.
suite hw-kit-objects python3 tests/hw/check_code_objects.py out/hw/kernels

# The one command for GPU hosts refuses, with its reason, on a host that
# lacks what it needs (this one has no GPU), before building anything.
suite hw-validate-refusals tests/hw/preflight_test.sh

# The cache keeps only the kernel trees its records name
# (scripts/prune-kernels.sh), so that it does not fill a CI host's disk.
suite prune-kernels tests/scripts/prune_kernels_test.sh
# What the disk check above adds up, and what it refuses.
suite disk-check tests/scripts/disk_check_test.sh

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

# The Python package on the host: pip installs the wheel, its stubs match
# the compiled module, it and its examples type-check, and the pytest
# cases that need no module pass (those that do run in the VM below, as
# the kselftest python_test).
suite python tests/python/host_test.sh

# kfd-preemptd's Prometheus endpoint (its example metrics_fixture, built in
# userspace/target as cargo-test built it) against promtool, a scratch
# prometheus on the loopback and the JSON statistics it renders.
suite metrics tests/metrics/metrics_test.sh

# The two VM runs of one kernel, each case counted once. First with the
# 16 simulated nodes (node 1 MES, the others HWS; sim_nodes_test reaches
# the highest, as on a host of partitions): the sim_* kselftests prove the
# uapi's semantics end to end (Documentation/simulated-node.rst), after the
# glue ran against amdkfd's own queue manager behind an emulated HWS
# (tests/amdkfd-emu). Then with pid_attach=1 and no simulated node: the
# PID-mode rejection paths (EPERM without CAP_SYS_ADMIN, ESRCH, ENOENT)
# exist only then, as does the EOPNOTSUPP of a simulated ATTACH. Only the
# kselftests that mode is for run, and not the KUnit suites the first run
# ran. A case of both runs counts once (tests/vm/merge_cases.py): those four
# kselftests run in both, each mode-specific case passing in its run and
# skipping in the other; a skip left after the merge means "needs a GPU".
#
# usage: vm_runs NAME OUT EMU_ARG... -- RUN_ARG...
#   EMU_ARG: how the first run loads kfdp_amdkfd_emu.ko; RUN_ARG: the
#   kernel and module of both runs (none: the primary's).
vm_runs() {
	local name=$1 dir=$2 emu=() common=() out merged
	shift 2
	while [ $# -gt 0 ] && [ "$1" != -- ]; do emu+=("$1"); shift; done
	[ $# -gt 0 ] && shift
	common=("$@")
	rm -f "$dir/cases.tsv" "$dir-pid-attach/cases.tsv"
	out=$(kfdp_phase "$name" tests/vm/run "${common[@]}" "${emu[@]}" \
		sim_nodes=16 sim_mes_nodes=2 --out "$dir" 2>&1)
	echo "$out"
	out=$(kfdp_phase "$name-pid-attach" tests/vm/run "${common[@]}" pid_attach=1 --no-kunit \
		--kselftests "info_test info_test_32 rights_test uapi_test" --out "$dir-pid-attach" 2>&1)
	echo "$out"
	merged=$(python3 tests/vm/merge_cases.py --label "$name" "$dir/cases.tsv" \
		"$dir-pid-attach/cases.tsv" 2>&1)
	echo "$merged"
	count "$(grep -E "^$name \(merged\): " <<<"$merged" || echo "0 passed, 1 failed")"
}

vm_runs vm out/vm --amdkfd-emu

# The hardware kit's kfd/rls parser against what amdkfd's own packet
# manager printed in that run (KUnit hws_runlist_debugfs_dump).
suite hw-kit-rls out/hw/rls_test out/vm/console.log

# The kselftests that race tenants, schedulers and samplers against each
# other, again on two CPUs (tests/vm/run --cpus 2): every other run's guest
# but the hint scenario's has one, so only here are two tasks raced in the
# module at once on purpose, under lockdep and KASAN.
suite vm-smp tests/vm/run sim_nodes=16 sim_mes_nodes=2 --cpus 2 --no-kunit --quiet \
	--kselftests "sim_stress_test sim_activity_test sim_lifecycle_test" --out out/vm-smp

# The motivating scenario (make scenario) with and without kfd-preemptd:
# one case per check of its report (ratios of the run's own numbers).
suite scenario tests/vm/scenario_check.sh
# The host scenario's scrape of the real daemon (16 simulated nodes, a Unix
# socket in a VM without TCP) against its statistics of the same moment.
suite metrics-live tests/metrics/metrics_test.sh --scrape out/scenario/metrics.txt --stats out/scenario/metrics-stats.json

# The soak's smoke (make soak): kfd-preemptd against the tenant zoo
# (processes that fork, exec, re-create their queues and die) for 90 s on
# the debug kernel, its invariants checked all along.
suite soak tests/vm/soak_check.sh

# The fuzzer's smoke (tests/fuzz, make fuzz): a fixed seed for 150 s on
# the KCOV kernel, stopping at the first oracle violation.
suite fuzz-smoke tests/fuzz/smoke.sh

# The module as DKMS builds it for an operator, loaded in the VM.
suite dkms tests/dkms/dkms_test.sh

# The Debian packages (make debs): built with dpkg-buildpackage, lintian,
# extracted into a throwaway root, and DKMS's build from the package.
suite debs tests/debs/debs_test.sh

# Those packages on a Debian 13 system as an operator has it (Documentation/
# building.rst, "The Debian 13 run"): installed with apt, DKMS building the
# module with each kernel's own gcc-14 and rustc 1.85.1, Debian's own binary
# kernels 7.3.4 and 7.2.12 booted, the kselftests, CLI and daemon tests.
suite debian tests/debian/run.sh

# The second kernel's runs (Documentation/building.rst, "Kernels"): the
# module and kfdp_amdkfd_emu built warning-free against Linux 7.2, and the
# same VM runs booting it, so that what building.rst claims about 7.2 is
# measured. Last, so that a cold cache's background build of that kernel
# (above) overlaps every suite before.
kfdp_phase kernel-$second_kernel-join wait "$second_kernel_pid"
trap - EXIT HUP INT TERM
if built=$(kfdp_phase kernel-$second_kernel-build scripts/build-on-kernel.sh $second_kernel); then
	read -r k2 ko2 emu2 <<<"$built"
	vm_runs vm-$second_kernel out/vm-$second_kernel --amdkfd-emu-module "$emu2" -- --kernel "$k2" --module "$ko2"
else
	echo "FAIL: the module or kfdp_amdkfd_emu does not build against the $second_kernel kernel (background build: $second_kernel_log)"
	count "0 passed, 1 failed"
fi

finish
