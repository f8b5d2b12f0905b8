//! The committed header `include/gantry.h` must be what cbindgen makes of the
//! source now: a stale header fails here. `GANTRY_BLESS_HEADER=1` writes it.

use std::path::Path;

#[test]
fn committed_header_matches_the_source() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(dir.join("cbindgen.toml")).expect("cbindgen.toml");
    let bindings =
        cbindgen::Builder::new().with_crate(dir).with_config(config).generate().expect("cbindgen reads capi/src");
    let mut fresh = Vec::new();
    bindings.write(&mut fresh);
    let path = dir.join("include").join("gantry.h");
    if std::env::var_os("GANTRY_BLESS_HEADER").is_some() {
        std::fs::write(&path, &fresh).expect("write include/gantry.h");
        return;
    }
    let committed = std::fs::read(&path).unwrap_or_default();
    assert!(
        committed == fresh,
        "capi/include/gantry.h is stale: run `GANTRY_BLESS_HEADER=1 cargo test -p gantry-capi --test header` and commit it"
    );
}
