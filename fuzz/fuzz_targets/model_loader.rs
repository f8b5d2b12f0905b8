//! A small llama or Gemma 3 GGUF built from the bytes (metadata, tokenizer
//! and tensors each as is, missing or mutated), loaded on the CPU by the real
//! model loader and, if it loads, run forward over a few tokens
//! (`gantry::fuzzing::model_loader` says what must hold).
//!
//! Run with `RUSTC_BOOTSTRAP=1 cargo fuzz run model_loader fuzz/seeds/model_loader`
//! from the repository root (`GANTRY_FUZZ_VERBOSE=1` prints how far each input
//! got). Inputs that failed are kept in `fuzz/regressions/model_loader/` and replayed by
//! `tests/models/fuzz_regressions.rs`.
#![no_main]

use gantry::fuzzing::model_loader::run;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    match run(data) {
        // `GANTRY_FUZZ_VERBOSE=1` (with `-runs=0` over a folder): how far each input got.
        Ok(outcome) if std::env::var_os("GANTRY_FUZZ_VERBOSE").is_some() => eprintln!("{outcome:?}"),
        Ok(_) => {}
        Err(broken) => panic!("{broken}"),
    }
});
