#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Build the hardware validation kit into out/hw: the GPU workloads for each
# target and the tenant program (Documentation/hardware-validation.rst).
# and the checks, the kselftest hw_test, installed with the kselftests.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

make -s -C "$KFDP_ROOT/tests/hw" OUTPUT="$KFDP_ROOT/out/hw" \
	CLANG="clang-$KFDP_LLVM_VERSION" KFDP_UAPI="$KFDP_ROOT/uapi" CC=gcc \
	KSFT_DIR="$(kfdp_kernel_src_dir)/tools/testing/selftests" all
# The kit's runner, on PATH in the VM, and its dry run as a kselftest.
install -m 0755 "$KFDP_ROOT/tests/hw/run-kit.sh" "$KFDP_ROOT/out/hw/bin/kfdp-hw-run"
install -D -m 0644 -t "$KFDP_ROOT/out/hw/lib" "$KFDP_ROOT"/tests/lib/*.sh
mkdir -p "$KFDP_ROOT/out/kselftest"
install -m 0755 "$KFDP_ROOT/tests/hw/dry_run_test.sh" "$KFDP_ROOT/out/kselftest/hw_kit_dry_run"
install -m 0755 "$KFDP_ROOT/out/hw/hw_test" "$KFDP_ROOT/out/kselftest/hw_test"
# The debugger ABI numbers kfdp-scenario's bench uses, against the test kernel's
# own kfd_ioctl.h (its uapi headers need __user defined away).
gcc -fsyntax-only -D__user= -D__EXPORTED_HEADERS__ \
	-I"$(kfdp_kernel_src_dir)/include/uapi" \
	"$KFDP_ROOT/tests/hw/kfd_dbg_abi.c"
