//! The committed `include/rusparse.h` must be exactly what cbindgen
//! generates from the sources now.

#[test]
fn header_is_current() {
    let path = rusparse_header::committed_path();
    let generated = String::from_utf8(rusparse_header::generate()).expect("UTF-8 header");
    let committed = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{} cannot be read: {e}", path.display()));
    assert!(
        generated == committed,
        "{} is stale: run `cargo run -p rusparse-header` and commit the result",
        path.display()
    );
}
