//! The shared state of a device reached from many threads, as small generic
//! types: event points on an in-order queue, caches filled on first use, id
//! and byte counters. The wgpu backend keeps its state in these; they are
//! built from [`gantry_engine::sync`] and compiled without any device API, so
//! `tests/loom_device_state.rs` checks them in every interleaving with a
//! stand-in for the device's submissions and objects.

mod counters;
mod lazy_cache;
mod queue_events;

pub use counters::{ByteCounter, IdCounter};
pub use lazy_cache::LazyCache;
pub use queue_events::QueueEvents;
