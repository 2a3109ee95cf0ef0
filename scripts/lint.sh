#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Style checks: rustfmt (with the kernel's .rustfmt.toml) on the module's
# Rust, checkpatch on its C and the uapi header, rustfmt on userspace/.
# Prints one "lint NAME: ok|FAILED" line per check; exits non-zero if any failed.
# (Warnings of W=1 and clippy are checked by scripts/build-module.sh.)
set -uo pipefail
. "$(dirname "$0")/lib.sh"

src=$(readlink -f "$(kfdp_kernel_build_dir)/source")
failed=0
report() {
	if [ "$2" = 0 ]; then echo "lint $1: ok"; else echo "lint $1: FAILED"; failed=1; fi
}

cd "$KFDP_ROOT"
mapfile -t rs < <(find src -name '*.rs' ! -name '*generated*' | sort)
rustfmt --check --edition 2021 --config-path "$src/.rustfmt.toml" "${rs[@]}"
report rustfmt-module $?

mapfile -t cfiles < <(find src uapi tests/kselftest -name '*.[ch]' | sort)
"$src/scripts/checkpatch.pl" --no-tree --quiet --show-types \
	-f "${cfiles[@]}"
report checkpatch $?

(cd userspace && cargo fmt --all -- --check)
report rustfmt-userspace $?

exit $failed
