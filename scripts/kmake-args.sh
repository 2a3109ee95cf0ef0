#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Print the make arguments for building against the test kernel, one line,
# for the top-level Makefile: KDIR and the toolchain of scripts/lib.sh.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
kdir=$(cat "$KFDP_KERNEL_RECORD" 2>/dev/null || true)
echo "KDIR=$kdir $(kfdp_kmake_args | tr '\n' ' ')"
