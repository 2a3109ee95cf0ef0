#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Build the test-only kfdp_amdkfd_emu.ko (tests/amdkfd-emu): amdkfd's own
# queue-management sources from the test kernel's tree, kfd_preempt's glue,
# the stubs and the emulated HWS. Fails on any compiler warning and on any
# name modpost cannot resolve (a stub missing after a kernel bump).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

kdir=$(kfdp_kernel_build_dir)
mapfile -t kargs < <(kfdp_kmake_args)
log=$KFDP_ROOT/out/amdkfd-emu-build.log
mkdir -p "$KFDP_ROOT/out"
kfdp_build_warning_free kfdp_amdkfd_emu "$log" \
	make -C "$kdir" M="$KFDP_ROOT/tests/amdkfd-emu" "${kargs[@]}" -j"$KFDP_JOBS" modules
echo "built $KFDP_ROOT/tests/amdkfd-emu/kfdp_amdkfd_emu.ko"
