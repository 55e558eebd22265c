//! `include/tenure.h` is what cbindgen makes of the crate: regenerated
//! here and compared, so CI checks it without a cbindgen binary. After a
//! change to the ABI, regenerate it with
//! `TENURE_BLESS=1 cargo test --release -p tenure-ffi --test header`.

use std::path::Path;

#[test]
fn header_matches_the_committed_include_tenure_h() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(dir.join("cbindgen.toml")).expect("ffi/cbindgen.toml");
    let mut generated = Vec::new();
    cbindgen::Builder::new()
        .with_crate(dir)
        .with_config(config)
        .generate()
        .expect("cbindgen reads the crate")
        .write(&mut generated);
    let path = dir.join("include").join("tenure.h");
    if std::env::var_os("TENURE_BLESS").is_some() {
        std::fs::write(&path, &generated).expect("write include/tenure.h");
        return;
    }
    let committed = std::fs::read(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "{} is out of date: regenerate it with `TENURE_BLESS=1 cargo test --release -p tenure-ffi --test header`",
        path.display()
    );
}
