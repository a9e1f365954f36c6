//! The committed header must be exactly what cbindgen generates now.

#[test]
fn header_is_current() {
    let generated = std::fs::read_to_string(env!("RUSPARSE_GENERATED_HEADER")).unwrap();
    let committed =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/include/rusparse.h"))
            .expect("include/rusparse.h is missing");
    assert!(
        generated == committed,
        "include/rusparse.h is stale: run `cargo build` outside CI (CI unset) to regenerate it and commit it"
    );
}
