//! The CPU backend's abort callback and the node loop that polls it. The
//! callback is installed from any thread ([`AbortSlot::set`]) and is usually
//! a flag another thread raises; each compute takes the callback installed
//! when it starts ([`Stop`]) and polls it before every node and, once
//! armed, between the chunks of each kernel's work ([`crate::Par`]), so a
//! single long node stops too (a server's compute deadline must end a
//! client's huge product, not wait for it). Built from
//! [`gantry_engine::sync`], so `tests/loom_cpu.rs` checks it in every
//! interleaving.

use gantry_engine::sync::atomic::{AtomicBool, Ordering};
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

/// One compute's abort callback, as its node loop and kernels poll it.
///
/// Once a poll has said stop, every later poll says stop without calling
/// the callback again, and [`Stop::raised`] tells the node loop that the
/// node it just ran was cut short. Kernels poll from whichever pool thread
/// runs a chunk, so the callback must be cheap and callable from any thread
/// (as [`AbortCallback`]'s `Send + Sync` says).
pub struct Stop {
    callback: Option<AbortCallback>,
    raised: AtomicBool,
}

impl Stop {
    /// A stop over `callback`; `None` never says stop.
    pub fn new(callback: Option<AbortCallback>) -> Self {
        Self { callback, raised: AtomicBool::new(false) }
    }

    /// Whether a callback is installed (kernels split their work finer only then).
    pub fn is_armed(&self) -> bool {
        self.callback.is_some()
    }

    /// Whether to stop now: asks the callback unless it has said so already.
    pub fn poll(&self) -> bool {
        // Relaxed: the flag orders nothing; the pool's join publishes what
        // the threads wrote, and a late reader merely asks the callback.
        if self.raised.load(Ordering::Relaxed) {
            return true;
        }
        let stop = self.callback.as_ref().is_some_and(|callback| callback());
        if stop {
            self.raised.store(true, Ordering::Relaxed);
        }
        stop
    }

    /// Whether a poll has said stop.
    pub fn raised(&self) -> bool {
        self.raised.load(Ordering::Relaxed)
    }
}

/// Runs `run` on each of `nodes` in order, polling `stop` before each: when
/// it says stop the loop ends with [`ComputeStatus::Aborted`], so no node
/// starts after the callback has said stop, and a node whose kernel was
/// stopped part way (a poll between its chunks said stop) ends the loop
/// the same way. The first status other than success ends the loop and is
/// returned.
pub fn run_nodes<N: Copy>(nodes: &[N], stop: &Stop, mut run: impl FnMut(N) -> ComputeStatus) -> ComputeStatus {
    for &node in nodes {
        if stop.poll() {
            return ComputeStatus::Aborted;
        }
        let status = run(node);
        if !status.is_success() {
            return status;
        }
        if stop.raised() {
            return ComputeStatus::Aborted;
        }
    }
    ComputeStatus::Success
}
