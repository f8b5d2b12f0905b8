//! Fixtures for tests and benches across the workspace, behind the
//! `testing` feature (and always in the engine's own unit tests); not part
//! of the production API.
//!
//! - [`TestBufferType`]: the one test buffer type — host memory, device-like
//!   memory, or virtual memory (a size, no bytes), any alignment, maximum
//!   size, read-only or not;
//! - [`mock_devices`]: devices and backends that place but do not compute,
//!   for the scheduler's placement systems;
//! - [`CountingAllocator`]: a global allocator counting heap allocations, for
//!   the zero-allocation tests;
//! - [`interpreter`]: a small F32 interpreter computing a graph through its
//!   placements, and [`liveness`]: an independent check that no two live
//!   tensors share bytes — the allocator's oracles.

mod counting_alloc;
pub mod interpreter;
pub mod liveness;
pub mod mock_devices;
mod test_buffer;

pub use counting_alloc::CountingAllocator;
pub use test_buffer::TestBufferType;
