#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Build the kselftests (static, for the busybox VM) into out/kselftest the
# way a kernel tree builds its own: a plain copy of tests/kselftest/
# kfd_preempt/ in the test kernel's tools/testing/selftests/, built and
# installed by that tree's selftests Makefile (TARGETS=kfd_preempt), which
# also writes its run_kselftest.sh (out/kselftest-install). Nothing but the
# directory itself and the kernel's kselftest headers is needed: that is
# what this checks. The hardware kit's hw_test comes from
# scripts/build-hw-kit.sh.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

src=$(kfdp_kernel_src_dir)
selftests=$src/tools/testing/selftests
out=$KFDP_ROOT/out/kselftest
install=$KFDP_ROOT/out/kselftest-install
rm -rf "$selftests/kfd_preempt" "$install" "$KFDP_ROOT/out/kselftest-build"
cp -r "$KFDP_ROOT/tests/kselftest/kfd_preempt" "$selftests/kfd_preempt"
make -s -C "$selftests" TARGETS=kfd_preempt CC=gcc \
	O="$KFDP_ROOT/out/kselftest-build" KSFT_INSTALL_PATH="$install" install >/dev/null
rm -rf "$selftests/kfd_preempt"
mkdir -p "$out"
for t in "$install"/kfd_preempt/*; do
	[ -f "$t" ] && [ -x "$t" ] && install -m 0755 "$t" "$out/"
done
[ -x "$out/info_test" ] || kfdp_die "the kselftests did not build (no info_test in $install)"
