#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# scripts/prune-kernels.sh on a made-up cache: the trees the records name
# and the unfinished ones stay, every other built tree goes, and
# KFDP_KEEP_KERNELS=1 keeps all. KTAP, ending in "N passed, M failed".
set -uo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
cache=$(mktemp -d)
trap 'rm -rf "$cache"' EXIT

. "$here/tests/lib/ktap.sh"

# Trees: the test kernels of both series, the bench kernel, two stale
# built trees, one build in progress (no .built, written just now) and one
# abandoned (no .built, untouched for two days).
make_cache() {
	rm -rf "${cache:?}"/*
	for t in test73 test72 bench stale1 stale2 building abandoned; do
		mkdir -p "$cache/kbuild/$t/arch"
		echo obj >"$cache/kbuild/$t/arch/file.o"
		case $t in
		building) ;;
		abandoned) touch -d '2 days ago' "$cache/kbuild/$t" "$cache/kbuild/$t/arch" \
			"$cache/kbuild/$t/arch/file.o" ;;
		*) touch "$cache/kbuild/$t/.built" ;;
		esac
	done
	echo "$cache/kbuild/test73" >"$cache/kernel-current"
	echo "$cache/kbuild/test72" >"$cache/kernel-current-7.2"
	echo "$cache/kbuild/bench" >"$cache/kernel-bench"
}

echo "TAP version 13"
echo "1..8"
make_cache
KFDP_KEEP_KERNELS=0 KFDP_CACHE=$cache "$here/scripts/prune-kernels.sh" 2>/dev/null
check_eval '[ -e "$cache/kbuild/test73/.built" ]' "the primary's test kernel stays"
check_eval '[ -e "$cache/kbuild/test72/.built" ]' "the other series' test kernel stays"
check_eval '[ -e "$cache/kbuild/bench/.built" ]' "the bench kernel stays"
check_eval '[ -e "$cache/kbuild/building/arch/file.o" ]' "a build in progress stays"
check_eval '[ ! -e "$cache/kbuild/abandoned" ]' \
	"an unfinished build untouched for two days is deleted"
check_eval '[ ! -e "$cache/kbuild/stale1" ] && [ ! -e "$cache/kbuild/stale2" ]' \
	"built trees no record names are deleted"

make_cache
KFDP_KEEP_KERNELS=1 KFDP_CACHE=$cache "$here/scripts/prune-kernels.sh" 2>/dev/null
check_eval '[ -e "$cache/kbuild/stale1/.built" ] && [ -e "$cache/kbuild/stale2/.built" ]' \
	"KFDP_KEEP_KERNELS=1 keeps every tree"

rm -rf "${cache:?}"/*
KFDP_KEEP_KERNELS=0 KFDP_CACHE=$cache "$here/scripts/prune-kernels.sh" 2>/dev/null
rc=$?
check_eval '[ "$rc" = 0 ] && [ -z "$(ls -A "$cache")" ]' "a cache without kernels is left alone"

ktap_summary
