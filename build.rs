//! Generates `include/rusparse.h` with cbindgen.
//!
//! The header is always written to `$OUT_DIR/rusparse.h` (the
//! `header_is_current` test compares it with the committed one). Outside CI
//! (`CI` unset) and unless `RUSPARSE_NO_HEADER_UPDATE` is set, it also
//! refreshes `include/rusparse.h` when the text changed, so developers never
//! edit the header by hand.

use std::path::PathBuf;

fn main() {
    // cbindgen reads the whole crate (constants re-exported at its root
    // reach the header too), so any source change may change the header.
    println!("cargo:rerun-if-changed=src");
    println!("cargo:rerun-if-changed=cbindgen.toml");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=CI");
    println!("cargo:rerun-if-env-changed=RUSPARSE_NO_HEADER_UPDATE");

    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
    let mut config =
        cbindgen::Config::from_file(root.join("cbindgen.toml")).expect("cbindgen.toml");
    let v = |k: &str| std::env::var(k).expect("package version");
    let (major, minor, patch) = (
        v("CARGO_PKG_VERSION_MAJOR"),
        v("CARGO_PKG_VERSION_MINOR"),
        v("CARGO_PKG_VERSION_PATCH"),
    );
    config.after_includes = Some(format!(
        "\n#define RUSPARSE_VER_MAJOR {major}\n#define RUSPARSE_VER_MINOR {minor}\n#define RUSPARSE_VER_PATCH {patch}\n\
         /* major * 1000 + minor * 100 + patch, as rusparseGetVersion returns. */\n\
         #define RUSPARSE_VERSION (RUSPARSE_VER_MAJOR * 1000 + RUSPARSE_VER_MINOR * 100 + RUSPARSE_VER_PATCH)\n\
         #define RUSPARSE_VERSION_STRING \"{major}.{minor}.{patch}\""
    ));
    let header = cbindgen::Builder::new()
        .with_crate(&root)
        .with_config(config)
        .generate()
        .expect("cbindgen could not generate include/rusparse.h");
    let mut text = Vec::new();
    header.write(&mut text);
    let generated = out.join("rusparse.h");
    std::fs::write(&generated, &text).expect("write $OUT_DIR/rusparse.h");
    println!(
        "cargo:rustc-env=RUSPARSE_GENERATED_HEADER={}",
        generated.display()
    );

    let update =
        std::env::var_os("CI").is_none() && std::env::var_os("RUSPARSE_NO_HEADER_UPDATE").is_none();
    let committed = root.join("include").join("rusparse.h");
    if update && std::fs::read(&committed).ok().as_deref() != Some(&text[..]) {
        if let Err(e) = std::fs::write(&committed, &text) {
            println!(
                "cargo:warning=could not refresh {}: {e}",
                committed.display()
            );
        }
    }
}
