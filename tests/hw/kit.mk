# SPDX-License-Identifier: GPL-2.0
#
# What every program built on the hardware kit's host code needs, included
# by tests/hw/Makefile and by the kselftest Makefile (for hw_test), so that
# both build the same sources against the same HSA headers.

# The tenant drivers, the GPU helpers and the runtime loader (tests/hw/).
KIT_SRCS := kit.c kit_sim.c kit_hsa.c gpu.c hsa_api.c

# ROCm's own packages put hsa/hsa.h under /opt/rocm/include, Debian's under
# /usr/include.
HSA_INCLUDE ?= $(firstword $(wildcard /opt/rocm/include) /usr/include)
