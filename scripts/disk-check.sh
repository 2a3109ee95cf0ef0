#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Refuse to start make check on a disk that cannot hold its run.
#
# A run that fills the disk fails late and misleadingly: a landing CI
# failed with "No space left on device" in mktemp, 22 minutes in, after a
# report had come out empty ("Expecting value: line 1 column 1"). This
# adds up what the run will write to each file system (the cache, from
# what it lacks; the checkout; the temporary directory), and stops at
# once, saying what to free, if one has less.
#
# The sizes are those measured on this project's machine kind, rounded up
# (Documentation/testing.rst, "Disk").
#
# usage: scripts/disk-check.sh
# KFDP_DISK_FREE_GIB stands for every file system's free space (for its
# tests).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

# GiB of a kernel series the cache lacks: its source package (0.2), the
# unpacked source (1.8) and the test kernel's build tree (0.9).
SERIES_GIB=3
# GiB of the Debian 13 system with both kernels' prepared trees, its
# overlay and disk image.
DEBIAN_GIB=11
# GiB of the fuzzer's LibAFL build (0.7).
FUZZ_GIB=1
# GiB the cache takes in any run: the Debian run's overlay and disk image
# are rewritten, QEMU's snapshots, the bench kernel's module.
CACHE_RUN_GIB=2
# GiB of the checkout: userspace/target (1.5) and out/ (0.5).
CHECKOUT_GIB=3
# GiB of the temporary directory: initramfs trees, mktemp scratch.
TMP_GIB=1

cache_need=$CACHE_RUN_GIB
lacks=()
built() { [ -r "$1" ] && [ -e "$(cat "$1")/.built" ]; }
built "$KFDP_CACHE/kernel-current" || { cache_need=$((cache_need + SERIES_GIB)); lacks+=("the 7.3 kernel"); }
built "$KFDP_CACHE/kernel-current-7.2" || { cache_need=$((cache_need + SERIES_GIB)); lacks+=("the 7.2 kernel"); }
compgen -G "$KFDP_CACHE/debian13/rootfs-*/.complete" >/dev/null ||
	{ cache_need=$((cache_need + DEBIAN_GIB)); lacks+=("the Debian 13 system"); }
[ -d "$KFDP_CACHE/fuzz/target/release" ] ||
	{ cache_need=$((cache_need + FUZZ_GIB)); lacks+=("the fuzzer"); }
what="${lacks[*]:-nothing}"

mkdir -p "$KFDP_CACHE"
tmp=${TMPDIR:-/tmp}
# What each file system must hold, summed over the directories on it.
declare -A need=() dirs=()
for entry in "$KFDP_CACHE:$cache_need" "$KFDP_ROOT:$CHECKOUT_GIB" "$tmp:$TMP_GIB"; do
	dir=${entry%:*} gib=${entry##*:}
	fs=$(df -P "$dir" | awk 'NR == 2 { print $1 }')
	need[$fs]=$((${need[$fs]:-0} + gib))
	dirs[$fs]="${dirs[$fs]:+${dirs[$fs]}, }$dir"
done
for fs in "${!need[@]}"; do
	if [ -n "${KFDP_DISK_FREE_GIB:-}" ]; then
		have=$KFDP_DISK_FREE_GIB
	else
		have=$(df -Pk "${dirs[$fs]%%, *}" | awk 'NR == 2 { print int($4 / 1048576) }')
	fi
	if [ "$have" -lt "${need[$fs]}" ]; then
		kfdp_die "make check needs about ${need[$fs]} GiB free for ${dirs[$fs]}, and $fs has $have GiB (the cache lacks: $what). Free space there: old clones' out/ and userspace/target, or the cache (scripts/prune-kernels.sh keeps only the kernels in use)"
	fi
	kfdp_log "disk: about ${need[$fs]} GiB needed for ${dirs[$fs]}, $have GiB free (the cache lacks: $what)"
done
