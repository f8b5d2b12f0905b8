//! The engine's shared state under loom (`RUSTFLAGS="--cfg loom"`): the
//! scheduler's pipeline of copies and events, and the device state GPU
//! backends keep (`device_state`: counters, caches, queue events, batch
//! recorders, staging slots). Empty without `--cfg loom`.

mod device_state;
mod gpu_locks;
mod pipeline;
