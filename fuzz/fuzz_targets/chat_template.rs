//! A chat template from a small grammar of Jinja (loops, ranges, string
//! repetition, filters, `set`, macros, `raise_exception`, message fields)
//! and a conversation, both from the bytes, compiled and rendered by
//! Gantry's renderer (`gantry::fuzzing::chat_template` says what must hold).
//!
//! Run with `RUSTC_BOOTSTRAP=1 cargo fuzz run chat_template fuzz/seeds/chat_template -- -timeout=10`
//! from the repository root (`GANTRY_FUZZ_VERBOSE=1` prints how far each input
//! got, with the template and conversation). Inputs that failed are kept in `fuzz/regressions/chat_template/` and replayed by
//! `tests/models/fuzz_regressions.rs`.
#![no_main]

use gantry::fuzzing::chat_template::{describe, run};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    match run(data) {
        // `GANTRY_FUZZ_VERBOSE=1` (with `-runs=0` over a folder): each
        // input's template and conversation, and how far it got.
        Ok(outcome) if std::env::var_os("GANTRY_FUZZ_VERBOSE").is_some() => {
            eprintln!("{}\n{outcome:?}", describe(data).unwrap_or_default());
        }
        Ok(_) => {}
        Err(broken) => panic!("{broken}"),
    }
});
