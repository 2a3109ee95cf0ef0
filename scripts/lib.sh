# SPDX-License-Identifier: GPL-2.0
# Shared settings for the provisioning and test scripts. Sourced, never run.
#
# Everything that is downloaded or built lives under $KFDP_CACHE, outside
# the repository, so that a fresh clone reuses it and `git clean` never
# throws away a 20-minute kernel build.

KFDP_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
KFDP_CACHE=${KFDP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kfd_preempt}

# The kernels the module is built and tested against, by series: 7.3, the
# primary (the test VM's, the bench kernel, the amdkfd review), and 7.2, the
# second kernel whose build and VM suites make check also runs, so that the
# compatibility claims of Documentation/building.rst are measured. The exact
# Debian version is pinned; if the archive has moved on, fetch-kernel.sh
# falls back to the newest linux-source-<series> and says so. Every script
# works on the series KFDP_KERNEL_SERIES names (default: the primary).
KFDP_PRIMARY_SERIES=7.3
KFDP_KERNEL_SERIES=${KFDP_KERNEL_SERIES:-$KFDP_PRIMARY_SERIES}
case $KFDP_KERNEL_SERIES in
7.3) KFDP_KERNEL_PIN=7.3.4-1~bpo13+1 ;;
7.2) KFDP_KERNEL_PIN=7.2.12-1~bpo13+1 ;;
*)
	printf '[kfdp] error: unknown KFDP_KERNEL_SERIES %s (7.3 or 7.2)\n' "$KFDP_KERNEL_SERIES" >&2
	exit 1
	;;
esac
KFDP_KERNEL_PKG=linux-source-$KFDP_KERNEL_SERIES
# Each series' pin is overridden by its own variable,
# KFDP_KERNEL_PKG_VERSION_7_3 or KFDP_KERNEL_PKG_VERSION_7_2, so that one
# meant for a series never reaches another.
KFDP_KERNEL_VERSION_VAR=KFDP_KERNEL_PKG_VERSION_${KFDP_KERNEL_SERIES/./_}
KFDP_KERNEL_PKG_VERSION=${!KFDP_KERNEL_VERSION_VAR:-$KFDP_KERNEL_PIN}
KFDP_KERNEL_SUITE=trixie-backports
# Where build-kernel.sh records the test kernel's build directory: the
# primary's in kernel-current (as before there was a second), any other's
# in kernel-current-<series>.
if [ "$KFDP_KERNEL_SERIES" = "$KFDP_PRIMARY_SERIES" ]; then
	KFDP_KERNEL_RECORD=$KFDP_CACHE/kernel-current
else
	KFDP_KERNEL_RECORD=$KFDP_CACHE/kernel-current-$KFDP_KERNEL_SERIES
fi

# Toolchain: the kernel's Rust must be built by the same rustc, bindgen and
# clang as every module built against it (toolchain.md).
KFDP_LLVM_VERSION=22
KFDP_BINDGEN_VERSION=0.72.1
KFDP_RUSTC=/usr/bin/rustc
KFDP_RUST_LIB_SRC=/usr/lib/rustlib/src/rust/library
KFDP_TOOLS=$KFDP_CACHE/tools
KFDP_BINDGEN=$KFDP_TOOLS/bin/bindgen
export LIBCLANG_PATH=/usr/lib/llvm-$KFDP_LLVM_VERSION/lib

KFDP_JOBS=${KFDP_JOBS:-$(($(nproc) + 1))}

# Arguments every kernel-side make needs (kernel and module alike).
kfdp_kmake_args() {
	printf '%s\n' "LLVM=-$KFDP_LLVM_VERSION" "RUSTC=$KFDP_RUSTC" \
		"BINDGEN=$KFDP_BINDGEN" "RUST_LIB_SRC=$KFDP_RUST_LIB_SRC"
}

# The Debian mirror the machine is configured with, so that nothing here
# names a host of its own.
kfdp_debian_mirror() {
	local mirror
	mirror=$(awk '/^URIs:/ && $2 ~ /\/debian\/?$/ { print $2; exit }' \
		/etc/apt/sources.list.d/*.sources 2>/dev/null || true)
	[ -n "$mirror" ] || mirror=$(awk '/^deb / && $3 !~ /security/ { print $2; exit }' \
		/etc/apt/sources.list 2>/dev/null || true)
	[ -n "$mirror" ] || kfdp_die "cannot find the machine's Debian mirror in /etc/apt"
	echo "$mirror"
}

kfdp_log() {
	printf '[kfdp %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2
}

kfdp_die() {
	printf '[kfdp] error: %s\n' "$*" >&2
	exit 1
}

# Print the lines of section NAME that a VM program wrote to its console
# log LOG between "=== PROGRAM NAME begin ===" and "=== PROGRAM NAME end ===",
# without those two lines or the serial line's carriage returns (nothing if
# it wrote none).
# usage: kfdp_vm_section LOG PROGRAM NAME
kfdp_vm_section() {
	sed -n "/^=== $2 $3 begin ===/,/^=== $2 $3 end ===/p" "$1" |
		sed '1d;$d' | tr -d '\r' || true
}

# Run a phase and print how long it took, so that CI logs show where the
# time goes (cold vs warm cache).
kfdp_phase() {
	local name=$1 start end rc
	shift
	kfdp_log "phase $name: start"
	start=$(date +%s)
	"$@"
	rc=$?
	end=$(date +%s)
	kfdp_log "phase $name: $((end - start)) s (exit $rc)"
	return $rc
}

# Run a kernel-side build (CMD...) with its output in LOG, and fail, saying
# why, if it fails or warns: every module the project builds must be
# warning-free. The log, or the warnings, go to stderr.
# usage: kfdp_build_warning_free WHAT LOG CMD...
kfdp_build_warning_free() {
	local what=$1 log=$2
	shift 2
	if ! "$@" >"$log" 2>&1; then
		cat "$log" >&2
		kfdp_die "$what does not build ($log)"
	fi
	if grep -E 'warning[:\[]|WARNING:' "$log" >&2; then
		kfdp_die "the $what build has warnings (above; $log)"
	fi
}

# Where the kernel build for the current fragment and toolchain lives; set
# by kernel-build.sh and written to $KFDP_CACHE/kernel-current.
kfdp_kernel_build_dir() {
	local f=$KFDP_KERNEL_RECORD
	[ -r "$f" ] || kfdp_die "no $KFDP_KERNEL_SERIES kernel built yet: run KFDP_KERNEL_SERIES=$KFDP_KERNEL_SERIES scripts/build-kernel.sh"
	cat "$f"
}

# The kernel source tree of that build (its `source` link).
kfdp_kernel_src_dir() {
	readlink -f "$(kfdp_kernel_build_dir)/source"
}
