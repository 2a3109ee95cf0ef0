#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# A kernel build tree a Rust module can be built against, for a kernel whose
# headers package carries no Rust metadata (Debian's linux-headers-*: no
# rust/*.rmeta, rust/*.so, rust/kernel/generated_arch_*_asm.rs nor
# scripts/target.json). Ubuntu ships these files as linux-lib-rust-*; here
# they are made the way a distribution makes them: from the kernel's own
# source (linux-source-X.Y) with the headers' .config, by the kernel's own
# compilers (kernel-toolchain.sh), `make modules_prepare`, once per kernel
# and cached. Prints the directory to build against: KDIR itself if it
# has the metadata already, else the prepared tree.
#
# The prepared tree is checked before use, so that a wrong source or rustc
# is a refusal here and not a module that fails to load:
#   * its source is of KVER's version, and its generated configuration
#     (autoconf.h, rustc_cfg) is byte for byte the headers' own;
#   * every Rust symbol its kernel crate exports is one the kernel exports
#     (the headers' Module.symvers): the symbols' names carry a hash of
#     the rustc version, so this fails for any other rustc.
# The module is then linked against the headers' own Module.symvers.
#
# usage: kernel-rust-metadata.sh KVER KDIR
#        kernel-rust-metadata.sh --check-exports TREE SYMVERS
#
# Environment:
#   KFDP_LINUX_SRC     the kernel's source: a linux-source-X.Y.tar.xz or an
#                      unpacked tree (default /usr/src/linux-source-X.Y.tar.xz,
#                      or the directory of that name); its version must be
#                      KVER's. A tree is keyed by its top-level listing only:
#                      after editing one, remove the cached tree.
#   KFDP_KERNEL_CACHE  where prepared trees are kept, one per kernel release
#                      (default /var/cache/kfd-preempt/kernels)
#   LLVM, RUSTC, BINDGEN  as for kernel-toolchain.sh
set -eu
here=$(cd "$(dirname "$0")" && pwd)

die() {
	echo "kfd_preempt: $*" >&2
	exit 1
}
log() {
	echo "kfd_preempt: $*" >&2
}

# Every Rust symbol TREE's kernel crate exports must be in SYMVERS.
check_exports() {
	tree=$1 symvers=$2
	set -- "$tree"/rust/exports_*_generated.h
	[ -r "$1" ] || die "$tree has no rust/exports_*_generated.h: its Rust support was not built"
	[ -s "$symvers" ] || die "$symvers is empty: the kernel's exported symbols are unknown"
	missing=$(sed -n 's/^EXPORT_SYMBOL_RUST_GPL(\(.*\));$/\1/p' "$@" | sort -u |
		awk 'FILENAME == ARGV[1] { have[$2] = 1; next }
			!($1 in have) { n++; if (n == 1) first = $1 }
			END { if (n) print n, first }' "$symvers" -)
	if [ -n "$missing" ]; then
		die "the Rust metadata of $tree does not match the kernel: ${missing%% *} Rust symbols it exports are not in $symvers (the first: ${missing#* }); it was made by another rustc or from another source than the kernel's own"
	fi
	exports=$(sed -n 's/^EXPORT_SYMBOL_RUST_GPL(\(.*\));$/\1/p' "$@" | sort -u | wc -l)
	[ "$exports" -gt 0 ] || die "$tree exports no Rust symbol"
	log "the kernel crate's $exports Rust exports are the kernel's own ($symvers)"
}

if [ "${1:-}" = --check-exports ]; then
	[ $# = 3 ] || die "usage: kernel-rust-metadata.sh --check-exports TREE SYMVERS"
	check_exports "$2" "$3"
	exit 0
fi
[ $# = 2 ] || die "usage: kernel-rust-metadata.sh KVER KDIR"
kver=$1
kdir=$2

if [ -r "$kdir/rust/libkernel.rmeta" ] && [ -r "$kdir/scripts/target.json" ]; then
	echo "$kdir"
	exit 0
fi

toolchain=$(sh "$here/kernel-toolchain.sh" "$kdir") || exit 1
series=$(echo "$kver" | cut -d. -f1-2)
src=${KFDP_LINUX_SRC:-}
if [ -z "$src" ]; then
	for s in "/usr/src/linux-source-$series.tar.xz" "/usr/src/linux-source-$series"; do
		if [ -e "$s" ]; then
			src=$s
			break
		fi
	done
fi
[ -n "$src" ] && [ -e "$src" ] ||
	die "the headers of Linux $kver ($kdir) carry no Rust metadata, and the kernel's source to make it from is not installed: install linux-source-$series (Debian), or linux-lib-rust-$kver (Ubuntu), or set KFDP_LINUX_SRC"
[ -r "$kdir/Module.symvers" ] || die "$kdir has no Module.symvers"

# One prepared tree per kernel release, remade when what it is made from
# changes: the headers' configuration, the source, the compilers.
cache=${KFDP_KERNEL_CACHE:-/var/cache/kfd-preempt/kernels}/$kver
key=$({
	cat "$kdir/.config" "$kdir/Module.symvers"
	ls -lL --time-style=+%s "$src"
	echo "$toolchain"
	cat "$0"
} | sha256sum | cut -d' ' -f1)
if [ -e "$cache/ready" ] && [ "$(cat "$cache/ready")" = "$key" ]; then
	check_exports "$cache/build" "$kdir/Module.symvers"
	echo "$cache/build"
	exit 0
fi

log "the headers of Linux $kver carry no Rust metadata: making it from $src with the kernel's own compilers in $cache (once per kernel)"
# An unpacked source of the same tarball is kept (a failed or outdated
# preparation is redone incrementally).
src_key=$(ls -lL --time-style=+%s "$src" | sha256sum | cut -d' ' -f1)
if [ ! -e "$cache/unpacked" ] || [ "$(cat "$cache/unpacked")" != "$src_key" ]; then
	# Beside the tree in use, which stays until this one proves to be of
	# the same kernel version (Debian updates linux-source-X.Y in place:
	# after 7.3.5 came, it is no longer 7.3.4's source).
	mkdir -p "$cache"
	rm -rf "$cache/linux.new"
	if [ -d "$src" ]; then
		ln -s "$(cd "$src" && pwd)" "$cache/linux.new"
	else
		mkdir -p "$cache/linux.new"
		tar -C "$cache/linux.new" --strip-components=1 -xf "$src"
	fi
	[ -r "$cache/linux.new/Makefile" ] || die "$src is not a kernel source tree"
	src_version=$(make -s -C "$cache/linux.new" kernelversion 2>/dev/null)
	kver_version=$(echo "$kver" | sed 's/[^0-9.].*//')
	if [ "$src_version" != "$kver_version" ]; then
		rm -rf "$cache/linux.new"
		die "$src is Linux ${src_version:-of no version}, not $kver_version: the Rust metadata and amdgpu's structures of Linux $kver must come from that kernel's own source (set KFDP_LINUX_SRC to it)"
	fi
	rm -rf "$cache/linux" "$cache/build"
	mv "$cache/linux.new" "$cache/linux"
	echo "$src_key" >"$cache/unpacked"
fi
rm -f "$cache/ready"
mkdir -p "$cache/build"
cp "$kdir/.config" "$cache/build/.config"
# The kernel's Rust library source (core is compiled here): the rustc's own.
rustc=$(echo "$toolchain" | sed -n 's/^RUSTC=//p')
rust_lib_src=$("$rustc" --print sysroot)/lib/rustlib/src/rust/library
[ -d "$rust_lib_src" ] ||
	die "$rust_lib_src is missing: install the Rust standard library's source of $rustc (Debian: package rust-src)"
jobs=$(nproc 2>/dev/null || echo 1)
kmake() {
	# shellcheck disable=SC2086 # $toolchain is a list of make arguments
	make -s -C "$cache/linux" O="$cache/build" $toolchain KERNELRELEASE="$kver" \
		RUST_LIB_SRC="$rust_lib_src" "$@" >>"$cache/make.log" 2>&1
}
: >"$cache/make.log"
if ! kmake olddefconfig; then
	tail -n 15 "$cache/make.log" >&2
	die "make olddefconfig failed for Linux $kver (a kernel build's tools: flex, bison, bc, libelf-dev, libssl-dev, openssl; the log: $cache/make.log)"
fi
# Kconfig drops CONFIG_RUST silently when it finds the Rust toolchain
# unusable here (rust_is_available.sh: rustc, bindgen and its libclang,
# the library source): say why rather than that the configuration differs.
if ! grep -q '^CONFIG_RUST=y' "$cache/build/.config"; then
	kmake rustavailable || true
	tail -n 15 "$cache/make.log" >&2
	die "the Rust toolchain of Linux $kver is not usable here, so its Rust metadata cannot be made (make rustavailable, above)"
fi
if ! kmake -j"$jobs" modules_prepare; then
	tail -n 20 "$cache/make.log" >&2
	die "making the Rust metadata of Linux $kver failed (the whole log: $cache/make.log)"
fi

# The same kernel: the configuration the build generated is the headers'
# own. Kconfig probes the build host too (CONFIG_OPENSSL_SUPPORTS_ML_DSA
# asks openssl), so a missing tool shows here, named by the lines that differ.
for f in include/generated/autoconf.h include/generated/rustc_cfg; do
	if ! cmp -s "$kdir/$f" "$cache/build/$f"; then
		diff "$kdir/$f" "$cache/build/$f" | grep '^[<>]' | head -n 8 >&2
		die "$src with the headers' .config does not give Linux $kver's own $f (the lines above: < the kernel's, > made here): another source, other compilers, or a tool Kconfig probes (openssl, pahole from dwarves) missing here"
	fi
done
[ -r "$cache/build/rust/libkernel.rmeta" ] && [ -r "$cache/build/scripts/target.json" ] ||
	die "making the Rust metadata of Linux $kver produced no rust/libkernel.rmeta (the log: $cache/make.log)"
check_exports "$cache/build" "$kdir/Module.symvers"

# Link against the kernel's own symbol list; its vmlinux (Debian's headers
# ship one) is the base of the module's BTF.
cp "$kdir/Module.symvers" "$cache/build/Module.symvers"
[ -r "$kdir/vmlinux" ] && ln -sf "$kdir/vmlinux" "$cache/build/vmlinux"
echo "$key" >"$cache/ready"
echo "$cache/build"
