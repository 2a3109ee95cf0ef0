#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Delete the kernel build trees under $KFDP_CACHE/kbuild that no record
# names any more.
#
# build-kernel.sh keys a tree by its source, config fragments and
# toolchain, so every change of one builds a new tree of 3 to 6 GB and
# leaves the old one behind: on a CI host that runs every submission,
# the cache grows until the disk is full (a landing CI failed that way,
# "No space left on device" in the middle of make check). The trees in
# use are those the records name: kernel-current (the primary's test
# kernel), kernel-current-<series> (the other series') and kernel-bench.
# A tree without .built is a build that is running or was cut short: the
# first is not ours to delete, and the second is rebuilt from scratch by
# build-kernel.sh anyway, so both stay.
#
# KFDP_KEEP_KERNELS=1 keeps everything (a developer switching between
# branches of different kernel configs saves the rebuilds).
#
# usage: scripts/prune-kernels.sh
set -euo pipefail
. "$(dirname "$0")/lib.sh"

[ "${KFDP_KEEP_KERNELS:-0}" = 1 ] && exit 0
[ -d "$KFDP_CACHE/kbuild" ] || exit 0

declare -A named=()
for record in "$KFDP_CACHE"/kernel-current "$KFDP_CACHE"/kernel-current-* "$KFDP_CACHE"/kernel-bench; do
	[ -r "$record" ] || continue
	dir=$(cat "$record")
	[ -n "$dir" ] && named[$(basename "$dir")]=1
done

for tree in "$KFDP_CACHE"/kbuild/*/; do
	tree=${tree%/}
	[ -e "$tree/.built" ] || continue
	[ -n "${named[$(basename "$tree")]:-}" ] && continue
	kfdp_log "pruning the kernel tree $tree: no record names it ($(du -sh "$tree" | cut -f1))"
	rm -rf "$tree"
done
