//! `cargo run -p rusparse-header`: rewrites `include/rusparse.h` from the
//! sources when it differs (after a change to rusparse's C API, `ffi`).

fn main() {
    let path = rusparse_header::committed_path();
    let text = rusparse_header::generate();
    if std::fs::read(&path).ok().as_deref() == Some(&text[..]) {
        println!("{} is current", path.display());
        return;
    }
    if let Err(e) = std::fs::write(&path, &text) {
        eprintln!("could not write {}: {e}", path.display());
        std::process::exit(1);
    }
    println!("rewrote {}", path.display());
}
