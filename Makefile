# SPDX-License-Identifier: GPL-2.0
#
# kfd_preempt top-level Makefile.
#
#   make                 build kfd_preempt.ko against the test kernel (after
#                        scripts/build-kernel.sh) or KDIR=<built kernel tree>
#   make check           provision everything and run every test suite
#   make demo            provision everything and run the demo in the VM
#   make bench           run kfdp-scenario bench on simulated nodes in the VM,
#                        on the bench kernel and the debug kernel
#                        (results in out/bench/)
#   make profile         function_graph profile of PREEMPT and friends on the
#                        bench kernel (out/profile/summary.txt); with
#                        BASELINE=<rev>, times that revision's module against
#                        this one in one run (out/profile/compare.txt)
#   make scenario        the latency-critical/best-effort scenarios with and
#                        without kfd-preemptd in the VM on the bench kernel
#                        (SCENARIO_KERNEL=test: the debug one; out/scenario/)
#   make soak            kfd-preemptd against the tenant zoo (processes that
#                        fork, exec, re-create queues, die) in the debug VM,
#                        checked all along (DURATION=1800 SEED=<time> NODES=4
#                        REUSE=0; out/soak/)
#   make fuzz            a kfdp-fuzz campaign in the VM on the KCOV kernel
#                        (SECONDS=1800 SEED=<time>; corpus kept in
#                        $KFDP_CACHE/fuzz; results and coverage in out/fuzz/)
#   make docs            Documentation/ as HTML in out/docs (Sphinx, -W)
#   make dkms-source     the DKMS source tree, out/dkms/kfd_preempt-<version>
#   make debs            the Debian packages kfd-preempt-dkms and kfd-preempt,
#                        out/debs/*.deb (dpkg-buildpackage, then lintian)
#   make lint            rustfmt check and checkpatch (scripts/lint.sh);
#                        scripts/build-module.sh is the W=1 + CLIPPY=1 build
#
# On a real host:  make KDIR=/lib/modules/$(uname -r)/build \
#                       AMDGPU_SRC=<the running amdgpu's drivers/gpu/drm/amd>
#                  (the compilers are the kernel's own, from its .config)

# Defaults for the project's own test kernel; any of them can be overridden
# on the command line (KDIR=, LLVM=, RUSTC=, BINDGEN=, RUST_LIB_SRC=), and
# LLVM=, RUSTC= and BINDGEN= must name the kernel's own compilers.
ifeq ($(origin KDIR),undefined)
$(foreach a,$(shell scripts/kmake-args.sh),$(eval $(a)))
# The test kernel runs the KUnit suites at insmod; any other kernel gets
# them only when asked for (KFDP_KUNIT=1), see Kbuild.
KFDP_KUNIT ?= 1
# ...and the fuzzer's KCOV coverage of the module (Kbuild; the test
# kernel has CONFIG_KCOV, scripts/vm-kernel-kcov.config).
KFDP_KCOV ?= 1
endif
KFDP_KUNIT ?= 0
KFDP_KCOV ?= 0

# The kernel's own compilers, read from its .config by
# scripts/kernel-toolchain.sh (CC= for a GCC-built kernel, LLVM= for a
# clang-built one, its exact rustc and bindgen); LLVM=, RUSTC= and BINDGEN=
# given here are checked against it, and a mismatch refuses the build.
ifneq ($(KDIR),)
ifneq ($(filter all modules,$(or $(MAKECMDGOALS),all)),)
KFDP_TOOLCHAIN := $(shell LLVM='$(LLVM)' RUSTC='$(RUSTC)' BINDGEN='$(BINDGEN)' \
	sh $(CURDIR)/scripts/kernel-toolchain.sh '$(KDIR)' || echo KFDP_REFUSED)
ifneq ($(filter KFDP_REFUSED,$(KFDP_TOOLCHAIN)),)
$(error not building for $(KDIR) with other compilers than its own (above))
endif
ifeq ($(wildcard $(KDIR)/rust/libkernel.rmeta),)
$(error $(KDIR) has no Rust metadata (rust/libkernel.rmeta; Debian's headers have none): build against the tree that sudo scripts/kernel-rust-metadata.sh $$(uname -r) $(KDIR) prepares from the kernel's source (Documentation/building.rst))
endif
endif
endif

KMAKE = $(MAKE) -C $(KDIR) M=$(CURDIR) $(KFDP_TOOLCHAIN) \
	$(if $(RUST_LIB_SRC),RUST_LIB_SRC=$(RUST_LIB_SRC)) \
	$(if $(AMDGPU_SRC),AMDGPU_SRC=$(AMDGPU_SRC)) KFDP_KUNIT=$(KFDP_KUNIT) \
	KFDP_KCOV=$(KFDP_KCOV) \
	$(if $(KFDP_ALLOW_UNREVIEWED_AMDKFD),KFDP_ALLOW_UNREVIEWED_AMDKFD=$(KFDP_ALLOW_UNREVIEWED_AMDKFD))

.PHONY: all modules clean check demo bench profile scenario soak fuzz lint rustfmtcheck checkpatch docs dkms-source debs

all: modules

modules:
	@test -n "$(KDIR)" || { echo "no KDIR: run scripts/build-kernel.sh or pass KDIR=" >&2; exit 1; }
	$(KMAKE) modules

clean:
	@test -z "$(KDIR)" || $(KMAKE) clean
	rm -f src/*_generated.rs

check:
	scripts/check.sh

demo:
	scripts/demo.sh

bench:
	scripts/bench.sh

profile:
	scripts/profile.sh $(if $(BASELINE),--baseline $(BASELINE))

scenario:
	scripts/scenario.sh

soak:
	scripts/soak.sh

fuzz:
	scripts/fuzz.sh $(if $(SECONDS),--seconds $(SECONDS)) $(if $(SEED),--seed $(SEED))

lint:
	scripts/lint.sh

docs:
	scripts/build-docs.sh

dkms-source:
	scripts/dkms-source.sh

debs:
	scripts/build-debs.sh

rustfmtcheck:
	scripts/lint.sh rustfmt-module rustfmt-userspace

checkpatch:
	scripts/lint.sh checkpatch
