#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Build the kselftests (static, for the busybox VM) into out/kselftest with
# the test kernel's kselftest_harness.h and the project's uapi header.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

src=$(kfdp_kernel_src_dir)
out=$KFDP_ROOT/out/kselftest
mkdir -p "$out"
make -s -C "$KFDP_ROOT/tests/kselftest/kfd_preempt" \
	KSFT_LIB="$src/tools/testing/selftests/lib.mk" \
	KFDP_UAPI="$KFDP_ROOT/uapi" OUTPUT="$out" KHDR_INCLUDES= CC=gcc all
