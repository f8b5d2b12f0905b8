//! Bytes from the network into `gantry rpc-server`'s decoder: raw frames,
//! or graphs built from the bytes and encoded as a client would, through a
//! session serving a CPU device (`gantry_backends::remote::testing::remote_fuzz`
//! says what must hold: every frame answered, the session still serving).
//!
//! Run with `RUSTC_BOOTSTRAP=1 cargo fuzz run remote_server fuzz/seeds/remote_server`
//! from the repository root. Inputs that failed are kept in
//! `fuzz/regressions/remote_server/` and replayed by
//! `tests/remote_fuzz_regressions.rs`.
#![no_main]

use gantry_backends::remote::testing::remote_fuzz::run;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(broken) = run(data) {
        panic!("{broken}");
    }
});
