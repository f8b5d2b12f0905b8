//! A BERT folder (`config.json`, `model.safetensors`, `tokenizer.json`)
//! built from the bytes, loaded on the CPU and, if it loads, embedding a
//! short text (`gantry::fuzzing::bert_folder` says what must hold).
//!
//! Run with `RUSTC_BOOTSTRAP=1 cargo fuzz run bert_folder fuzz/seeds/bert_folder`
//! from the repository root (`GANTRY_FUZZ_VERBOSE=1` prints how far each input
//! got). Inputs that failed are kept in `fuzz/regressions/bert_folder/` and replayed by
//! `tests/models/fuzz_regressions.rs`.
#![no_main]

use gantry::fuzzing::bert_folder::run;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    match run(data) {
        // `GANTRY_FUZZ_VERBOSE=1` (with `-runs=0` over a folder): how far each input got.
        Ok(outcome) if std::env::var_os("GANTRY_FUZZ_VERBOSE").is_some() => eprintln!("{outcome:?}"),
        Ok(_) => {}
        Err(broken) => panic!("{broken}"),
    }
});
