#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Build kfdp-fuzz (tests/fuzz, on LibAFL from crates.io) for the test VM;
# prints the binary's path.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

fuzz=$KFDP_ROOT/tests/fuzz
(cd "$fuzz" && cargo build --release --locked --quiet) >&2
echo "$fuzz/target/release/kfdp-fuzz"
