//! Writes every seeded random-weight model of `gantry::testing::seeded_model`
//! (each family in F32, Q8_0 and Q4_K; llama also in IQ4_NL, IQ4_XS and
//! MXFP4, gpt-oss also with MXFP4 experts) into a folder, or only those of
//! the families named after it, for
//! `tests/data/scripts/family_logits_llamacpp.py` to run llama.cpp on (and
//! the families llama.cpp does not compute, Mistral's window, for
//! `tests/data/scripts/llama_float64_forward.py`):
//!
//! ```text
//! cargo run --release --example write_seeded_models -- /tmp/seeded [gpt-oss ...]
//! python3 tests/data/scripts/family_logits_llamacpp.py /tmp/seeded tests/data/families
//! python3 tests/data/scripts/llama_float64_forward.py /tmp/seeded tests/data/families tests/data/families_float64
//! ```

use gantry::testing::seeded_model::{SEEDED_DTYPES, SeededFamily, SeededModel};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let dir = args.next().ok_or("usage: write_seeded_models OUT_DIR [FAMILY...]")?;
    let only: Vec<String> = args.collect();
    if let Some(bad) = only.iter().find(|n| !every().any(|f| f.name() == n.as_str())) {
        let names: Vec<_> = every().map(|f| f.name()).collect();
        return Err(format!("no seeded family {bad:?} (families: {})", names.join(", ")).into());
    }
    std::fs::create_dir_all(&dir)?;
    for family in every() {
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

/// The families checked against llama.cpp, then those checked against the float64 forward.
fn every() -> impl Iterator<Item = SeededFamily> {
    SeededFamily::ALL.into_iter().chain(SeededFamily::FLOAT64_CHECKED)
}
