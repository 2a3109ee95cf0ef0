#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Build the userspace crates (release) and what the test VM runs of them:
#   out/userspace/bin/   kfd-preempt (the CLI), kfd-preemptd (the daemon),
#                        kfdp-scenario (the developer tool: the scenario's
#                        tenants, bench, chart, sim-tenant), the crate's VM
#                        integration tests, put on PATH in the VM
#   out/kselftest/       KTAP programs the VM runs with the kselftests:
#                        the C example linked statically and dynamically,
#                        the crate's integration tests and the CLI test
set -euo pipefail
. "$(dirname "$0")/lib.sh"

us=$KFDP_ROOT/userspace
bin=$KFDP_ROOT/out/userspace/bin
ksft=$KFDP_ROOT/out/kselftest
mkdir -p "$bin" "$ksft"

(cd "$us" && cargo build --release --workspace --quiet)
install -m 0755 "$us/target/release/kfd-preempt" "$bin/kfd-preempt"
# The daemon, and the developer tool (not packaged): the scenario's
# workloads and report, the bench and its chart, and the simulated tenant
# that the bench, cli_test, crate_vm_test and the demo start.
install -m 0755 "$us/target/release/kfd-preemptd" "$bin/kfd-preemptd"
install -m 0755 "$us/target/release/kfdp-scenario" "$bin/kfdp-scenario"
vm_tests=$(cd "$us" && cargo test --release -p kfd-preempt --test vm --no-run 2>&1 |
	grep -o 'target/release/deps/vm-[0-9a-f]*' | tail -n1)
[ -n "$vm_tests" ] || kfdp_die "cannot find the crate's VM integration test binary"
install -m 0755 "$us/$vm_tests" "$bin/kfd_preempt_vm_tests"

capi=$us/kfd-preempt-capi
lib=$us/target/release
cflags=(-std=gnu11 -O2 -Wall -Wextra -Werror -I"$capi/include" -I"$KFDP_ROOT/uapi")
gcc "${cflags[@]}" -o "$ksft/capi_example_static" "$capi/examples/preempt_sim_tenant.c" \
	"$lib/libkfdpreempt.a" -lgcc_s -lutil -lrt -lpthread -lm -ldl
# The shared library is libkfdpreempt.so.1 to the dynamic loader (its
# SONAME, the C ABI's major version): link name and soname both resolve.
readelf -d "$lib/libkfdpreempt.so" | grep -q 'Library soname: \[libkfdpreempt.so.1\]' ||
	kfdp_die "libkfdpreempt.so lacks the SONAME libkfdpreempt.so.1"
ln -sf libkfdpreempt.so "$lib/libkfdpreempt.so.1"
gcc "${cflags[@]}" -o "$ksft/capi_example_shared" "$capi/examples/preempt_sim_tenant.c" \
	-L"$lib" -Wl,-rpath,"$lib" -lkfdpreempt
install -m 0755 "$KFDP_ROOT/tests/vm/crate_vm_test.sh" "$ksft/crate_vm_test"
install -m 0755 "$KFDP_ROOT/tests/vm/cli_test.sh" "$ksft/cli_test"
install -m 0755 "$KFDP_ROOT/tests/vm/doctor_test.sh" "$ksft/doctor_test"
install -m 0755 "$KFDP_ROOT/tests/vm/daemon_test.sh" "$ksft/daemon_test"
install -m 0755 "$KFDP_ROOT/tests/vm/hint_test.sh" "$ksft/hint_test"
