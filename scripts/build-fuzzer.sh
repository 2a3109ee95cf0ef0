#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Build kfdp-fuzz (tests/fuzz, on LibAFL from crates.io) for the test VM;
# prints the binary's path.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

# LibAFL takes minutes to build on 2 cores: its target directory is kept in
# the cache, so that a fresh clone builds only kfdp-fuzz itself.
export CARGO_TARGET_DIR=$KFDP_CACHE/fuzz/target
(cd "$KFDP_ROOT/tests/fuzz" && cargo build --release --locked --quiet &&
	cargo clippy --release --locked --quiet -- -D warnings) >&2
echo "$CARGO_TARGET_DIR/release/kfdp-fuzz"
