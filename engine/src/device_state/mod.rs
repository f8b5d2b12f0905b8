//! The shared state of a device reached from many threads, as small generic
//! types: event points on an in-order queue, caches filled on first use, id
//! and byte counters, the error log, the read-back staging buffer, the
//! command recorder and the latest of the device's own submissions. The
//! wgpu backend keeps its state in these; they are built from
//! [`crate::sync`] and compiled without any device API, so
//! `tests/loom_device_state.rs` and `tests/loom_gpu_locks.rs` check them in
//! every interleaving with stand-ins for the device's submissions and
//! objects.

mod batch_recorder;
mod counters;
mod error_log;
mod lazy_cache;
mod own_submissions;
mod poisoned;
mod queue_events;
mod staging_slot;

pub use batch_recorder::{Batch, BatchRecorder, CommandBatch};
pub use counters::{ByteCounter, IdCounter};
pub use error_log::ErrorLog;
pub use lazy_cache::LazyCache;
pub use own_submissions::OwnSubmissions;
pub use poisoned::Poisoned;
pub use queue_events::QueueEvents;
pub use staging_slot::{Staging, StagingSlot};
