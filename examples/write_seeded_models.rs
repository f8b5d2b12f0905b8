//! Writes every seeded random-weight model of `gantry::testing::seeded_model`
//! (each family in F32, Q8_0 and Q4_K; llama also in IQ4_NL, IQ4_XS and
//! MXFP4) into a folder, for
//! `tests/data/scripts/family_logits_llamacpp.py` to run llama.cpp on:
//!
//! ```text
//! cargo run --release --example write_seeded_models -- /tmp/seeded
//! python3 tests/data/scripts/family_logits_llamacpp.py /tmp/seeded tests/data/families
//! ```

use gantry::testing::seeded_model::{SEEDED_DTYPES, SEEDED_LOOKUP_DTYPES, SeededFamily, SeededModel};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::args().nth(1).ok_or("usage: write_seeded_models OUT_DIR")?;
    std::fs::create_dir_all(&dir)?;
    for family in SeededFamily::ALL {
        let lookup: &[_] = if family == SeededFamily::Llama { &SEEDED_LOOKUP_DTYPES } else { &[] };
        for &dtype in SEEDED_DTYPES.iter().chain(lookup) {
            let model = SeededModel::new(family, dtype);
            let path = std::path::Path::new(&dir).join(format!("{}.gguf", model.stem()));
            std::fs::write(&path, model.to_gguf()?)?;
            println!("{}", path.display());
        }
    }
    Ok(())
}
