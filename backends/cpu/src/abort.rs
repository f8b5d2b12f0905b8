//! The CPU backend's abort callback and the node loop that polls it. The
//! callback is installed from any thread ([`AbortSlot::set`]) and is usually
//! a flag another thread raises; each compute takes the callback installed
//! when it starts and polls it before every node. Built from
//! [`gantry_engine::sync`], so `tests/loom_cpu.rs` checks it in every
//! interleaving.

use gantry_engine::sync::{Mutex, lock};
use gantry_engine::{AbortCallback, ComputeStatus};

/// Where a backend keeps its abort callback.
#[derive(Default)]
pub struct AbortSlot(Mutex<Option<AbortCallback>>);

impl AbortSlot {
    /// Installs (or removes, with `None`) the callback; computes that start
    /// later poll it.
    pub fn set(&self, callback: Option<AbortCallback>) {
        *lock(&self.0) = callback;
    }

    /// The callback installed now (taken once per compute, so the lock is
    /// not held while nodes run).
    pub fn current(&self) -> Option<AbortCallback> {
        lock(&self.0).clone()
    }
}

/// Runs `run` on each of `nodes` in order, polling `abort` before each: when
/// it returns `true` the loop stops with [`ComputeStatus::Aborted`], so no
/// node starts after the callback has said stop. The first status other
/// than success ends the loop and is returned.
pub fn run_nodes<N: Copy>(
    nodes: &[N],
    abort: Option<&AbortCallback>,
    mut run: impl FnMut(N) -> ComputeStatus,
) -> ComputeStatus {
    for &node in nodes {
        if abort.is_some_and(|stop| stop()) {
            return ComputeStatus::Aborted;
        }
        let status = run(node);
        if !status.is_success() {
            return status;
        }
    }
    ComputeStatus::Success
}
