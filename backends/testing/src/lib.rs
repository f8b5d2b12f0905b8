//! Fixtures for tests: a test GPU platform for machines without a GPU (not
//! registered by `default_registry`; used by the scheduler's tests, fuzz
//! target and benches), with `arbitrary` the scheduler's fuzz case, and two
//! job systems as a host writes them (`jobs`), for the CPU backend on the
//! host's threads. The remote fixtures (loopback servers, the server's fuzz
//! case) are `gantry_remote::testing`, so these do not depend on it.

mod jobs;
mod test_gpu;

pub use jobs::{HostJobs, InlineJobs};

pub use test_gpu::{SupportFn, TestGpuBackend, TestGpuDevice};
#[cfg(feature = "arbitrary")]
pub mod sched_fuzz;
