// SPDX-License-Identifier: GPL-2.0 OR MIT
//! The shared library's soname carries the C ABI's major version
//! (`KFDPREEMPT_ABI_VERSION` in src/lib.rs), so that a program linked
//! against version 1 never loads an incompatible 2.

fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libkfdpreempt.so.1");
}
