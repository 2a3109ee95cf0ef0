#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Build kfd_preempt.ko against the test kernel with W=1 and CLIPPY=1 (the
# clippy-driver of the kernel's own rustc), and fail on any warning from the
# compilers, clippy or modpost.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

log=$KFDP_ROOT/out/module-build.log
mkdir -p "$KFDP_ROOT/out"
if ! make -C "$KFDP_ROOT" modules W=1 CLIPPY=1 CLIPPY_DRIVER=/usr/bin/clippy-driver >"$log" 2>&1; then
	cat "$log"
	kfdp_die "module build failed"
fi
cat "$log"
if grep -E 'warning[:\[]|WARNING:' "$log"; then
	kfdp_die "the module build has warnings (above); it must be warning-free under W=1 CLIPPY=1"
fi
