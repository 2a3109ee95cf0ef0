#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Fetch and unpack Debian's linux-source-$KFDP_KERNEL_SERIES into $KFDP_CACHE/src without
# changing the machine's apt configuration: a private sources list names
# the suite on the mirror the machine already uses, and apt keeps its lists
# in the cache. Prints the unpacked source directory on stdout.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

apt_dir=$KFDP_CACHE/apt
mkdir -p "$apt_dir/lists/partial" "$KFDP_CACHE/src" "$KFDP_CACHE/debs"

mirror=$(kfdp_debian_mirror)

keyring=/usr/share/keyrings/debian-archive-keyring.gpg
echo "deb [signed-by=$keyring] $mirror $KFDP_KERNEL_SUITE main" >"$apt_dir/sources.list"
apt_opts=(-o "Dir::Etc::sourcelist=$apt_dir/sources.list" -o "Dir::Etc::sourceparts=/dev/null"
	-o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache::archives=$KFDP_CACHE/debs"
	-o "APT::Get::List-Cleanup=0" -o "APT::Sandbox::User=root")

# Reuse an already unpacked tree of the pinned version without asking apt.
want=$KFDP_KERNEL_PKG_VERSION
if [ ! -e "$KFDP_CACHE/src/$want/.unpacked" ]; then
	apt-get "${apt_opts[@]}" -qq update
	versions=$(apt-cache "${apt_opts[@]}" madison "$KFDP_KERNEL_PKG" | awk '{ print $3 }')
	if ! grep -qxF "$want" <<<"$versions"; then
		newest=$(head -n1 <<<"$versions")
		[ -n "$newest" ] || kfdp_die "$KFDP_KERNEL_PKG is not in $KFDP_KERNEL_SUITE any more"
		kfdp_log "WARNING: $KFDP_KERNEL_PKG $want is gone; falling back to $newest." \
			"Set $KFDP_KERNEL_VERSION_VAR=$newest to silence this, and re-check the" \
			"amdkfd fingerprints (Documentation/design.rst)."
		want=$newest
	fi
fi

dest=$KFDP_CACHE/src/$want
if [ ! -e "$dest/.unpacked" ]; then
	rm -rf "$dest"
	mkdir -p "$dest"
	(cd "$KFDP_CACHE/debs" && apt-get "${apt_opts[@]}" -qq download "$KFDP_KERNEL_PKG=$want")
	deb=$(ls "$KFDP_CACHE"/debs/"${KFDP_KERNEL_PKG}"_*.deb | grep -F "$(sed 's/:/%3a/' <<<"$want")" | head -n1)
	kfdp_log "unpacking $deb"
	dpkg-deb -x "$deb" "$dest/deb"
	tar -C "$dest" -xf "$dest"/deb/usr/src/"$KFDP_KERNEL_PKG".tar.xz
	rm -rf "$dest/deb"
	mv "$dest/$KFDP_KERNEL_PKG" "$dest/linux"
	touch "$dest/.unpacked"
fi
# The tree must be of the series asked for, whatever a version override said.
got=$(sed -n 's/^VERSION = //p; s/^PATCHLEVEL = //p' "$dest/linux/Makefile" | paste -sd.)
[ "$got" = "$KFDP_KERNEL_SERIES" ] ||
	kfdp_die "$dest/linux is Linux $got, not the $KFDP_KERNEL_SERIES series asked for ($KFDP_KERNEL_VERSION_VAR?)"
echo "$dest/linux"
