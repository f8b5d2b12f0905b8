//! Test platforms for machines without a GPU: not registered by
//! `default_registry`, used by the scheduler's tests, fuzz target and benches.

mod test_gpu;

pub use test_gpu::{SupportFn, TestGpuBackend, TestGpuBufferType, TestGpuDevice};
#[cfg(feature = "arbitrary")]
pub mod sched_fuzz;
