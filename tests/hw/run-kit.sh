#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Run the hardware validation kit against the loaded kfd_preempt and write
# one report directory (Documentation/hardware-validation.rst): the
# environment (kernel, GPUs, firmware, ROCm tools), amdkfd's debugfs views
# before and after, the checks' KTAP, the measurement's JSON and chart, and
# the kernel log. Prints KTAP itself; exits 0 if nothing failed.
#
# usage: run-kit.sh [--dry-run] --report DIR
#
#   --dry-run   run on the simulated node (kfd_preempt sim_nodes=N) instead
#               of the GPU: every check the model can express, a short
#               measurement
#
# Finds hw_test, kfd-preempt, kfdp-scenario (whose bench is the measurement),
# kfdp-hw-tenant and kfdp-hw-probe on PATH (or KFDP_HW_TEST, KFDP_CLI,
# KFDP_SCENARIO, KFDP_HW_TENANT, KFDP_HW_PROBE) and the code objects in
# KFDP_HW_KERNELS.
# POSIX sh: it also runs in the test VM's busybox.

dry=0 report=""
while [ $# -gt 0 ]; do
	case $1 in
	--dry-run) dry=1 ;;
	--report) report=$2; shift ;;
	*) echo "run-kit.sh: unknown argument '$1'" >&2; exit 2 ;;
	esac
	shift
done
[ -n "$report" ] || { echo "run-kit.sh: --report DIR is required" >&2; exit 2; }
mkdir -p "$report" || exit 2
hw_test=${KFDP_HW_TEST:-hw_test}
cli=${KFDP_CLI:-kfd-preempt}
scenario=${KFDP_SCENARIO:-kfdp-scenario}
tenant=${KFDP_HW_TENANT:-kfdp-hw-tenant}

for ktap in "$(dirname "$0")/../lib/ktap.sh" /kfdp/lib/ktap.sh; do
	[ -f "$ktap" ] && break
done
. "$ktap"

# amdkfd's and the simulated node's debugfs views, as they are now.
snapshot() {
	mkdir -p "$report/debugfs-$1"
	for f in /sys/kernel/debug/kfd/rls /sys/kernel/debug/kfd/hqds \
		/sys/kernel/debug/kfd/mqds /sys/kernel/debug/kfd_preempt/sim/status; do
		[ -r "$f" ] && cat "$f" >"$report/debugfs-$1/$(basename "$f")" 2>/dev/null
	done
	return 0
}

environment() {
	{
		echo "date: $(date -u '+%Y-%m-%dT%H:%M:%SZ')"
		echo "mode: $([ $dry = 1 ] && echo "dry run on the simulated node" || echo hardware)"
		echo "kernel: $(uname -r) ($(uname -v))"
		echo "cmdline: $(cat /proc/cmdline)"
		for p in /sys/module/kfd_preempt/parameters/*; do
			[ -r "$p" ] && echo "kfd_preempt.$(basename "$p"): $(cat "$p")"
		done
		for p in /sys/module/amdgpu/parameters/queue_preemption_timeout_ms \
			/sys/module/amdgpu/parameters/cwsr_enable /sys/module/amdgpu/parameters/mes \
			/sys/module/amdgpu/parameters/hws_max_conc_proc; do
			[ -r "$p" ] && echo "amdgpu.$(basename "$p"): $(cat "$p")"
		done
		for node in /sys/class/kfd/kfd/topology/nodes/*; do
			[ -r "$node/name" ] || continue
			gfx=$(sed -n 's/^gfx_target_version //p' "$node/properties" 2>/dev/null)
			[ "${gfx:-0}" = 0 ] && continue
			echo "kfd node $(basename "$node"): $(cat "$node/name") gfx_target_version $gfx gpu_id $(cat "$node/gpu_id" 2>/dev/null)"
		done
		for card in /sys/class/drm/card*/device; do
			[ -r "$card/product_name" ] && echo "$(basename "$(dirname "$card")"): $(cat "$card/product_name")"
		done
		for fw in /sys/kernel/debug/dri/*/amdgpu_firmware_info; do
			[ -r "$fw" ] && { echo "firmware ($fw):"; sed 's/^/  /' "$fw"; }
		done
	} >"$report/environment.txt" 2>/dev/null
	"$cli" info >"$report/info.txt" 2>&1
	for tool in "rocm-smi --showallinfo" "amd-smi static" "amd-smi firmware"; do
		command -v "${tool%% *}" >/dev/null 2>&1 &&
			$tool >"$report/$(echo "$tool" | tr ' ' '_').txt" 2>&1
	done
	return 0
}

# A one-line description of the GPU, firmware and kernel, for the chart.
label() {
	if [ $dry = 1 ]; then
		echo "dry run: kfd_preempt simulated node, Linux $(uname -r)"
		return
	fi
	gpu=$(cat /sys/class/drm/card*/device/product_name 2>/dev/null | head -n1)
	mec=$(grep -h -m1 '^MEC feature' /sys/kernel/debug/dri/*/amdgpu_firmware_info 2>/dev/null)
	echo "${gpu:-AMD GPU}; ${mec:-MEC firmware unknown}; Linux $(uname -r)"
}

ktap_header
ktap_plan 5
if [ $dry = 1 ]; then
	export KFDP_HW_DRIVER=sim
	export KFDP_HW_CYCLES=${KFDP_HW_CYCLES:-200}
	queues=1,8 processes=1,4 reps=20 budget=2000
else
	export KFDP_HW_DRIVER=hsa
	queues=1,8,64 processes=1,4,8 reps=1000 budget=120000
fi

environment
snapshot before
ok "environment and debugfs recorded"

# The checks: nested KTAP, kept in the report.
"$hw_test" >"$report/hw_test.ktap" 2>&1
rc=$?
sed 's/^/    /' "$report/hw_test.ktap"
# kselftest: 0 all passed, 4 all skipped. On a GPU host a kit whose every
# check skipped has not validated anything: that is a failure there.
if [ $rc = 0 ]; then
	ok "hw_test"
elif [ $rc = 4 ] && [ $dry = 1 ]; then
	ok "hw_test # SKIP every check skipped"
elif [ $rc = 4 ]; then
	nok "hw_test: every check skipped on a GPU host ($(grep -m1 -o 'SKIP.*' "$report/hw_test.ktap"))"
else
	nok "hw_test (exit $rc)"
fi

# The measurement, labelled with what it ran on. It measures preemption,
# not the rate limit's waits: min_preempt_interval_us is 0 meanwhile (the
# checks above ran with the loaded value).
interval=/sys/module/kfd_preempt/parameters/min_preempt_interval_us
saved_interval=$(cat "$interval" 2>/dev/null)
[ -n "$saved_interval" ] && echo 0 >"$interval" &&
	echo "bench: min_preempt_interval_us 0 (was $saved_interval, restored after)" \
		>>"$report/environment.txt"
if "$scenario" bench --hardware --workload "$tenant" --label "$(label)" \
	--queues $queues --processes $processes --reps $reps --budget-ms $budget \
	--json "$report/bench.json" --svg "$report/bench.svg" >"$report/bench.txt" 2>&1 &&
	grep -q '"rows"' "$report/bench.json" && grep -q '<svg' "$report/bench.svg"; then
	ok "bench --hardware"
else
	nok "bench --hardware"
fi
[ -n "$saved_interval" ] && echo "$saved_interval" >"$interval"
sed 's/^/# /' "$report/bench.txt"

# What activity detection rests on: read-pointer write-back, doorbells
# rung on a preempted queue. Hardware only.
if [ $dry = 1 ]; then
	ok "probe # SKIP dry run: the probe measures a GPU's command processor"
else
	if ${KFDP_HW_PROBE:-kfdp-hw-probe} >"$report/probe.json" 2>"$report/probe.err"; then
		ok "probe"
	else
		sed 's/^/# /' "$report/probe.err"
		nok "probe"
	fi
fi

snapshot after
dmesg >"$report/dmesg.txt" 2>&1
missing=""
for f in environment.txt info.txt hw_test.ktap bench.json bench.svg dmesg.txt; do
	[ -s "$report/$f" ] || missing="$missing $f"
done
if [ -z "$missing" ]; then ok "report complete in $report"; else
	echo "# missing or empty:$missing"
	nok "report complete"
fi
ktap_finished
