#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Build the Debian packages kfd-preempt-dkms and kfd-preempt (`make debs`)
# with dpkg-buildpackage and debhelper (packaging/debian/), and check them
# with lintian:
#
#   out/debs/src/kfd-preempt-VERSION/  the staged source: packaging/debian
#                                      as debian/, userspace/, uapi/,
#                                      src/uapi_check.h, packaging/, and the
#                                      DKMS source tree (scripts/dkms-source.sh)
#   out/debs/*.deb                     the packages (and .buildinfo, .changes)
#   out/debs/build.log, lintian.txt    dpkg-buildpackage's and lintian's output
#
# Binary packages only, unsigned. The module is not built: DKMS builds it on
# the host that installs kfd-preempt-dkms. Offline: the crates of
# userspace/Cargo.lock come from $CARGO_HOME (fetched first only if some are
# missing). The release build reuses userspace/target (or $CARGO_TARGET_DIR).
# Fails if the build fails or lintian reports an error that no override
# explains (packaging/debian/*.lintian-overrides, each with its reason;
# Documentation/building.rst, "Debian packages", lists them).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

deb=$KFDP_ROOT/packaging/debian
out=$KFDP_ROOT/out/debs
version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$KFDP_ROOT/userspace/Cargo.toml" | head -n1)
[ -n "$version" ] || kfdp_die "no version in userspace/Cargo.toml"
# A native package: its version is the workspace's, with no Debian revision.
debversion=$(dpkg-parsechangelog -l "$deb/changelog" -S Version)
[ "$debversion" = "$version" ] ||
	kfdp_die "packaging/debian/changelog is at $debversion, userspace/Cargo.toml at $version: add a changelog entry (dch -v $version)"

for tool in dpkg-buildpackage dh dh_dkms lintian help2man cargo; do
	command -v "$tool" >/dev/null ||
		kfdp_die "$tool is missing: apt-get install debhelper dh-dkms lintian help2man (and the Rust toolchain: scripts/install-toolchain.sh)"
done

stage=$out/src/kfd-preempt-$version
rm -rf "$out"
mkdir -p "$stage"

# What the build needs, as in the working tree (tracked and new files, not
# ignored ones such as userspace/target), with their modification times so
# that Cargo's freshness checks see the sources it last built.
git -C "$KFDP_ROOT" ls-files -z --cached --others --exclude-standard -- \
	userspace uapi src/uapi_check.h packaging ':!packaging/debian' |
	(cd "$KFDP_ROOT" && while IFS= read -r -d '' f; do
		[ -e "$f" ] && printf '%s\0' "$f"
	done | cpio -0 -pdm --quiet "$stage")
# debian/: the packaging, symbolic links (to packaging/systemd, udev and
# modprobe.d) replaced by the files they point to.
cp -RL "$deb" "$stage/debian"
"$KFDP_ROOT/scripts/dkms-source.sh" "$stage/dkms" >/dev/null

# Cargo: this environment's toolchain and registry cache, the repository's
# target directory, never the network during the package build.
export CARGO_HOME=${CARGO_HOME:-$HOME/.cargo}
[ -d "$HOME/.rustup" ] && export RUSTUP_HOME=${RUSTUP_HOME:-$HOME/.rustup}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$KFDP_ROOT/userspace/target}
# (For this host's target only: crates of other platforms are never needed.)
host=$(rustc -vV | sed -n 's/^host: //p')
if ! (cd "$stage/userspace" && cargo fetch --locked --offline --target "$host" >/dev/null 2>&1); then
	kfdp_log "crates missing from $CARGO_HOME: cargo fetch"
	(cd "$stage/userspace" && cargo fetch --locked --target "$host") || kfdp_die "cargo fetch failed"
fi

# Build-Depends. The Rust toolchain may be rustup's rather than Debian's
# (cargo-web/rustc-web conflict with rustup): dpkg cannot see it, so it is
# checked here, by version, and dpkg-buildpackage told not to (-d).
rust_min=$(sed -n 's/^rust-version = "\(.*\)"/\1/p' "$KFDP_ROOT/userspace/Cargo.toml" | head -n1)
check_deps=()
unmet=$(cd "$stage" && dpkg-checkbuilddeps 2>&1) || {
	unmet=$(sed -n 's/.*Unmet build dependencies: //p' <<<"$unmet")
	[ -n "$unmet" ] || kfdp_die "dpkg-checkbuilddeps failed"
	rest=$(sed -E 's/(^| )(cargo|rustc) \(>= [0-9.]+\)//g; s/^ +//' <<<"$unmet")
	[ -z "$rest" ] || kfdp_die "unmet build dependencies: $unmet"
	for t in cargo rustc; do
		v=$("$t" --version | awk '{print $2}')
		dpkg --compare-versions "$v" ge "$rust_min" ||
			kfdp_die "$t $v ($(command -v "$t")) is older than $rust_min"
	done
	kfdp_log "Build-Depends on $unmet: met by $(command -v cargo) ($(cargo --version)), not by a Debian package: dpkg-buildpackage -d"
	check_deps=(-d)
}

jobs=${KFDP_DEB_JOBS:-$(nproc)}
kfdp_log "dpkg-buildpackage -b in $stage (log: $out/build.log)"
start=$(date +%s)
if ! (cd "$stage" && dpkg-buildpackage -b -us -uc -J"$jobs" "${check_deps[@]}") \
	>"$out/build.log" 2>&1; then
	tail -n 40 "$out/build.log" >&2
	kfdp_die "dpkg-buildpackage failed (whole log: $out/build.log)"
fi
kfdp_log "dpkg-buildpackage: $(($(date +%s) - start)) s"

# dpkg-buildpackage writes next to the source tree.
shopt -s nullglob
built=("$out"/src/*.deb "$out"/src/*.buildinfo "$out"/src/*.changes)
[ ${#built[@]} -gt 0 ] || kfdp_die "dpkg-buildpackage built nothing"
mv "${built[@]}" "$out/"
changes=("$out"/kfd-preempt_"$version"_*.changes)
[ ${#changes[@]} = 1 ] || kfdp_die "no single .changes file in $out"
for p in kfd-preempt-dkms kfd-preempt; do
	compgen -G "$out/${p}_${version}_*.deb" >/dev/null || kfdp_die "no $p package was built"
done
ls -1 "$out"/*.deb | sed "s|^$KFDP_ROOT/||" >&2

# lintian on everything the .changes lists (the .debs and the .buildinfo),
# informational tags included; overridden tags are listed (O:) but are not
# failures. It exits non-zero on an error (E:) that no override explains.
kfdp_log "lintian"
rc=0
lintian --display-info --show-overrides --fail-on error "${changes[0]}" >"$out/lintian.txt" 2>&1 ||
	rc=$?
if [ -s "$out/lintian.txt" ]; then
	sed 's/^/  /' "$out/lintian.txt" >&2
else
	echo "  (no tags)" >&2
fi
[ "$rc" = 0 ] || kfdp_die "lintian reports errors, or failed (exit $rc): $out/lintian.txt"
echo "$out"
