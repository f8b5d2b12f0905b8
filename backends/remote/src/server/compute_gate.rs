//! One device's computes, one at a time, each under the server's deadline.
//!
//! A backend has one abort callback for every compute it runs, so the
//! server takes a device's turn (a lock per device) before installing a
//! callback that says stop once the deadline has passed, and removes it
//! after: the callback seen by the running compute is always its own. The
//! backend polls it between nodes and between the parts of a node's kernel,
//! so a graph that runs past the deadline ends within milliseconds, even
//! inside one long node; the turn is then given back, and the other
//! sessions' computes on the device go on. A backend without the
//! [`SetAbortCallback`] extension cannot be stopped this way: its computes
//! run to their end (the server says so when it starts).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use gantry_engine::{Backend, BackendErrorKind, Error, Result, SetAbortCallback, device_extension};

/// The turn to compute on one device.
#[derive(Debug, Default)]
pub(crate) struct ComputeGate {
    turn: Mutex<()>,
}

/// Whether `backend` can be stopped mid-graph by the server's deadline.
pub(crate) fn can_abort(backend: &dyn Backend) -> bool {
    device_extension::<SetAbortCallback>(backend.device()).is_some()
}

/// Removes the abort callback when the compute ends, however it ends.
struct Installed<'a> {
    set: &'a SetAbortCallback,
    backend: &'a dyn Backend,
}

impl Drop for Installed<'_> {
    fn drop(&mut self) {
        if let Err(e) = (self.set.0)(self.backend, None) {
            tracing::warn!(backend = self.backend.name(), error = %e, "removing the compute deadline");
        }
    }
}

impl ComputeGate {
    /// Runs `compute` (a graph compute on `backend` and its synchronize)
    /// when it is this device's turn, stopping it through the backend's
    /// abort callback once `timeout` has passed since it started. A compute
    /// stopped so is an error naming the deadline.
    pub(crate) fn run(
        &self,
        backend: &dyn Backend,
        timeout: Duration,
        compute: impl FnOnce() -> Result<()>,
    ) -> Result<()> {
        // A compute that panicked poisoned nothing the lock protects: the turn is all it is.
        let _turn = self.turn.lock().unwrap_or_else(PoisonError::into_inner);
        let started = Instant::now();
        let expired = Arc::new(AtomicBool::new(false));
        let _installed = match device_extension::<SetAbortCallback>(backend.device()) {
            Some(set) => {
                let deadline = started.checked_add(timeout);
                let flag = expired.clone();
                let callback = Arc::new(move || {
                    let late = deadline.is_some_and(|d| Instant::now() >= d);
                    if late {
                        flag.store(true, Ordering::SeqCst);
                    }
                    late
                });
                (set.0)(backend, Some(callback))?;
                Some(Installed { set, backend })
            }
            None => None,
        };
        let outcome = compute();
        if expired.load(Ordering::SeqCst) {
            return Err(Error::backend(
                "rpc-server",
                BackendErrorKind::Unsupported,
                format!(
                    "the compute ran past this server's deadline of {:.3} s (--compute-timeout) and was stopped \
                     after {:.3} s",
                    timeout.as_secs_f64(),
                    started.elapsed().as_secs_f64()
                ),
            ));
        }
        outcome
    }
}
