//! Generates `include/rusparse.h`, the C API's header, from rusparse's
//! `ffi` module (and the constants re-exported at the crate root) with
//! cbindgen, configured by `cbindgen.toml`, and adds the version macros
//! from rusparse's `Cargo.toml`.
//!
//! The header is committed, so that building the library never needs
//! cbindgen. `cargo run -p rusparse-header` rewrites it; the test
//! `header_is_current` fails while the committed one differs from what
//! [`generate`] gives.

use std::path::{Path, PathBuf};

/// The root of the rusparse checkout (this crate's parent directory).
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("header/ sits inside the rusparse checkout")
        .to_path_buf()
}

/// Where the committed header is.
pub fn committed_path() -> PathBuf {
    root().join("include").join("rusparse.h")
}

/// rusparse's version, `(major, minor, patch)`: the first line of its
/// `Cargo.toml` that reads `version = "X.Y.Z"` (the rule CMakeLists.txt
/// and scripts/test.sh use too, so header, library and package agree).
pub fn version(manifest: &str) -> Option<(u32, u32, u32)> {
    let line = manifest
        .lines()
        .find_map(|l| l.strip_prefix("version = \"")?.strip_suffix('"'))?;
    let mut parts = line.split('.').map(|p| p.parse::<u32>().ok());
    let v = (parts.next()??, parts.next()??, parts.next()??);
    parts.next().is_none().then_some(v)
}

/// The header's text as cbindgen generates it from the sources now.
pub fn generate() -> Vec<u8> {
    let root = root();
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).expect("read Cargo.toml");
    let (major, minor, patch) =
        version(&manifest).expect("Cargo.toml has no line `version = \"X.Y.Z\"`");
    let mut config =
        cbindgen::Config::from_file(root.join("cbindgen.toml")).expect("read cbindgen.toml");
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
        .expect("cbindgen could not generate the header");
    let mut text = Vec::new();
    header.write(&mut text);
    text
}

#[cfg(test)]
mod tests {
    use super::version;

    #[test]
    fn version_is_the_first_plain_version_line() {
        let manifest = "[package]\nname = \"rusparse\"\nversion = \"1.20.3\"\n\n[dependencies]\nversion = \"9.9.9\"\n";
        assert_eq!(version(manifest), Some((1, 20, 3)));
        assert_eq!(version("rust-version = \"1.80\"\n"), None);
        assert_eq!(version("version = \"1.2\"\n"), None);
        assert_eq!(version("version = \"1.2.3.4\"\n"), None);
        assert_eq!(version("version = \"1.x.3\"\n"), None);
    }
}
