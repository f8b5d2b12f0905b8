//! Random graphs, devices, weights, pins and pipeline settings through the
//! scheduler, checked against a CPU-only reference
//! (`gantry_backends::testing::sched_fuzz` says which invariants).
//!
//! Run with `RUSTC_BOOTSTRAP=1 cargo fuzz run sched fuzz/seeds/sched` from
//! the repository root. Inputs that broke an invariant are kept in
//! `fuzz/regressions/sched/` and replayed by `tests/sched_fuzz_regressions.rs`.
#![no_main]

use gantry_backends::testing::sched_fuzz::{SchedCase, run_case};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|case: SchedCase| {
    if let Err(violation) = run_case(&case) {
        panic!("{violation}\n{case:#?}");
    }
});
