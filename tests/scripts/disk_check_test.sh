#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# scripts/disk-check.sh on made-up caches and free space: a cold cache
# needs room for the kernels, the Debian system and the fuzzer, a warm one
# only for the run; a refusal says what the cache lacks. KTAP, ending in
# "N passed, M failed".
set -uo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
cache=$(mktemp -d)
trap 'rm -rf "$cache"' EXIT

. "$here/tests/lib/ktap.sh"
# usage: disk FREE_GIB: runs the check, its message in $msg, status in $rc.
disk() {
	msg=$(KFDP_CACHE=$cache KFDP_DISK_FREE_GIB=$1 "$here/scripts/disk-check.sh" 2>&1)
	rc=$?
}
warm() {
	for s in 7.3 7.2; do
		mkdir -p "$cache/kbuild/$s"
		touch "$cache/kbuild/$s/.built"
	done
	echo "$cache/kbuild/7.3" >"$cache/kernel-current"
	echo "$cache/kbuild/7.2" >"$cache/kernel-current-7.2"
	mkdir -p "$cache/debian13/rootfs-0123" "$cache/fuzz/target/release"
	touch "$cache/debian13/rootfs-0123/.complete"
}

echo "TAP version 13"
echo "1..7"
disk 10
check_eval '[ "$rc" != 0 ]' "a cold cache and 10 GiB free: refused"
check_eval 'grep -q "the 7.3 kernel the 7.2 kernel the Debian 13 system the fuzzer" <<<"$msg"' \
	"the refusal names what the cache lacks"
disk 1000
check_eval '[ "$rc" = 0 ]' "a cold cache and 1000 GiB free: accepted"
warm
disk 10
check_eval '[ "$rc" = 0 ] && grep -q "lacks: nothing" <<<"$msg"' \
	"a warm cache and 10 GiB free: accepted"
disk 2
check_eval '[ "$rc" != 0 ]' "a warm cache and 2 GiB free: refused"
disk 8
check_eval '[ "$rc" = 0 ]' "a warm cache and 8 GiB free: accepted"
rm "$cache/kbuild/7.2/.built"
disk 8
check_eval '[ "$rc" != 0 ] && grep -q "the 7.2 kernel" <<<"$msg"' \
	"a 7.2 tree without .built counts as missing"

ktap_summary
