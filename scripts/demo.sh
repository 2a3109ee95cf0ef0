#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# `make demo`: provision what is missing, build, and show kfd_preempt in the
# test VM: amdgpu loads, kfd_preempt loads beside it with two simulated nodes,
# answers INFO through the userspace CLI, and a scheduler daemon preempts and
# resumes a simulated tenant's queues (tests/vm/sim_demo.c).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$KFDP_ROOT"
kfdp_phase toolchain scripts/install-toolchain.sh
kfdp_phase kernel scripts/build-kernel.sh >/dev/null
kfdp_phase module make -s modules
# The CLI, and kfdp-scenario for its simulated tenant.
kfdp_phase cli bash -c 'cd userspace && cargo build --quiet --release --bin kfd-preempt --bin kfdp-scenario'
mkdir -p out/demo
kfdp_phase sim-demo gcc -static -O2 -Wall -Werror -Iuapi -o out/demo/sim_demo tests/vm/sim_demo.c
kfdp_phase vm tests/vm/run --no-kselftest sim_nodes=2 sim_mes_nodes=2 \
	--copy userspace/target/release/kfd-preempt --copy userspace/target/release/kfdp-scenario \
	--copy out/demo/sim_demo \
	"$@" -- tests/vm/demo.sh
