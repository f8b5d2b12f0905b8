//! Fixtures behind the `testing` feature (and in the crate's own tests): a
//! test GPU platform for machines without a GPU (not registered by
//! `default_registry`; used by the scheduler's tests, fuzz target and
//! benches), with `arbitrary` the scheduler's fuzz case, and with `remote`
//! loopback servers and the certificates to reach them.

#[cfg(feature = "remote")]
pub mod loopback;
mod test_gpu;

pub use test_gpu::{SupportFn, TestGpuBackend, TestGpuDevice};
#[cfg(feature = "arbitrary")]
pub mod sched_fuzz;
