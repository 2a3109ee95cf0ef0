#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The Debian packages (scripts/build-debs.sh, `make debs`), on the host,
# without installing them: they build and lintian reports no error; both
# are extracted (dpkg-deb -x) into a throwaway root, which must hold what
# they promise (binaries, libkfdpreempt.so.1 with its SONAME and link
# symlink, the header, the systemd unit, the conffiles, the udev rule, the
# modprobe.d file, the DKMS source tree, the man pages); the extracted CLI,
# daemon and library run; and the real `dkms` builds the module from the
# extracted /usr/src tree, in a scratch DKMS tree, for the test kernel (as
# tests/dkms/dkms_test.sh does from scripts/dkms-source.sh); that module
# loads in the test VM, where info_test passes and the packaged CLI's
# `kfd-preempt info` answers. Nothing is installed, loaded or started on
# the host. KTAP, and a last line "N passed, M failed".
#
# usage: debs_test.sh [--prebuilt]   (--prebuilt: test out/debs as it is)
set -uo pipefail
. "$(dirname "$0")/../../scripts/lib.sh"

. "$(dirname "$0")/../lib/ktap.sh"
# Say which of the listed expectations failed, as KTAP diagnostics.
expect() {
	local what=$1
	shift
	if "$@"; then return 0; fi
	echo "# missing or wrong: $what"
	return 1
}

prebuilt=0
[ "${1:-}" = --prebuilt ] && prebuilt=1
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
out=$KFDP_ROOT/out/debs
version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$KFDP_ROOT/userspace/Cargo.toml" | head -n1)
arch=$(dpkg --print-architecture)
triplet=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
root=$scratch/root
src=$root/usr/src/kfd_preempt-$version

ktap_header
ktap_plan 14

# 1. The packages build, and lintian reports no error that is not explained.
if [ "$prebuilt" = 1 ]; then
	skip "debs_build_and_lintian" "--prebuilt: testing $out as it is"
else
	start=$(date +%s)
	"$KFDP_ROOT/scripts/build-debs.sh" >"$scratch/build.log" 2>&1
	rc=$?
	echo "# build-debs.sh: $(($(date +%s) - start)) s, exit $rc"
	grep -E '^  [EWIXPO]: ' "$scratch/build.log" | sed 's/^  /# lintian /'
	[ "$rc" = 0 ] || sed 's/^/# /' "$scratch/build.log" | tail -n 40
	check $rc "debs_build_and_lintian"
fi

dkms_deb=$out/kfd-preempt-dkms_${version}_all.deb
user_deb=$out/kfd-preempt_${version}_${arch}.deb
mkdir -p "$root" "$scratch/ctrl-dkms" "$scratch/ctrl-user"
extracted=1
for d in "$dkms_deb" "$user_deb"; do
	if [ ! -f "$d" ]; then
		echo "# no ${d#"$KFDP_ROOT"/}"
		extracted=0
	fi
done
if [ "$extracted" = 1 ]; then
	dpkg-deb -x "$dkms_deb" "$root" && dpkg-deb -x "$user_deb" "$root" &&
		dpkg-deb -e "$dkms_deb" "$scratch/ctrl-dkms" &&
		dpkg-deb -e "$user_deb" "$scratch/ctrl-user" || extracted=0
fi
if [ "$extracted" = 0 ]; then
	for t in package_metadata userspace_files library_soname_and_symlink \
		capi_program_links_and_runs conffiles unit_neither_enabled_nor_started \
		dkms_package_files dkms_tree_is_dkms_source cli_version \
		daemon_checks_the_sample_config man_pages_render \
		dkms_build_from_the_package_for_the_test_kernel \
		packaged_module_loads_and_answers_info; do
		nok "$t # the packages could not be extracted"
	done
	ktap_summary
	exit 1
fi

# 2. Control fields: the module source is arch-independent and needs dkms;
# the user space is built for this architecture and depends on its libraries.
f() { dpkg-deb -f "$1" "$2"; }
expect "kfd-preempt-dkms Architecture all" [ "$(f "$dkms_deb" Architecture)" = all ] &&
	expect "kfd-preempt-dkms Depends dkms" grep -q '\bdkms\b' <<<"$(f "$dkms_deb" Depends)" &&
	expect "kfd-preempt Architecture $arch" [ "$(f "$user_deb" Architecture)" = "$arch" ] &&
	expect "kfd-preempt Depends libc6 (shlibs)" grep -q '\blibc6\b' <<<"$(f "$user_deb" Depends)" &&
	expect "both at version $version" [ "$(f "$dkms_deb" Version)" = "$version" ] &&
	expect "both at version $version" [ "$(f "$user_deb" Version)" = "$version" ]
check $? "package_metadata"

# 3. What kfd-preempt holds.
unit=
for d in lib usr/lib; do
	[ -f "$root/$d/systemd/system/kfd-preemptd.service" ] &&
		unit=$root/$d/systemd/system/kfd-preemptd.service
done
lib=$root/usr/lib/$triplet
expect "/usr/bin/kfd-preempt" [ -x "$root/usr/bin/kfd-preempt" ] &&
	expect "/usr/bin/kfd-preemptd" [ -x "$root/usr/bin/kfd-preemptd" ] &&
	expect "no kfdp-scenario (a developer tool)" [ ! -e "$root/usr/bin/kfdp-scenario" ] &&
	expect "/usr/include/kfdpreempt.h" cmp -s "$root/usr/include/kfdpreempt.h" \
		"$KFDP_ROOT/userspace/kfd-preempt-capi/include/kfdpreempt.h" &&
	expect "the systemd unit, as packaging/systemd/kfd-preemptd.service" \
		cmp -s "$unit" "$KFDP_ROOT/packaging/systemd/kfd-preemptd.service" &&
	expect "/etc/kfd-preemptd.toml, as packaging/kfd-preemptd.toml" \
		cmp -s "$root/etc/kfd-preemptd.toml" "$KFDP_ROOT/packaging/kfd-preemptd.toml" &&
	expect "man pages" [ -f "$root/usr/share/man/man1/kfd-preempt.1.gz" ] &&
	expect "man pages" [ -f "$root/usr/share/man/man8/kfd-preemptd.8.gz" ] &&
	expect "copyright" [ -f "$root/usr/share/doc/kfd-preempt/copyright" ]
check $? "userspace_files"

# 4. libkfdpreempt.so.1: a real file with that SONAME, the link-time name a
# symlink to it, and only the C ABI exported.
syms=$(nm -D --defined-only "$lib/libkfdpreempt.so.1" 2>/dev/null | awk '{print $3}')
expect "libkfdpreempt.so.1, a file" [ -f "$lib/libkfdpreempt.so.1" ] &&
	expect "libkfdpreempt.so.1, not a symlink" [ ! -L "$lib/libkfdpreempt.so.1" ] &&
	expect "SONAME libkfdpreempt.so.1" grep -q 'Library soname: \[libkfdpreempt.so.1\]' \
		<<<"$(readelf -d "$lib/libkfdpreempt.so.1")" &&
	expect "libkfdpreempt.so -> libkfdpreempt.so.1" \
		[ "$(readlink "$lib/libkfdpreempt.so")" = libkfdpreempt.so.1 ] &&
	expect "exports kfdpreempt_* only" [ -n "$syms" ] &&
	expect "exports kfdpreempt_* only" [ -z "$(grep -v '^kfdpreempt_' <<<"$syms")" ] &&
	expect "shlibs" grep -qx "libkfdpreempt 1 kfd-preempt (>= $version)" "$scratch/ctrl-user/shlibs"
check $? "library_soname_and_symlink"

# 5. A C program built against the packaged header and library only: it
# records the SONAME and runs (the device is absent on the host, so
# kfdpreempt_open fails with a negative errno and a message).
cat >"$scratch/capi.c" <<'EOF'
#include <stdio.h>
#include <kfdpreempt.h>

int main(void)
{
	struct kfdpreempt_device *dev = NULL;
	int32_t r = kfdpreempt_open(&dev);

	if (r == 0) {
		kfdpreempt_close(dev);
		puts("opened /dev/kfd_preempt");
		return 0;
	}
	printf("kfdpreempt_open: %d: %s\n", r, kfdpreempt_last_error());
	return r < 0 ? 0 : 1;
}
EOF
gcc -std=gnu11 -Wall -Wextra -Werror -I"$root/usr/include" -o "$scratch/capi" "$scratch/capi.c" \
	-L"$lib" -lkfdpreempt >"$scratch/cc.log" 2>&1 &&
	readelf -d "$scratch/capi" | grep -q 'Shared library: \[libkfdpreempt.so.1\]' &&
	out_c=$(LD_LIBRARY_PATH=$lib "$scratch/capi" 2>&1) &&
	grep -q "$lib/libkfdpreempt.so.1" <<<"$(LD_LIBRARY_PATH=$lib ldd "$scratch/capi")"
rc=$?
sed 's/^/# /' "$scratch/cc.log"
[ -z "${out_c:-}" ] || echo "# $out_c"
check $rc "capi_program_links_and_runs"

# 6. The files an administrator edits are conffiles.
expect "/etc/kfd-preemptd.toml a conffile" grep -qx /etc/kfd-preemptd.toml \
	"$scratch/ctrl-user/conffiles" &&
	expect "/etc/modprobe.d/kfd-preempt.conf a conffile" grep -qx /etc/modprobe.d/kfd-preempt.conf \
		"$scratch/ctrl-dkms/conffiles"
check $? "conffiles"

# 7. Installing never enables or starts kfd-preemptd (dh_installsystemd
# --no-enable --no-start); an upgrade restarts it only if it runs; removal
# stops it.
pi=$scratch/ctrl-user/postinst
expect "no start in postinst" eval '! grep -Eq "deb-systemd-invoke (start|restart) " "$pi"' &&
	expect "enable only if it was enabled" eval '! grep -q "deb-systemd-helper enable" "$pi" ||
		grep -q "was-enabled" "$pi"' &&
	expect "try-restart on upgrade" grep -q "deb-systemd-invoke try-restart 'kfd-preemptd.service'" "$pi" &&
	expect "stop on removal" grep -q 'deb-systemd-invoke stop kfd-preemptd.service' \
		"$scratch/ctrl-user/prerm"
check $? "unit_neither_enabled_nor_started"

# 8. What kfd-preempt-dkms holds: the DKMS source tree (never a built
# module), the udev rule and the modprobe.d file, and DKMS's maintainer
# scripts.
rules=
for d in lib usr/lib; do
	[ -f "$root/$d/udev/rules.d/70-kfd-preempt.rules" ] && rules=$root/$d/udev/rules.d/70-kfd-preempt.rules
done
built=$(find "$src" \( -name '*.ko' -o -name '*.o' -o -name '*_generated.rs' -o -name '*.mod' \) 2>/dev/null)
expect "dkms.conf" grep -q "^PACKAGE_VERSION=\"$version\"" "$src/dkms.conf" &&
	expect "dkms.conf" grep -q '^PACKAGE_NAME="kfd_preempt"' "$src/dkms.conf" &&
	expect "the module source" [ -f "$src/Kbuild" ] &&
	expect "the module source" [ -f "$src/src/kfd_preempt_main.rs" ] &&
	expect "the module source" [ -x "$src/dkms-build.sh" ] &&
	expect "no build products" [ -z "$built" ] &&
	expect "udev rule, as packaging/udev/70-kfd-preempt.rules" \
		cmp -s "$rules" "$KFDP_ROOT/packaging/udev/70-kfd-preempt.rules" &&
	expect "modprobe.d file, as packaging/modprobe.d/kfd-preempt.conf" \
		cmp -s "$root/etc/modprobe.d/kfd-preempt.conf" "$KFDP_ROOT/packaging/modprobe.d/kfd-preempt.conf" &&
	expect "postinst: dkms, and the group gpusched" grep -q common.postinst "$scratch/ctrl-dkms/postinst" &&
	expect "postinst: dkms, and the group gpusched" grep -q 'addgroup --system --quiet gpusched' \
		"$scratch/ctrl-dkms/postinst" &&
	expect "prerm: dkms remove" grep -q 'dkms remove' "$scratch/ctrl-dkms/prerm"
check $? "dkms_package_files"

# 9. The packaged tree is what scripts/dkms-source.sh (`make dkms-source`)
# writes.
"$KFDP_ROOT/scripts/dkms-source.sh" "$scratch/dkms-source" >/dev/null &&
	diff -r "$scratch/dkms-source/kfd_preempt-$version" "$src" >"$scratch/diff" 2>&1
rc=$?
sed 's/^/# /' "$scratch/diff" | head -n 20
check $rc "dkms_tree_is_dkms_source"

# 10-11. The extracted binaries run.
v=$("$root/usr/bin/kfd-preempt" --version 2>&1)
echo "# $v"
[ "$v" = "kfd-preempt $version" ] && [ "$("$root/usr/bin/kfd-preemptd" --version 2>&1)" = "kfd-preemptd $version" ]
check $? "cli_version"

out_d=$("$root/usr/bin/kfd-preemptd" --check-config "$root/etc/kfd-preemptd.toml" 2>&1)
rc=$?
echo "# $out_d"
check $rc "daemon_checks_the_sample_config"

# 12. The man pages render without groff warnings, and kfd-preempt(1)
# documents every subcommand: the operator's only (bench, chart and
# sim-tenant are the unpackaged kfdp-scenario's).
man_ok=0
for m in man1/kfd-preempt.1.gz man8/kfd-preemptd.8.gz; do
	w=$(zcat "$root/usr/share/man/$m" | groff -man -Tutf8 -ww -z 2>&1)
	[ -z "$w" ] || { man_ok=1; sed "s|^|# $m: |" <<<"$w"; }
done
for c in $("$root/usr/bin/kfd-preempt" --help | sed -n '/^Commands:/,/^$/s/^  \([a-z][a-z-]*\) .*/\1/p' | grep -vx help); do
	zcat "$root/usr/share/man/man1/kfd-preempt.1.gz" | grep -q "^\.SS \"kfd-preempt $c\"" ||
		{ man_ok=1; echo "# kfd-preempt(1) lacks the subcommand $c"; }
done
for c in bench chart sim-tenant; do
	if "$root/usr/bin/kfd-preempt" "$c" --help >/dev/null 2>&1 ||
		zcat "$root/usr/share/man/man1/kfd-preempt.1.gz" | grep -q "^\.SS \"kfd-preempt $c\""; then
		man_ok=1
		echo "# the packaged kfd-preempt has the developer command $c (kfdp-scenario's)"
	fi
done
check $man_ok "man_pages_render"

# 13. DKMS builds the module from the packaged source, for the test kernel,
# in a scratch DKMS tree (the environment of tests/dkms/dkms_test.sh).
if ! command -v dkms >/dev/null; then
	skip "dkms_build_from_the_package_for_the_test_kernel" "dkms is not installed"
	skip "packaged_module_loads_and_answers_info" "dkms is not installed"
elif [ ! -r "$KFDP_CACHE/kernel-current" ]; then
	skip "dkms_build_from_the_package_for_the_test_kernel" "no test kernel: scripts/build-kernel.sh"
	skip "packaged_module_loads_and_answers_info" "no test kernel: scripts/build-kernel.sh"
else
	kb=$(kfdp_kernel_build_dir)
	kver=$(cat "$kb/include/config/kernel.release")
	export KFDP_AMDGPU_SRC=$(kfdp_kernel_src_dir)/drivers/gpu/drm/amd
	export KFDP_AMDGPU_KO=$kb/drivers/gpu/drm/amd/amdgpu/amdgpu.ko
	# The test kernel's compilers are not on PATH by their usual names.
	export KFDP_LLVM=-$KFDP_LLVM_VERSION KFDP_RUSTC=$KFDP_RUSTC KFDP_BINDGEN=$KFDP_BINDGEN
	export KFDP_MAKE_ARGS=RUST_LIB_SRC=$KFDP_RUST_LIB_SRC
	dkms_args=(--sourcetree "$root/usr/src" --dkmstree "$scratch/dkms")
	mkdir -p "$scratch/dkms"
	start=$(date +%s)
	dkms add -m kfd_preempt -v "$version" "${dkms_args[@]}" >"$scratch/add.log" 2>&1 &&
		dkms build -m kfd_preempt -v "$version" -k "$kver" --kernelsourcedir "$kb" \
			"${dkms_args[@]}" >"$scratch/dkms-build.log" 2>&1
	rc=$?
	echo "# dkms add + build: $(($(date +%s) - start)) s"
	ko=$scratch/dkms/kfd_preempt/$version/$kver/$(uname -m)/module/kfd_preempt.ko
	[ "$rc" = 0 ] || sed 's/^/# /' "$scratch/add.log" "$scratch/dkms-build.log" \
		"$scratch"/dkms/kfd_preempt/"$version"/build/make.log 2>/dev/null | tail -n 40
	[ "$rc" = 0 ] && [ -f "$ko" ] && modinfo -F vermagic "$ko" | grep -q "^$kver " &&
		modinfo -F softdep "$ko" | grep -q 'pre: amdgpu'
	rc=$?
	# The extracted source tree stays as packaged: DKMS builds in its copy.
	[ -z "$(find "$src" -name '*.o' -o -name '*.ko')" ] || {
		echo "# the build wrote into the packaged source tree"
		rc=1
	}
	check $rc "dkms_build_from_the_package_for_the_test_kernel"

	# The module DKMS built from the package, in the VM, with the packaged
	# CLI: it loads, info_test passes and `kfd-preempt info` answers.
	if [ -f "$ko" ]; then
		out=$("$KFDP_ROOT/tests/vm/run" --module "$ko" --no-kunit --kselftests info_test \
			--copy "$root/usr/bin/kfd-preempt" --quiet --out "$KFDP_ROOT/out/vm-debs" \
			-- kfd-preempt info 2>&1)
		rc=$?
		grep -E '^(vm|kselftest info_test):' <<<"$out" | sed 's/^/# /'
		[ "$rc" = 0 ] && grep -q '^kselftest info_test: [1-9][0-9]* passed, 0 failed' <<<"$out" &&
			grep -q '^abi: *1\.' "$KFDP_ROOT/out/vm-debs/results.log"
		check $? "packaged_module_loads_and_answers_info"
	else
		nok "packaged_module_loads_and_answers_info # no module built"
	fi
fi

ktap_summary
