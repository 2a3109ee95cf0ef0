#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Delete the kernel build trees under $KFDP_CACHE/kbuild that no record
# names any more.
#
# build-kernel.sh keys a tree by its source, config fragments and
# toolchain, so every change of one builds a new tree (about 0.9 GB) and
# leaves the old one behind: on a CI host that runs every submission,
# the cache grows until the disk is full (a landing CI failed that way,
# "No space left on device" in the middle of make check). The trees in
# use are those the records name: kernel-current (the primary's test
# kernel), kernel-current-<series> (the other series') and kernel-bench.
# A tree without .built is a build that is running or was cut short: the
# first is not ours to delete, so such a tree stays until nothing in it
# changed for a day (a cold build takes under an hour).
#
# The cache serves one run at a time (make check and the other entry
# points take no lock of it): a run that builds another kernel
# configuration prunes the tree a concurrent run boots.
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
	[ -n "${named[$(basename "$tree")]:-}" ] && continue
	why="no record names it"
	if [ ! -e "$tree/.built" ]; then
		# Anything written in the last day: a build may be running.
		[ -n "$(find "$tree" -mmin -1440 -print -quit)" ] && continue
		why="an unfinished build, untouched for a day"
	fi
	kfdp_log "pruning the kernel tree $tree: $why ($(du -sh "$tree" | cut -f1))"
	rm -rf "$tree"
done
