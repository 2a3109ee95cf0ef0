#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Build kfd_preempt.ko against the test kernel with W=1 and CLIPPY=1 (the
# clippy-driver of the kernel's own rustc), and fail on any warning from the
# compilers, clippy or modpost.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

log=$KFDP_ROOT/out/module-build.log
mkdir -p "$KFDP_ROOT/out"
kfdp_build_warning_free "kfd_preempt (W=1 CLIPPY=1)" "$log" \
	make -C "$KFDP_ROOT" modules W=1 CLIPPY=1 CLIPPY_DRIVER=/usr/bin/clippy-driver
cat "$log"
