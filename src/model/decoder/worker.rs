//! A decoder session computing off the caller's thread: a host's frame
//! hands it a batch and goes on, polls it once per frame and takes the
//! logits once they are there, each call a few microseconds whichever
//! backend computes — the CPU backend's compute, which runs within
//! [`Session::decode_start`], no longer runs inside the frame.
//!
//! The session and its context move into the worker; the batches run on a
//! thread the worker starts ([`DecodeWorker::spawn`]) or on one of the
//! host's ([`DecodeWorker::new`] gives a [`DecodeDriver`] that the host runs
//! where it likes: a thread or a long job of its own job system).

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::thread::JoinHandle;

use gantry_engine::Context;
use gantry_engine::sync::atomic::{AtomicBool, Ordering};
use gantry_engine::sync::{Condvar, Mutex, lock, wait};

use super::{Batch, Session};
use crate::{Error, Result};

/// A [`Session`] and its [`Context`] computing batches on a driver thread.
///
/// ```no_run
/// # use gantry::model::decoder::{Batch, DecodeWorker, Session};
/// # fn frames(ctx: gantry::Context, session: Session, batch: &Batch) -> gantry::Result<()> {
/// let mut worker = DecodeWorker::spawn(ctx, session)?;
/// worker.submit(batch)?; // returns at once
/// loop {
///     // ... the frame's own work ...
///     if let Some(logits) = worker.poll() {
///         let logits = logits?; // the batch's logits, as Session::decode returns them
///         # let _ = logits;
///         break;
///     }
/// }
/// let (_ctx, _session) = worker.into_parts()?;
/// # Ok(()) }
/// ```
///
/// Steady-state calls allocate nothing: a submitted batch is copied into
/// memory the worker keeps, and the logits change hands by swapping
/// buffers.
pub struct DecodeWorker {
    shared: Arc<Shared>,
    /// The driver thread, when the worker started one.
    thread: Option<JoinHandle<()>>,
    /// The logits of the batch taken last (swapped out of the shared slot).
    logits: Vec<f32>,
    /// Whether a submitted batch has not been taken yet.
    running: bool,
}

/// Runs a [`DecodeWorker`]'s batches on the thread that calls
/// [`DecodeDriver::run`].
pub struct DecodeDriver {
    shared: Arc<Shared>,
}

/// What the worker and its driver share.
struct Shared {
    slot: Mutex<Slot>,
    /// Signalled when a batch is submitted or the worker stops.
    work: Condvar,
    /// Signalled when a batch has finished or the driver has gone.
    finished: Condvar,
    /// Whether the batch submitted last has finished: the frame's poll reads
    /// it without taking the lock.
    done: AtomicBool,
    /// Raised by [`DecodeWorker::abort`], read by the session's abort callback.
    abort: Arc<AtomicBool>,
}

/// The state behind the lock. The driver holds the lock only to take a
/// batch and to hand back its result, never while it computes.
struct Slot {
    /// The session and its context; `None` while the driver computes.
    model: Option<(Context, Session)>,
    request: Request,
    /// The submitted batch.
    batch: Batch,
    /// The finished batch's logits.
    logits: Vec<f32>,
    /// The finished batch's outcome, until it is taken.
    outcome: Option<Result<()>>,
    /// Whether a driver is still there to run batches.
    driver_alive: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Request {
    Idle,
    Batch,
    Stop,
}

impl DecodeWorker {
    /// A worker over `ctx` and `session` whose batches run on a thread of its
    /// own (named `gantry-decode`); the thread ends with the worker.
    pub fn spawn(ctx: Context, session: Session) -> Result<Self> {
        let (mut worker, driver) = Self::new(ctx, session);
        let thread = std::thread::Builder::new()
            .name("gantry-decode".into())
            .spawn(move || driver.run())
            .map_err(|source| Error::Io { context: "starting the decode worker's thread".into(), source })?;
        worker.thread = Some(thread);
        Ok(worker)
    }

    /// A worker over `ctx` and `session`, and the driver that runs its
    /// batches: the host calls [`DecodeDriver::run`] on a thread of its
    /// choosing (it returns when the worker is dropped or taken apart). Until
    /// a driver runs, submitted batches wait.
    ///
    /// The worker installs its abort flag as the session's abort callback
    /// ([`Session::set_abort_callback`]), so also on the session's CPU
    /// backends: a CPU backend shared with another session stops that
    /// session's compute too while this worker's abort is raised (until its
    /// next submit). [`DecodeWorker::into_parts`] removes it.
    pub fn new(ctx: Context, mut session: Session) -> (Self, DecodeDriver) {
        let abort = Arc::new(AtomicBool::new(false));
        let flag = abort.clone();
        session.set_abort_callback(Some(Arc::new(move || flag.load(Ordering::Relaxed))));
        let shared = Arc::new(Shared {
            slot: Mutex::new(Slot {
                model: Some((ctx, session)),
                request: Request::Idle,
                batch: Batch::new(),
                logits: Vec::new(),
                outcome: None,
                driver_alive: true,
            }),
            work: Condvar::new(),
            finished: Condvar::new(),
            done: AtomicBool::new(false),
            abort,
        });
        let driver = DecodeDriver { shared: shared.clone() };
        (Self { shared, thread: None, logits: Vec::new(), running: false }, driver)
    }

    /// Hands `batch` to the driver and returns at once; take its logits
    /// with [`DecodeWorker::poll`] or [`DecodeWorker::wait`]. `Err` while
    /// a batch submitted before has not been taken, or when the driver has
    /// stopped.
    pub fn submit(&mut self, batch: &Batch) -> Result<()> {
        if self.running {
            return Err(Error::Model(
                "DecodeWorker::submit: the batch submitted before has not been taken (poll or wait first)".into(),
            ));
        }
        let mut slot = lock(&self.shared.slot);
        if !slot.driver_alive {
            return Err(driver_gone());
        }
        slot.batch.copy_from(batch);
        slot.request = Request::Batch;
        self.shared.abort.store(false, Ordering::Relaxed);
        self.shared.done.store(false, Ordering::Release);
        drop(slot);
        self.shared.work.notify_one();
        self.running = true;
        Ok(())
    }

    /// Whether the submitted batch has finished (`true` when none is
    /// running), answered without waiting or locking.
    pub fn is_done(&self) -> bool {
        !self.running || self.shared.done.load(Ordering::Acquire)
    }

    /// The submitted batch's logits if it has finished, without waiting:
    /// `None` while it runs (or when none was submitted), else its outcome
    /// (an `Err` leaves its tokens out of the cache, as
    /// [`Session::decode`]'s does).
    pub fn poll(&mut self) -> Option<Result<&[f32]>> {
        if !self.running || !self.shared.done.load(Ordering::Acquire) {
            return None;
        }
        Some(self.take())
    }

    /// The submitted batch's logits, waiting for it to finish. `Err` when
    /// none was submitted, when it failed, or when the driver stopped first.
    pub fn wait(&mut self) -> Result<&[f32]> {
        if !self.running {
            return Err(Error::Model("DecodeWorker::wait: no batch was submitted".into()));
        }
        self.take()
    }

    /// Asks the running batch to stop: the CPU backends stop before their
    /// next node and the scheduler before its next split (work a GPU was
    /// given runs to its end); the batch then ends with an `Aborted` error
    /// and its tokens are not in the cache. Nothing happens when no batch runs.
    pub fn abort(&self) {
        self.shared.abort.store(true, Ordering::Relaxed);
    }

    /// Runs `f` on the session and its context between batches (to clear a
    /// sequence, reserve memory, read the cache's use). `Err` while a batch
    /// has not been taken.
    pub fn with_session<R>(&mut self, f: impl FnOnce(&mut Context, &mut Session) -> R) -> Result<R> {
        if self.running {
            return Err(Error::Model(
                "DecodeWorker::with_session: a batch is running; take it first (poll or wait)".into(),
            ));
        }
        let mut slot = lock(&self.shared.slot);
        let (ctx, session) = slot.model.as_mut().ok_or_else(driver_gone)?;
        Ok(f(ctx, session))
    }

    /// Stops the driver and gives the context and session back, the abort
    /// callback removed. A batch still running is waited for first (its
    /// logits are dropped).
    pub fn into_parts(mut self) -> Result<(Context, Session)> {
        if self.running {
            // Its outcome is the caller's no more; only the model matters now.
            let _ = self.take();
        }
        self.stop();
        let model = lock(&self.shared.slot).model.take();
        let (ctx, mut session) = model.ok_or_else(driver_gone)?;
        session.set_abort_callback(None);
        Ok((ctx, session))
    }

    /// Waits for the submitted batch and takes its outcome and logits.
    fn take(&mut self) -> Result<&[f32]> {
        let mut slot = lock(&self.shared.slot);
        while slot.outcome.is_none() && slot.driver_alive {
            slot = wait(&self.shared.finished, slot);
        }
        self.running = false;
        let outcome = slot.outcome.take().unwrap_or_else(|| Err(driver_gone()));
        std::mem::swap(&mut self.logits, &mut slot.logits);
        drop(slot);
        outcome.map(|()| self.logits.as_slice())
    }

    /// Tells the driver to stop and joins its thread, if the worker has one.
    fn stop(&mut self) {
        lock(&self.shared.slot).request = Request::Stop;
        self.shared.work.notify_all();
        if let Some(thread) = self.thread.take() {
            // A driver that panicked has already marked itself gone.
            let _ = thread.join();
        }
    }
}

impl Drop for DecodeWorker {
    fn drop(&mut self) {
        self.abort();
        self.stop();
    }
}

impl std::fmt::Debug for DecodeWorker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DecodeWorker")
            .field("running", &self.running)
            .field("own_thread", &self.thread.is_some())
            .finish()
    }
}

impl DecodeDriver {
    /// Runs the worker's batches, one after the other, on this thread until
    /// the worker is dropped or taken apart ([`DecodeWorker::into_parts`]).
    pub fn run(self) {
        let shared = &self.shared;
        let mut slot = lock(&shared.slot);
        loop {
            match slot.request {
                Request::Stop => return,
                Request::Idle => slot = wait(&shared.work, slot),
                Request::Batch => {
                    slot.request = Request::Idle;
                    let Some(mut model) = slot.model.take() else { return };
                    let batch = std::mem::take(&mut slot.batch);
                    let mut logits = std::mem::take(&mut slot.logits);
                    drop(slot);
                    let outcome = run_batch(&mut model, &batch, &mut logits);
                    slot = lock(&shared.slot);
                    slot.model = Some(model);
                    slot.batch = batch;
                    slot.logits = logits;
                    slot.outcome = Some(outcome);
                    shared.done.store(true, Ordering::Release);
                    shared.finished.notify_all();
                }
            }
        }
    }
}

impl Drop for DecodeDriver {
    /// Whether it returned or never ran, a driver that is gone says so, so
    /// that a worker waiting for it gets an `Err` instead of waiting forever.
    fn drop(&mut self) {
        lock(&self.shared.slot).driver_alive = false;
        self.shared.done.store(true, Ordering::Release);
        self.shared.finished.notify_all();
    }
}

impl std::fmt::Debug for DecodeDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DecodeDriver").finish_non_exhaustive()
    }
}

/// Decodes `batch` and copies its logits into `logits` (whose memory is
/// reused from batch to batch); a panic becomes an `Err`.
fn run_batch((ctx, session): &mut (Context, Session), batch: &Batch, logits: &mut Vec<f32>) -> Result<()> {
    let decoded = catch_unwind(AssertUnwindSafe(|| {
        session.decode(ctx, batch).map(|l| {
            logits.clear();
            logits.extend_from_slice(l);
        })
    }));
    decoded.unwrap_or_else(|_| Err(Error::Model("the decode worker's batch panicked".into())))
}

fn driver_gone() -> Error {
    Error::Model(
        "the decode worker's driver has stopped (its thread ended or DecodeDriver::run was never called)".into(),
    )
}
