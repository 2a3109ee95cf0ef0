#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Style checks, each printing one "lint NAME: ok|FAILED" line:
#   rustfmt-module     rustfmt --check with the kernel's .rustfmt.toml
#   checkpatch         checkpatch.pl on the C glue, the uapi header, the kselftests, the amdkfd emulation
#   rustfmt-userspace  cargo fmt --check in userspace/
#   clippy-userspace   cargo clippy -D warnings on every userspace target
#   rustfmt-python, clippy-python
#                      the same for the Python package's crate
#   rustfmt-fuzz       cargo fmt --check in tests/fuzz/ (kfdp-fuzz; its
#                      clippy runs where it is built, scripts/build-fuzzer.sh)
#   amdkfd-fingerprint the reviewed-amdkfd build gate accepts 7.3.4, names a change, and
#                      takes a reviewed set whole
#   module-metadata    the module soft-depends on amdgpu, and every parameter
#                      it has is in packaging/modprobe.d/ and the admin guide
#   import-graph       the module's and kfd-preemptd's files import only from
#                      their layer and below, no crate has a cycle
#   kselftest-uapi-copy the kselftests' copy of the uapi header is the header
#   doc-refs           every heading of Documentation/ that code, scripts or
#                      the manual cite by name exists
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
		find src uapi tests/kselftest tests/vm tests/hw userspace/kfd-preempt-capi/examples -name '*.[ch]'
		# Not the generated wrappers of amdkfd's and the glue's files.
		find tests/amdkfd-emu -maxdepth 1 -name 'emu*.[ch]'
	} | sort)
	"$src/scripts/checkpatch.pl" --no-tree --quiet --show-types -f "${cfiles[@]}"
}

rustfmt-userspace() {
	(cd userspace && cargo fmt --all -- --check)
}

# The Python package's crate (userspace/python) is a workspace of its own.
rustfmt-python() {
	(cd userspace/python && cargo fmt -- --check)
}

clippy-python() {
	(cd userspace/python && cargo clippy --quiet --all-targets -- -D warnings)
}

rustfmt-fuzz() {
	(cd tests/fuzz && cargo fmt -- --check)
}

clippy-userspace() {
	(cd userspace && cargo clippy --quiet --workspace --all-targets -- -D warnings)
}

# The build's reviewed-amdkfd gate (scripts/amdkfd-fingerprint.py): the test
# kernel's amdkfd passes; a copy with one function body changed fails and
# names it; the override builds anyway and records what was not reviewed.
amdkfd-fingerprint() {
	local amd tmp out
	amd=$src/drivers/gpu/drm/amd
	tmp=$(mktemp -d)
	out=$tmp/fp.h
	python3 scripts/amdkfd-fingerprint.py check "$amd" src/glue/amdkfd-reviewed.txt "$out" ||
		{ rm -rf "$tmp"; return 1; }
	grep -q 'KFDP_AMDKFD_UNREVIEWED ""' "$out" || { rm -rf "$tmp"; return 1; }
	cp -r "$amd/amdkfd" "$amd/include" "$tmp/"
	sed -i 's/dqm->active_queue_count--;/dqm->active_queue_count -= 1;/' \
		"$tmp/amdkfd/kfd_device_queue_manager.c"
	if python3 scripts/amdkfd-fingerprint.py check "$tmp" src/glue/amdkfd-reviewed.txt \
		"$out" 2>"$tmp/err"; then
		echo "a changed decrement_queue_count passed the fingerprint check" >&2
		rm -rf "$tmp"
		return 1
	fi
	grep -q 'decrement_queue_count' "$tmp/err" || { cat "$tmp/err"; rm -rf "$tmp"; return 1; }
	KFDP_ALLOW_UNREVIEWED_AMDKFD=1 python3 scripts/amdkfd-fingerprint.py check "$tmp" \
		src/glue/amdkfd-reviewed.txt "$out" &&
		grep -q 'KFDP_AMDKFD_UNREVIEWED "function decrement_queue_count' "$out" ||
		{ rm -rf "$tmp"; return 1; }
	# A set is reviewed whole: two sets, each differing from this source in
	# one item and agreeing with it in the other, do not add up to a pass.
	python3 scripts/amdkfd-fingerprint.py print "$amd" >"$tmp/now.txt"
	{
		echo '[a]'
		sed 's/^\(function [^ ]* update_queue\) .*/\1 0/' "$tmp/now.txt"
		echo '[b]'
		sed 's/^\(function [^ ]* kfd_hws_hang\) .*/\1 0/' "$tmp/now.txt"
	} >"$tmp/two-sets.txt"
	if python3 scripts/amdkfd-fingerprint.py check "$amd" "$tmp/two-sets.txt" "$out" \
		2>"$tmp/err"; then
		echo "a source matching no single reviewed set passed the fingerprint check" >&2
		rm -rf "$tmp"
		return 1
	fi
	grep -q 'differs from every reviewed version' "$tmp/err" || { cat "$tmp/err"; rm -rf "$tmp"; return 1; }
	# and a source equal to the second of two sets passes, naming it.
	{ echo '[a]'; sed 's/ [0-9a-f]*$/ 0/' "$tmp/now.txt"; echo '[b]'; cat "$tmp/now.txt"; } \
		>"$tmp/second.txt"
	python3 scripts/amdkfd-fingerprint.py check "$amd" "$tmp/second.txt" "$out" &&
		grep -q 'KFDP_AMDKFD_REVIEWED_AS "b"' "$out"
	local r=$?
	rm -rf "$tmp"
	return $r
}

# What modinfo says of the built module against what ships beside it.
module-metadata() {
	local info param bad=0
	info=$(modinfo kfd_preempt.ko) || return 1
	grep -q '^softdep: *pre: amdgpu$' <<<"$info" || {
		echo "kfd_preempt.ko lacks softdep pre: amdgpu" >&2
		bad=1
	}
	grep -q '^softdep kfd_preempt pre: amdgpu$' packaging/modprobe.d/kfd-preempt.conf || bad=1
	for param in $(sed -n 's/^parm: *\([a-z_]*\):.*/\1/p' <<<"$info"); do
		if ! grep -q "options kfd_preempt $param=" packaging/modprobe.d/kfd-preempt.conf ||
			! grep -q "\`\`$param\`\`" Documentation/admin-guide.rst; then
			echo "parameter $param is not in packaging/modprobe.d/ or the admin guide" >&2
			bad=1
		fi
	done
	return $bad
}

# The kselftests' copy of the uapi header (they build from their directory
# alone, as tools/include/uapi holds copies of the kernel's) is the header.
kselftest-uapi-copy() {
	cmp uapi/linux/kfd_preempt.h tests/kselftest/kfd_preempt/include/linux/kfd_preempt.h
}

# The module's files import only from their own layer and those below, or
# a parent its own child (Documentation/design.rst, "Layers"), and so do
# kfd-preemptd's (its lib.rs, "Layers"); the other crates have no cycle;
# and a planted upward import (the Backend trait reaching into the engine)
# fails.
import-graph() {
	python3 scripts/import-graph.py || return 1
	python3 scripts/import-graph.py userspace/kfd-preemptd/src userspace/kfd-preemptd/src/lib.rs ||
		return 1
	local crate
	for crate in userspace/kfd-preempt userspace/kfd-preempt-cli userspace/kfdp-scenario \
		userspace/kfd-preempt-capi userspace/kfd-preemptd-stats userspace/python tests/fuzz; do
		python3 scripts/import-graph.py --cycles-only "$crate/src" || return 1
	done
	# No binary crate depends on another: what two share is the library's.
	if grep -Eq '^(kfd-preemptd|kfd-preempt-cli|kfdp-scenario)[[:space:]]*[=.]' userspace/*/Cargo.toml; then
		echo "a crate depends on a binary crate" >&2
		return 1
	fi
	local tmp out r=0
	tmp=$(mktemp -d)
	cp -r src "$tmp/src"
	echo 'use crate::engine::registry::REGISTRY;' >>"$tmp/src/backend.rs"
	if out=$(python3 scripts/import-graph.py "$tmp/src" Documentation/design.rst); then
		echo "a planted upward import passed import-graph" >&2
		r=1
	elif ! grep -qx 'upward import: backend.rs -> engine/registry.rs' <<<"$out"; then
		echo "import-graph on a planted upward import said: $out" >&2
		r=1
	fi
	rm -rf "$tmp"
	return $r
}

# A section cited as ``design.rst, "Hazards"`` exists under that title; and
# the check names a planted dead reference, and only that one.
doc-refs() {
	python3 scripts/doc-refs.py || return 1
	local tmp err r=0
	tmp=$(mktemp -d)
	mkdir "$tmp/Documentation"
	printf 'Manual\n======\n\nA section\n---------\n' >"$tmp/Documentation/manual.rst"
	printf '/* (Documentation/manual.rst, "A section") */\n/* (manual.rst,\n * "No such section") */\n/* (manual.rst, "A\n * section") */\n' \
		>"$tmp/cites.c"
	git -C "$tmp" init -q && git -C "$tmp" add -A || r=1
	if err=$(python3 scripts/doc-refs.py "$tmp" 2>/dev/null); then
		echo "a dead reference passed doc-refs" >&2
		r=1
	elif [ "$err" != 'cites.c:2: manual.rst has no heading "No such section"' ]; then
		echo "doc-refs on a planted dead reference said: $err" >&2
		r=1
	fi
	rm -rf "$tmp"
	return $r
}

[ $# -gt 0 ] || set -- rustfmt-module checkpatch rustfmt-userspace clippy-userspace rustfmt-python clippy-python rustfmt-fuzz amdkfd-fingerprint module-metadata import-graph kselftest-uapi-copy doc-refs
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
