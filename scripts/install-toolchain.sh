#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Install the toolchain for the test kernel, the module and the VM.
# Idempotent: packages already present are not touched, and bindgen is
# built once into $KFDP_CACHE/tools.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

packages=(
	"clang-$KFDP_LLVM_VERSION" "lld-$KFDP_LLVM_VERSION" "llvm-$KFDP_LLVM_VERSION"
	"libclang-$KFDP_LLVM_VERSION-dev"
	rustc-web rust-web-src rust-web-clippy
	flex bison bc libelf-dev libssl-dev cpio kmod xz-utils
	qemu-system-x86 busybox-static
	gcc-multilib # 32-bit kselftests for the compat ioctl path
	libhsa-runtime-dev # HSA headers for the hardware kit (the runtime is loaded at run time)
	dkms # the DKMS build of the module is tested against the test kernel
	debhelper dh-dkms lintian help2man fakeroot # make debs: the Debian packages and their checks
	mmdebstrap e2fsprogs # the Debian 13 system of tests/debian/run.sh and its disk image
	rsync # the kernel's selftests Makefile installs the kselftests with it
	prometheus curl # promtool and a scratch prometheus for tests/metrics/metrics_test.sh
	python3-minimal python3-venv # the VM's Python and the tools' venv (scripts/build-python.sh)
)

missing=()
for p in "${packages[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
		missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
	[ "$(id -u)" = 0 ] || kfdp_die "need root to install: ${missing[*]}"
	kfdp_log "installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
	# The package enables a Prometheus server on :9090; the tests start
	# their own scratch one on the loopback, so this one stays off.
	if [[ " ${missing[*]} " == *" prometheus "* ]] && [ -d /run/systemd/system ]; then
		systemctl disable --now prometheus.service >/dev/null 2>&1 || true
	fi
fi

[ -x "$KFDP_RUSTC" ] || kfdp_die "$KFDP_RUSTC missing after install (rustc-web)"
[ -d "$KFDP_RUST_LIB_SRC" ] || kfdp_die "$KFDP_RUST_LIB_SRC missing (rust-web-src)"

if ! "$KFDP_BINDGEN" --version 2>/dev/null | grep -q "$KFDP_BINDGEN_VERSION"; then
	kfdp_log "building bindgen-cli $KFDP_BINDGEN_VERSION into $KFDP_TOOLS"
	mkdir -p "$KFDP_TOOLS"
	cargo install --quiet --locked --root "$KFDP_TOOLS" \
		bindgen-cli --version "$KFDP_BINDGEN_VERSION"
fi

kfdp_log "toolchain: $("$KFDP_RUSTC" --version), $("$KFDP_BINDGEN" --version), clang-$KFDP_LLVM_VERSION"
