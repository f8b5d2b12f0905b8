//! Fixtures behind the `testing` feature (and in the crate's own tests): a
//! test GPU platform for machines without a GPU (not registered by
//! `default_registry`; used by the scheduler's tests, fuzz target and
//! benches), and, with `arbitrary`, the scheduler's fuzz case.

mod test_gpu;

pub use test_gpu::{SupportFn, TestGpuBackend, TestGpuDevice};
#[cfg(feature = "arbitrary")]
pub mod sched_fuzz;
