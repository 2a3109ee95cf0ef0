#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# `make demo`: provision what is missing, build, and show kfd_preempt in the
# test VM: amdgpu loads, kfd_preempt loads beside it and answers INFO through
# the userspace CLI.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cd "$KFDP_ROOT"
kfdp_phase toolchain scripts/install-toolchain.sh
kfdp_phase kernel scripts/build-kernel.sh >/dev/null
kfdp_phase module make -s modules
kfdp_phase cli bash -c 'cd userspace && cargo build --quiet --release --bin kfd-preempt'
kfdp_phase vm tests/vm/run --no-kselftest \
	--copy userspace/target/release/kfd-preempt "$@" -- tests/vm/demo.sh
