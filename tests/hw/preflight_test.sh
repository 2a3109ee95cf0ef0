#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# scripts/hw-validate.sh refuses, with its reason and exit status 2, on a
# host that lacks what it needs, before it builds, loads or writes anything.
# Runs on the build host (which has no GPU); KFDP_KFD_DEV stands in for
# /dev/kfd to reach the refusals after that one. KTAP.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
script=$root/scripts/hw-validate.sh
scratch=$(mktemp -d)
chmod 0755 "$scratch" # nobody runs a copy of the script from it
trap 'rm -rf "$scratch"' EXIT
. "$(dirname "$0")/../lib/ktap.sh"

# case NAME EXPECTED-MESSAGE COMMAND...: exit 2, the message, no report.
case_() {
	local name=$1 want=$2 out rc reports
	shift 2
	reports=$(ls -d "$root"/out/hw-report-* 2>/dev/null | wc -l)
	out=$("$@" 2>&1)
	rc=$?
	if [ "$rc" = 2 ] && grep -q "refusing: .*$want" <<<"$out" &&
		[ "$(ls -d "$root"/out/hw-report-* 2>/dev/null | wc -l)" = "$reports" ]; then
		ok "$name"
	else
		sed 's/^/# /' <<<"$out"
		nok "$name # exit $rc, wanted 2 and '$want'"
	fi
}

ktap_header
ktap_plan 5
case_ no_kfd "no /dev/kfd" env KFDP_KFD_DEV="$scratch/none" "$script"

# Not root: a world-readable copy, run as nobody.
mkdir -m 0755 "$scratch/pub" && install -m 0755 "$script" "$scratch/pub/hw-validate.sh"
if command -v setpriv >/dev/null && [ "$(id -u)" = 0 ]; then
	case_ not_root "run as root" env KFDP_KFD_DEV=/dev/null \
		setpriv --reuid=65534 --regid=65534 --clear-groups "$scratch/pub/hw-validate.sh"
else
	skip not_root "needs root and setpriv to drop to nobody"
fi

case_ no_build_dir "no kernel build directory" \
	env KFDP_KFD_DEV=/dev/null KDIR="$scratch/none" "$script"

mkdir -p "$scratch/kdir-norust" "$scratch/kdir-rust"
echo "CONFIG_MODULES=y" >"$scratch/kdir-norust/.config"
printf 'CONFIG_MODULES=y\nCONFIG_RUST=y\n' >"$scratch/kdir-rust/.config"
case_ no_rust "without CONFIG_RUST" \
	env KFDP_KFD_DEV=/dev/null KDIR="$scratch/kdir-norust" "$script"
case_ no_amdgpu_source "no amdgpu source" \
	env KFDP_KFD_DEV=/dev/null KDIR="$scratch/kdir-rust" AMDGPU_SRC= \
	"$script" --amdgpu-src "$scratch/none"

ktap_summary
