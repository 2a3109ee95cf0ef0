//! Generates the uapi types from `uapi/linux/kfd_preempt.h`, the C header
//! that is the single source of truth for the ABI, so that the crate cannot
//! disagree with it. `src/uapi.rs` then checks the generated layout against
//! the numbers the ABI documentation makes binding.

use std::{env, path::PathBuf};

fn main() {
    let root =
        PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let uapi = root.join("../../uapi");
    let check = root.join("../../src/uapi_check.h");
    println!(
        "cargo:rerun-if-changed={}",
        uapi.join("linux/kfd_preempt.h").display()
    );
    println!("cargo:rerun-if-changed={}", check.display());

    bindgen::Builder::default()
        .header(check.to_string_lossy())
        .clang_arg(format!("-I{}", uapi.display()))
        .allowlist_type("kfdp_.*")
        .allowlist_var("KFDP_.*")
        .default_enum_style(bindgen::EnumVariation::Consts)
        .derive_default(true)
        .layout_tests(false)
        .generate_comments(false)
        .generate()
        .expect("bindgen failed on uapi/linux/kfd_preempt.h")
        .write_to_file(
            PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("uapi.rs"),
        )
        .expect("cannot write the generated uapi bindings");
}
