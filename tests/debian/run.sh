#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# kfd_preempt on a Debian 13 host exactly as an operator has it: Debian's
# own, unmodified binary kernels (linux-image-7.3.4+deb13-amd64 and
# 7.2.12+deb13-amd64, GCC-built, rustc 1.85.1) with their own modules, and
# nothing of the project's toolchain.
#
#  1. A trixie root filesystem from Debian's packages (tests/debian/packages:
#     the kernels, their headers and source, dkms, gcc-14, rustc, bindgen),
#     made with mmdebstrap and cached under $KFDP_CACHE/debian13 by that list.
#  2. In a copy of it, the two packages of `make debs` are installed with
#     apt, offline: kfd-preempt-dkms's postinst has DKMS build the module
#     for both kernels with each kernel's own compilers, making the Rust
#     metadata the headers lack from linux-source (cached in
#     $KFDP_CACHE/debian13/kernels, the system's /var/cache/kfd-preempt/
#     kernels, across runs).
#  3. The system, with the tests (out/kselftest, kfdp-scenario and the
#     crate's VM tests; kfd-preempt and kfd-preemptd are the package's), is
#     written to an ext4 disk image and booted in QEMU (TCG) from Debian's
#     own vmlinuz and initramfs, once per kernel; systemd starts
#     kfdp-debian-test.service (tests/debian/guest-run): modprobe, the
#     kselftests, the CLI's and the daemon's tests, rmmod; tests/vm/ktap.py
#     judges each boot.
#
# KTAP-like output per boot, then one line "debian: N passed, M failed,
# K skipped" totalling both (each boot's cases also in out/debian/KVER/).
#
# usage: tests/debian/run.sh [--kernel KVER]   (default: both kernels)
set -euo pipefail
. "$(dirname "$0")/../../scripts/lib.sh"

here=$KFDP_ROOT/tests/debian
kernels=(7.3.4+deb13-amd64 7.2.12+deb13-amd64)
if [ "${1:-}" = --kernel ]; then
	kernels=("$2")
fi
out=$KFDP_ROOT/out/debian
cache=$KFDP_CACHE/debian13
mkdir -p "$out" "$cache/kernels"

for tool in mmdebstrap mkfs.ext4 qemu-system-x86_64; do
	command -v "$tool" >/dev/null ||
		kfdp_die "$tool is missing: run scripts/install-toolchain.sh"
done

# 1. The base system, by its package list.
mirror=$(kfdp_debian_mirror)
key=$(sed 's/#.*//; /^$/d' "$here/packages" | sha256sum | cut -c1-16)
base=$cache/rootfs-$key
if [ ! -e "$base/.complete" ]; then
	kfdp_log "building the Debian 13 system $base (mmdebstrap; a few minutes, once)"
	rm -rf "$base" "$cache"/rootfs-*
	include=$(sed 's/#.*//; /^$/d' "$here/packages" | paste -sd,)
	mmdebstrap --variant=apt --mode=root --include="$include" trixie "$base" \
		"deb $mirror trixie main" "deb $mirror trixie-backports main" \
		>"$out/mmdebstrap.log" 2>&1 ||
		{ tail -n 30 "$out/mmdebstrap.log"; kfdp_die "mmdebstrap failed ($out/mmdebstrap.log)"; }
	touch "$base/.complete"
fi

# 2. The packages, installed as an operator installs them.
debs=("$KFDP_ROOT"/out/debs/kfd-preempt-dkms_*_all.deb "$KFDP_ROOT"/out/debs/kfd-preempt_*_amd64.deb)
[ -r "${debs[0]}" ] && [ -r "${debs[1]}" ] || kfdp_die "no packages in out/debs: run make debs"
root=$cache/work
layer=$cache/layer
umount_chroot() {
	local m
	for m in var/cache/kfd-preempt/kernels dev sys proc; do
		mountpoint -q "$root/$m" 2>/dev/null && umount -R -l "$root/$m"
	done
	return 0
}
umount_all() {
	umount_chroot
	mountpoint -q "$root" 2>/dev/null && umount -l "$root"
	return 0
}
umount_all
trap umount_all EXIT
rm -rf "$root" "$layer"
mkdir -p "$root" "$layer/upper" "$layer/work"
# A throwaway layer over the cached system, so that the packages' install
# never changes it; a copy where overlayfs cannot be mounted.
if ! mount -t overlay overlay -o "lowerdir=$base,upperdir=$layer/upper,workdir=$layer/work" \
	"$root" 2>/dev/null; then
	kfdp_log "no overlayfs here: copying the Debian 13 system"
	rmdir "$root"
	cp -a "$base" "$root"
fi
mkdir -p "$root/tmp/kfdp-debs" "$root/var/cache/kfd-preempt/kernels"
cp "${debs[@]}" "$root/tmp/kfdp-debs/"
mount -t proc proc "$root/proc"
mount --rbind /sys "$root/sys"
mount --rbind /dev "$root/dev"
# Slaves, not peers, of the host's mounts: unmounting them here must not
# unmount the host's /dev/pts, /dev/shm or cgroups.
mount --make-rslave "$root/sys"
mount --make-rslave "$root/dev"
mount --bind "$cache/kernels" "$root/var/cache/kfd-preempt/kernels"
kfdp_log "apt install of kfd-preempt-dkms and kfd-preempt (DKMS builds the module for ${kernels[*]})"
# Every dependency is in the base system already: apt downloads nothing
# (the VM that runs them has no network either).
# The environment of a root shell there, not this script's (whose
# LIBCLANG_PATH names the host's LLVM, for one).
if ! chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
	DEBIAN_FRONTEND=noninteractive apt-get install -y \
	-o Acquire::Languages=none /tmp/kfdp-debs/"$(basename "${debs[0]}")" \
	/tmp/kfdp-debs/"$(basename "${debs[1]}")" >"$out/apt-install.log" 2>&1; then
	tail -n 40 "$out/apt-install.log"
	kfdp_die "apt-get install of the packages failed ($out/apt-install.log)"
fi
for k in "${kernels[@]}"; do
	if ! chroot "$root" /usr/sbin/dkms status -k "$k" kfd_preempt | grep -q ': installed'; then
		grep -E 'kfd_preempt|error|Error' "$out/apt-install.log" | tail -n 20
		log=$(ls "$root"/var/lib/dkms/kfd_preempt/*/"$k"/*/log/make.log \
			"$root"/var/lib/dkms/kfd_preempt/*/build/make.log 2>/dev/null | head -n1)
		[ -n "$log" ] && tail -n 30 "$log"
		kfdp_die "DKMS did not build and install kfd_preempt for $k ($out/apt-install.log)"
	fi
done
# The layout gate's refusal (guest-run's layout-gate-refuses-shifted): the
# package's source built as DKMS builds it, but with KFDP_TEST_SHIFT_LAYOUT=1
# (Kbuild), whose struct queue_properties starts 8 bytes later, as a glue
# built against another amdgpu's source would see it.
mkdir -p "$root/kfdp/shifted"
for k in "${kernels[@]}"; do
	kfdp_log "building kfd_preempt with a shifted amdkfd layout for $k"
	if ! chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
		KFDP_MAKE_ARGS=KFDP_TEST_SHIFT_LAYOUT=1 sh -c 'rm -rf /tmp/shifted &&
		cp -r /usr/src/kfd_preempt-*/ /tmp/shifted && cd /tmp/shifted &&
		sh ./dkms-build.sh "$1" "/lib/modules/$1/build"' sh "$k" >"$out/shifted-$k.log" 2>&1; then
		tail -n 30 "$out/shifted-$k.log"
		kfdp_die "the shifted-layout variant of kfd_preempt did not build for $k ($out/shifted-$k.log)"
	fi
	cp "$root/tmp/shifted/kfd_preempt.ko" "$root/kfdp/shifted/$k.ko"
done
rm -rf "$root/tmp/shifted"
# ROCm's amdgpu-dkms, played by a stand-in (tests/debian/amdgpu-dkms-build;
# tests/debian/amdgpu_dkms_standin_test.sh loads the results): configured
# as the kernel's own amdgpu, and configured to move a layout.
mkdir -p "$root/kfdp/amdgpu-dkms"
rm -rf "$root/tmp/standin"
cp -r "$KFDP_ROOT/tests/amdgpu-dkms-standin" "$root/tmp/standin"
install -m 0755 "$here/amdgpu-dkms-build" "$root/tmp/standin/amdgpu-dkms-build"
for k in "${kernels[@]}"; do
	for variant in same differs; do
		kfdp_log "building kfd_preempt for $k on an amdgpu-dkms stand-in configured '$variant'"
		if ! chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
			/tmp/standin/amdgpu-dkms-build "$k" "$variant" "/kfdp/amdgpu-dkms/$k.$variant.ko" \
			>"$out/amdgpu-dkms-$variant-$k.log" 2>&1; then
			tail -n 30 "$out/amdgpu-dkms-$variant-$k.log"
			kfdp_die "kfd_preempt did not build on the amdgpu-dkms stand-in ($variant) for $k ($out/amdgpu-dkms-$variant-$k.log)"
		fi
		sed -n 's/.*amdgpu-dkms-prepare.sh): \(the glue gets [0-9]* flags of [^ ]*\).*\(forced includes: .*\)/# \1, \2/p' \
			"$out/amdgpu-dkms-$variant-$k.log"
	done
done
rm -rf "$root/tmp/standin"
grep -h 'kfd_preempt (dkms):\|kfd_preempt:' "$root"/var/lib/dkms/kfd_preempt/*/*/*/log/make.log \
	2>/dev/null | sed 's/^/# /' || true
umount_chroot
rm -rf "$root/tmp/kfdp-debs"

# 3. The tests, and a system that boots from a disk and runs them.
mkdir -p "$root/kfdp/kselftest" "$root/kfdp/extra"
for t in "$KFDP_ROOT"/out/kselftest/*; do
	[ -f "$t" ] && [ -x "$t" ] && cp "$t" "$root/kfdp/kselftest/"
done
[ -n "$(ls "$root/kfdp/kselftest")" ] || kfdp_die "no kselftests in out/kselftest: run scripts/build-kselftests.sh"
# The same kselftests as the kernel's selftests Makefile installed them,
# with its run_kselftest.sh (scripts/build-kselftests.sh).
[ -x "$KFDP_ROOT/out/kselftest-install/run_kselftest.sh" ] ||
	kfdp_die "no out/kselftest-install/run_kselftest.sh: run scripts/build-kselftests.sh"
cp -r "$KFDP_ROOT/out/kselftest-install" "$root/kfdp/ksft"
# The developer tool the CLI and daemon tests start tenants with, and the
# crate's VM tests: not packaged. The CLI and the daemon are the package's.
for t in kfdp-scenario kfd_preempt_vm_tests; do
	install -m 0755 "$KFDP_ROOT/out/userspace/bin/$t" "$root/kfdp/extra/$t" ||
		kfdp_die "out/userspace/bin/$t missing: run scripts/build-userspace.sh"
done
# The hardware kit's programs and code objects, for its dry run
# (hw_kit_dry_run; scripts/build-hw-kit.sh), as in the test VM.
if [ -d "$KFDP_ROOT/out/hw/bin" ]; then
	install -m 0755 "$KFDP_ROOT"/out/hw/bin/* "$root/kfdp/extra/"
	mkdir -p "$root/kfdp/hw"
	[ -d "$KFDP_ROOT/out/hw/kernels" ] && cp -r "$KFDP_ROOT/out/hw/kernels" "$root/kfdp/hw/"
fi
install -m 0755 "$here/guest-run" "$root/kfdp/guest-run"
install -m 0755 "$here/amdgpu_dkms_standin_test.sh" "$root/kfdp/amdgpu_dkms_standin_test.sh"
install -D -m 0644 -t "$root/kfdp/lib" "$KFDP_ROOT"/tests/lib/*.sh
install -m 0644 "$here/kfdp-debian-test.service" "$root/etc/systemd/system/"
ln -sf ../kfdp-debian-test.service "$root/etc/systemd/system/multi-user.target.wants/"
echo "/dev/vda / ext4 rw,errors=remount-ro 0 1" >"$root/etc/fstab"
echo kfdp-debian >"$root/etc/hostname"
# The image: ext4, filled from the directory (no loop device, no mount).
image=$cache/disk.img
rm -f "$image"
size=$(($(du -sm "$root" | cut -f1) + 1024))
kfdp_log "writing the disk image ($size MiB)"
mkfs.ext4 -q -F -L kfdp-debian -d "$root" "$image" "${size}M"

# The guest's TSC rate (tests/vm/run says why).
tsc_args=""
tsc_helper=$KFDP_CACHE/tsc_khz
if [ ! -x "$tsc_helper" ] || [ "$KFDP_ROOT/tests/vm/tsc_khz.c" -nt "$tsc_helper" ]; then
	gcc -O2 -o "$tsc_helper" "$KFDP_ROOT/tests/vm/tsc_khz.c" 2>/dev/null || true
fi
if grep -qw constant_tsc /proc/cpuinfo && khz=$("$tsc_helper" 2>/dev/null) && [ "${khz:-0}" -gt 0 ]; then
	tsc_args="tsc_early_khz=$khz tsc=reliable clocksource=tsc"
fi

expected=()
for t in "$root"/kfdp/kselftest/*; do
	expected+=("kselftest $(basename "$t")")
done
expected+=("kselftest amdgpu_dkms_standin_test.sh" "kselftest run_kselftest.sh")
passed=0 failed=0 skipped=0 verdict=0
for k in "${kernels[@]}"; do
	dir=$out/$k
	rm -rf "$dir"
	mkdir -p "$dir"
	kfdp_log "booting Debian 13 with its own kernel $k (logs in $dir)"
	for boot in first second; do
		# -snapshot: each boot starts from the image as written.
		set +e
		timeout --foreground -k 10 "${KFDP_VM_TIMEOUT:-1500}" qemu-system-x86_64 \
			-accel tcg -smp 2 -m 3072 -nographic -no-reboot -snapshot \
			-kernel "$root/boot/vmlinuz-$k" -initrd "$root/boot/initrd.img-$k" \
			-drive "file=$image,format=raw,if=virtio" \
			-append "root=/dev/vda rw console=ttyS0 $tsc_args panic=-1" \
			-serial "file:$dir/console.log" -serial "file:$dir/results.log" \
			-monitor none -display none </dev/null >"$dir/qemu.log" 2>&1
		rc=$?
		set -e
		# The distribution's kernel died before the test service wrote a
		# line (under TCG its boot has panicked in its own code patching):
		# nothing of ours ran, so the boot, not the module, is retried,
		# once. A crash after the service started is never retried.
		if [ "$boot" = first ] && [ ! -s "$dir/results.log" ] &&
			grep -qE 'Kernel panic|Oops:' "$dir/console.log"; then
			mv "$dir/console.log" "$dir/console-first-boot.log"
			echo "# $k died before the test service started; booting it again:"
			grep -E 'Oops:|Kernel panic|RIP:' "$dir/console-first-boot.log" | head -n 4 | sed 's/^/#   /'
			continue
		fi
		break
	done
	[ "$rc" = 124 ] && echo "# kfdp-vm: host timeout" >>"$dir/results.log"
	grep -v '^# kfdp-vm: step' "$dir/results.log" || true
	set +e
	judged=$(python3 "$KFDP_ROOT/tests/vm/ktap.py" --cases "$dir/cases.tsv" "$dir/console.log" \
		"$dir/results.log" "${expected[@]}")
	jrc=$?
	echo "$judged" | sed "s/^vm: /debian $k: /"
	if [ "$jrc" != 0 ] || [ "$rc" != 0 ]; then
		verdict=1
		[ "$rc" != 0 ] && echo "FAIL: QEMU exited with status $rc"
		echo "---- last 40 lines of the console ($dir/console.log) ----"
		tail -n 40 "$dir/console.log"
	fi
	# A boot that judged nothing (ktap.py failed) counts as one failure.
	line=$(grep -E '^vm: ' <<<"$judged" | tail -n1)
	p=$(grep -Eo '[0-9]+ passed' <<<"$line" | grep -Eo '[0-9]+')
	f=$(grep -Eo '[0-9]+ failed' <<<"$line" | grep -Eo '[0-9]+')
	s=$(grep -Eo '[0-9]+ skipped' <<<"$line" | grep -Eo '[0-9]+')
	{ [ "$rc" != 0 ] || [ "$jrc" != 0 ]; } && [ "${f:-0}" = 0 ] && f=1
	passed=$((passed + ${p:-0})) failed=$((failed + ${f:-1})) skipped=$((skipped + ${s:-0}))
	set -e
done
echo "debian: $passed passed, $failed failed, $skipped skipped"
exit "$verdict"
