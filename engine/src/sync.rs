//! The synchronization types Gantry's shared state is built from: `std`'s in
//! normal builds, [loom](https://docs.rs/loom)'s under `--cfg loom`, so the
//! model-checking tests (`tests/loom_*.rs`) explore every interleaving of the
//! real types rather than of a copy.
//!
//! Run them with
//! `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test --release -p gantry-engine --test loom_pipeline`.
//!
//! Under loom these types only work inside `loom::model`; a value built from
//! them must be created there too.

#[cfg(loom)]
pub use loom::sync::{Arc, Condvar, Mutex, MutexGuard, atomic};
#[cfg(loom)]
pub use loom::thread;

#[cfg(not(loom))]
pub use std::sync::{Arc, Condvar, Mutex, MutexGuard, atomic};
#[cfg(not(loom))]
pub use std::thread;

/// Locks `mutex`, ignoring poisoning: the types guarded here keep no
/// invariant that a panic halfway through an update could break (each update
/// is a single assignment or insertion).
pub fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Waits on `condvar` with `guard`, ignoring poisoning (see [`lock`]).
pub fn wait<'a, T>(condvar: &Condvar, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
    condvar.wait(guard).unwrap_or_else(|poisoned| poisoned.into_inner())
}
