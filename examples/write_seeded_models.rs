//! Writes every seeded random-weight model of `gantry::testing::seeded_model`
//! (each family in F32, Q8_0 and Q4_K; llama also in IQ4_NL, IQ4_XS and
//! MXFP4, gpt-oss also with MXFP4 experts) into a folder, or only those of
//! the families named after it, for
//! `tests/data/scripts/family_logits_llamacpp.py` to run llama.cpp on:
//!
//! ```text
//! cargo run --release --example write_seeded_models -- /tmp/seeded [gpt-oss ...]
//! python3 tests/data/scripts/family_logits_llamacpp.py /tmp/seeded tests/data/families
//! ```

use gantry::testing::seeded_model::{SEEDED_DTYPES, SeededFamily, SeededModel};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let dir = args.next().ok_or("usage: write_seeded_models OUT_DIR [FAMILY...]")?;
    let only: Vec<String> = args.collect();
    if let Some(bad) = only.iter().find(|n| !SeededFamily::ALL.iter().any(|f| f.name() == n.as_str())) {
        let names: Vec<_> = SeededFamily::ALL.iter().map(|f| f.name()).collect();
        return Err(format!("no seeded family {bad:?} (families: {})", names.join(", ")).into());
    }
    std::fs::create_dir_all(&dir)?;
    for family in SeededFamily::ALL {
        if !only.is_empty() && !only.iter().any(|n| n == family.name()) {
            continue;
        }
        for &dtype in SEEDED_DTYPES.iter().chain(family.extra_dtypes()) {
            let model = SeededModel::new(family, dtype);
            let path = std::path::Path::new(&dir).join(format!("{}.gguf", model.stem()));
            std::fs::write(&path, model.to_gguf()?)?;
            println!("{}", path.display());
        }
    }
    Ok(())
}
