#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Style checks, each printing one "lint NAME: ok|FAILED" line:
#   rustfmt-module     rustfmt --check with the kernel's .rustfmt.toml
#   checkpatch         checkpatch.pl on the C glue, the uapi header, the kselftests, the amdkfd emulation
#   rustfmt-userspace  cargo fmt --check in userspace/
#   clippy-userspace   cargo clippy -D warnings on every userspace target
# With arguments, only the named checks run. Exits non-zero if any failed.
# (W=1 and clippy warnings are checked by scripts/build-module.sh.)
set -uo pipefail
. "$(dirname "$0")/lib.sh"

src=$(kfdp_kernel_src_dir)
cd "$KFDP_ROOT"

rustfmt-module() {
	local rs
	mapfile -t rs < <(find src uapi -name '*.rs' ! -name '*generated*' | sort)
	rustfmt --check --edition 2021 --config-path "$src/.rustfmt.toml" "${rs[@]}"
}

checkpatch() {
	local cfiles
	mapfile -t cfiles < <({
		find src uapi tests/kselftest tests/vm userspace/kfd-preempt-capi/examples -name '*.[ch]'
		# Not the generated wrappers of amdkfd's and the glue's files.
		find tests/amdkfd-emu -maxdepth 1 -name 'emu*.[ch]'
	} | sort)
	"$src/scripts/checkpatch.pl" --no-tree --quiet --show-types -f "${cfiles[@]}"
}

rustfmt-userspace() {
	(cd userspace && cargo fmt --all -- --check)
}

clippy-userspace() {
	(cd userspace && cargo clippy --quiet --workspace --all-targets -- -D warnings)
}

[ $# -gt 0 ] || set -- rustfmt-module checkpatch rustfmt-userspace clippy-userspace
failed=0
for check in "$@"; do
	if "$check"; then
		echo "lint $check: ok"
	else
		echo "lint $check: FAILED"
		failed=1
	fi
done
exit $failed
