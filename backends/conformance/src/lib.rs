//! The conformance suite (Gantry's test-backend-ops): every op of the core
//! set on many shapes, layouts, dtypes and parameters, run on a backend and
//! compared with a reference by normalized mean squared error, with ggml's
//! thresholds (1e-7 by default, 5e-4 for MUL_MAT and FLASH_ATTN_EXT, 1e-6
//! for SOFT_MAX, exact for ARGMAX and same-dtype copies).
//!
//! The CPU backend is checked against [`mod@reference`], a plain f64 scalar
//! implementation of each op; every other backend against the CPU backend.
//!
//! ```no_run
//! use gantry_conformance::{self as conformance, Filter, Mode, Reference};
//! use gantry_cpu::CpuBackend;
//! let cpu = CpuBackend::new()?;
//! let summary = conformance::run(&cpu, Reference::Scalar, &Filter::ops("MUL_MAT"), Mode::Test, &mut std::io::stdout());
//! assert_eq!(summary.failed, 0);
//! # Ok::<(), gantry_engine::Error>(())
//! ```

mod case;
mod cases;
mod compare;
pub mod ggml;
mod lookup_bytes;
pub mod reference;
mod run;

pub use case::{BuildFn, Built, Case, Init, Tolerance};
pub use compare::{Verdict, compare, nmse};
pub use run::{Filter, Mode, Reference, Summary, run};

/// Every case, test and perf.
pub fn cases() -> Vec<Case> {
    cases::all()
}
