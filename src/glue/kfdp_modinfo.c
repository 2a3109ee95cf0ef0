// SPDX-License-Identifier: GPL-2.0
/*
 * Module metadata the Rust module! macro cannot express. kfd_preempt
 * imports no amdgpu symbol (it reaches amdkfd through the KFD file and the
 * node structures), so modprobe would not load amdgpu first on its own;
 * loaded before it, the module would find no KFD node to work on.
 */
#include <linux/module.h>

MODULE_SOFTDEP("pre: amdgpu");
