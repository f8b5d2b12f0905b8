//! Fixtures behind the `testing` feature (and in the crate's own tests): a
//! test GPU platform for machines without a GPU (not registered by
//! `default_registry`; used by the scheduler's tests, fuzz target and
//! benches), with `arbitrary` the scheduler's fuzz case, with `remote`
//! loopback servers and the certificates to reach them, and with both the
//! server decoder's fuzz case; and two job systems as a host writes them
//! (`jobs`), for the CPU backend on the host's threads.

mod jobs;
#[cfg(feature = "remote")]
pub mod loopback;
#[cfg(all(feature = "remote", feature = "arbitrary"))]
pub mod remote_fuzz;
mod test_gpu;

pub use jobs::{HostJobs, InlineJobs};

pub use test_gpu::{SupportFn, TestGpuBackend, TestGpuDevice};
#[cfg(feature = "arbitrary")]
pub mod sched_fuzz;
