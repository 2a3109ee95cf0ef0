#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# The compilers a module must be built with for the kernel whose build tree
# is KDIR, read from that kernel's own .config: the C compiler
# (CONFIG_CC_VERSION_TEXT, CONFIG_CC_IS_GCC or CONFIG_CC_IS_CLANG), rustc
# (CONFIG_RUSTC_VERSION_TEXT) and bindgen (CONFIG_BINDGEN_VERSION_TEXT).
# Prints the make arguments that select them, one per line (CC= for a
# GCC-built kernel, LLVM= for a clang-built one, then RUSTC=, HOSTRUSTC= and
# BINDGEN=), or refuses, naming the version needed and where to get it.
#
# A module's Rust is linked against the kernel crate by symbol names that
# carry a hash of the rustc version, so any other rustc, even a newer one,
# makes a module that cannot load; bindgen and the C compiler must parse
# the headers with the flags the kernel's own build chose for them.
#
# usage: kernel-toolchain.sh KDIR
#
# What the caller already chose is checked, not replaced (from the
# environment): LLVM (the make variable), RUSTC, BINDGEN. Without them
# this looks on PATH for the kernel's compilers by their usual names:
# the exact binary CONFIG_CC_VERSION_TEXT names (x86_64-linux-gnu-gcc-14),
# clang-N, rustc, rustc-X.Y and /usr/lib/rust-X.Y/bin/rustc (Ubuntu's
# versioned packages), bindgen and bindgen-X.Y.
set -eu

die() {
	echo "kfd_preempt: $*" >&2
	exit 1
}
[ $# = 1 ] || die "usage: kernel-toolchain.sh KDIR"
kdir=$1
config=$kdir/.config
[ -r "$config" ] || die "$kdir has no .config: not a kernel build tree"
kver=$(cat "$kdir/include/config/kernel.release" 2>/dev/null || echo "in $kdir")

# The value of a CONFIG_ string (quotes removed) or number.
cfg() {
	sed -n "s/^$1=\"\{0,1\}\([^\"]*\)\"\{0,1\}\$/\1/p" "$config" | head -n1
}
# The first line a compiler prints for --version, or nothing.
version_of() {
	"$1" --version 2>/dev/null | head -n1
}
# The first of the candidates whose --version is exactly $1.
first_matching() {
	want=$1
	shift
	for c in "$@"; do
		[ -n "$c" ] && command -v "$c" >/dev/null 2>&1 || continue
		if [ "$(version_of "$c")" = "$want" ]; then
			command -v "$c"
			return 0
		fi
	done
	return 1
}
# What the candidates found report, for a refusal.
found_instead() {
	list=""
	for c in "$@"; do
		[ -n "$c" ] && command -v "$c" >/dev/null 2>&1 || continue
		list="$list${list:+; }$c is '$(version_of "$c")'"
	done
	echo "${list:-none is installed}"
}

grep -q '^CONFIG_RUST=y' "$config" ||
	die "Linux $kver is built without CONFIG_RUST: it cannot load a Rust module"

# The C compiler.
cc_text=$(cfg CONFIG_CC_VERSION_TEXT)
# BINARY must be installed (as NAME, from Debian's PACKAGE) and be the one
# that printed CONFIG_CC_VERSION_TEXT.
require_cc() {
	command -v "$1" >/dev/null 2>&1 ||
		die "Linux $kver was built with '$cc_text': install $2 (Debian: package $3)"
	[ "$(version_of "$1")" = "$cc_text" ] ||
		die "Linux $kver was built with '$cc_text', but $1 is '$(version_of "$1")'"
}
if grep -q '^CONFIG_CC_IS_GCC=y' "$config"; then
	[ -z "${LLVM:-}" ] ||
		die "Linux $kver was built with GCC ('$cc_text'), but LLVM=$LLVM asks for clang: a module must be built with the kernel's own compiler; drop LLVM="
	cc=${cc_text%% *}
	case $cc in
	*gcc*) ;;
	*) die "Linux $kver: cannot tell the GCC binary from CONFIG_CC_VERSION_TEXT '$cc_text'" ;;
	esac
	require_cc "$cc" "$cc" "${cc#*-linux-gnu-}"
	echo "CC=$cc"
elif grep -q '^CONFIG_CC_IS_CLANG=y' "$config"; then
	major=$(($(cfg CONFIG_CLANG_VERSION) / 10000))
	case ${LLVM:-} in
	"")
		if command -v "clang-$major" >/dev/null 2>&1; then
			LLVM=-$major
		else
			LLVM=1
		fi
		;;
	1) ;;
	-*) [ "${LLVM#-}" = "$major" ] ||
		die "Linux $kver was built with clang $major ('$cc_text'), but LLVM=$LLVM asks for clang ${LLVM#-}" ;;
	*/) ;;
	*) die "LLVM=$LLVM: use LLVM=1, LLVM=-$major or LLVM=<directory>/" ;;
	esac
	case $LLVM in
	1) clang=clang ;;
	-*) clang=clang$LLVM ;;
	*) clang=${LLVM}clang ;;
	esac
	require_cc "$clang" "clang-$major" "clang-$major"
	echo "LLVM=$LLVM"
else
	die "Linux $kver: its .config names neither GCC nor clang (CONFIG_CC_IS_GCC, CONFIG_CC_IS_CLANG)"
fi

# rustc, exactly.
rustc_text=$(cfg CONFIG_RUSTC_VERSION_TEXT)
rustc_ver=$(echo "$rustc_text" | cut -d' ' -f2)
rustc_mm=${rustc_ver%.*}
[ -n "$rustc_ver" ] || die "Linux $kver: no CONFIG_RUSTC_VERSION_TEXT in its .config"
if [ -n "${RUSTC:-}" ]; then
	set -- "$RUSTC"
else
	set -- rustc "rustc-$rustc_mm" "/usr/lib/rust-$rustc_mm/bin/rustc"
fi
rustc=$(first_matching "$rustc_text" "$@") ||
	die "Linux $kver was built with '$rustc_text' and a module must be built with exactly that rustc (another one, even a newer one, names the kernel crate's symbols differently); found: $(found_instead "$@"). Install rustc $rustc_ver (Debian 13: package rustc; Ubuntu: package rustc-$rustc_mm) or name it with RUSTC= (KFDP_RUSTC= for DKMS)"
echo "RUSTC=$rustc"
echo "HOSTRUSTC=$rustc"

# bindgen, exactly.
bindgen_text=$(cfg CONFIG_BINDGEN_VERSION_TEXT)
bindgen_ver=${bindgen_text#bindgen }
[ -n "$bindgen_text" ] || die "Linux $kver: no CONFIG_BINDGEN_VERSION_TEXT in its .config"
if [ -n "${BINDGEN:-}" ]; then
	set -- "$BINDGEN"
else
	set -- bindgen "bindgen-${bindgen_ver%.*}"
fi
bindgen=$(first_matching "$bindgen_text" "$@") ||
	die "Linux $kver was built with '$bindgen_text' and the module's bindings must be made by the same bindgen; found: $(found_instead "$@"). Install bindgen $bindgen_ver (Debian 13: package bindgen) or name it with BINDGEN= (KFDP_BINDGEN= for DKMS)"
echo "BINDGEN=$bindgen"
