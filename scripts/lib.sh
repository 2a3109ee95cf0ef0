# SPDX-License-Identifier: GPL-2.0
# Shared settings for the provisioning and test scripts. Sourced, never run.
#
# Everything that is downloaded or built lives under $KFDP_CACHE, outside
# the repository, so that a fresh clone reuses it and `git clean` never
# throws away a 20-minute kernel build.

KFDP_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
KFDP_CACHE=${KFDP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kfd_preempt}

# The kernel the test VM runs and the module is built against. The exact
# Debian version is pinned; if the archive has moved on, fetch-kernel.sh
# falls back to the newest linux-source-7.3 and says so.
KFDP_KERNEL_PKG=linux-source-7.3
KFDP_KERNEL_PKG_VERSION=${KFDP_KERNEL_PKG_VERSION:-7.3.4-1~bpo13+1}
KFDP_KERNEL_SUITE=trixie-backports

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

kfdp_log() {
	printf '[kfdp %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2
}

kfdp_die() {
	printf '[kfdp] error: %s\n' "$*" >&2
	exit 1
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

# Where the kernel build for the current fragment and toolchain lives; set
# by kernel-build.sh and written to $KFDP_CACHE/kernel-current.
kfdp_kernel_build_dir() {
	local f=$KFDP_CACHE/kernel-current
	[ -r "$f" ] || kfdp_die "no kernel built yet: run scripts/build-kernel.sh"
	cat "$f"
}

# The kernel source tree of that build (its `source` link).
kfdp_kernel_src_dir() {
	readlink -f "$(kfdp_kernel_build_dir)/source"
}
