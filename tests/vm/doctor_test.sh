#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# `kfd-preempt doctor` on the machine it runs on: in the test VM (the
# project's kernel, insmod, no udev, no module BTF) and in the Debian 13
# system (Debian's kernel, DKMS, udev, BTF). Where the answer depends on
# the host, each case reads the host itself and checks that doctor says
# the same; then one thing is broken on purpose (/dev/kfd_preempt made
# 0666) and doctor must fail that check and exit 4. KTAP.
cli=kfd-preempt
for ktap in "$(dirname "$0")/../lib/ktap.sh" /kfdp/lib/ktap.sh; do
	[ -f "$ktap" ] && break
done
. "$ktap"
# The status doctor gave check $1 in its JSON report $2 (pretty-printed:
# "status" is the line after "name"; neither VM has python).
status() {
	sed -n "/\"name\": \"$1\"/,/}/s/.*\"status\": \"\([a-z]*\)\".*/\1/p" "$2"
}

ktap_header
if ! command -v $cli >/dev/null || [ ! -e /sys/module/kfd_preempt ] || [ "$(id -u)" != 0 ]; then
	ktap_skip_all "needs kfd-preempt on PATH, the module loaded, and root"
fi
ktap_plan 6
mount -t debugfs none /sys/kernel/debug 2>/dev/null

$cli doctor >/tmp/doctor.txt
rc=$?
sed 's/^/# /' /tmp/doctor.txt
$cli doctor --json >/tmp/doctor.json
jrc=$?
fails_txt=$(grep -c '^FAIL ' /tmp/doctor.txt)
{ [ "$fails_txt" = 0 ] && [ $rc = 0 ] && tail -n1 /tmp/doctor.txt | grep -q '^ready:'; } ||
	{ [ "$fails_txt" -gt 0 ] && [ $rc = 4 ] && tail -n1 /tmp/doctor.txt | grep -q "^not ready: $fails_txt check"; }
check $? "doctor's exit status ($rc) and last line agree with its FAIL lines ($fails_txt)"

[ $jrc = $rc ] && grep -q '"ready": ' /tmp/doctor.json && [ "$(grep -c '"name": ' /tmp/doctor.json)" = 12 ]
check $? "doctor --json has the same verdict and all 12 checks"

# Every parameter sysfs shows, with its value.
line=$(grep "^ok   module " /tmp/doctor.txt)
all=0
for p in /sys/module/kfd_preempt/parameters/*; do
	[ -r "$p" ] || continue
	echo "$line" | grep -q " ${p##*/}=$(cat "$p")\( \|$\)" || { echo "# missing ${p##*/}"; all=1; }
done
[ "$(status module /tmp/doctor.json)" = ok ] && [ $all = 0 ]
check $? "module: loaded, with its parameters as sysfs has them"

# The layout gate's verdict, as the module's debugfs file gives it.
verdict=$(cat /sys/kernel/debug/kfd_preempt/layout)
echo "# debugfs layout: $verdict"
case $verdict in
matches*) want=ok ;;
refused) want=fail ;;
*) want=warn ;;
esac
if [ -e /sys/kernel/btf/amdgpu ]; then
	case $verdict in matches*) true ;; *) false ;; esac
else
	case $verdict in unchecked*) true ;; *) false ;; esac
fi && [ "$(status layout /tmp/doctor.json)" = $want ]
check $? "layout: $want, as the module found amdgpu's BTF"

# The device as it is: ok only if 660 root:gpusched.
mode=$(stat -c %a:%G /dev/kfd_preempt)
want=fail
[ "$mode" = 660:gpusched ] && want=ok
[ "$(status device /tmp/doctor.json)" = $want ]
check $? "device: $want for $mode"

# Broken on purpose: anyone may open the device.
saved=$(stat -c %a /dev/kfd_preempt)
chmod 0666 /dev/kfd_preempt
$cli doctor >/tmp/doctor-broken.txt
rc=$?
chmod "$saved" /dev/kfd_preempt
sed 's/^/# /' /tmp/doctor-broken.txt
[ $rc = 4 ] && grep -q '^FAIL device .*mode 666' /tmp/doctor-broken.txt &&
	grep -A1 '^FAIL device' /tmp/doctor-broken.txt | grep -q 'fix: '
check $? "a world-writable device fails, with its fix, and doctor exits 4"

ktap_finished
