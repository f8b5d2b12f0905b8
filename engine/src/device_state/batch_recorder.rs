//! A command recorder shared by the computes of one stream, held for a
//! whole batch.

use crate::Result;
use crate::sync::{Mutex, MutexGuard};

use super::Poisoned;

/// A recorder of one batch of commands at a time: started, filled, then
/// submitted as one unit.
pub trait CommandBatch {
    /// Starts a batch of at most `max_steps` commands, dropping whatever an
    /// unfinished batch left.
    fn begin(&mut self, max_steps: usize) -> Result<()>;

    /// Submits the batch recorded since [`begin`](CommandBatch::begin);
    /// waits for the device to run it when `wait`.
    fn submit(&mut self, wait: bool) -> Result<()>;
}

/// The recorder `R` of a stream that several threads may compute on. A
/// compute holds it from `begin` through `submit` ([`BatchRecorder::lock`]
/// then [`Batch::record`], which consumes the hold), so the commands of two
/// computes never interleave: each is one batch, submitted whole.
#[derive(Debug)]
pub struct BatchRecorder<R>(Mutex<R>);

impl<R: CommandBatch> BatchRecorder<R> {
    /// Shares `recorder`.
    pub fn new(recorder: R) -> Self {
        Self(Mutex::new(recorder))
    }

    /// Waits until no other compute holds the recorder and holds it; a
    /// recorder whose holder panicked is [`Poisoned`].
    pub fn lock(&self) -> Result<Batch<'_, R>, Poisoned> {
        self.0.lock().map(Batch).map_err(|_| Poisoned)
    }
}

/// The recorder of a [`BatchRecorder`], held for one batch.
#[derive(Debug)]
pub struct Batch<'a, R>(MutexGuard<'a, R>);

impl<R: CommandBatch> Batch<'_, R> {
    /// Records one batch: `begin(max_steps)`, `steps` (which records the
    /// commands), `submit(wait)`, all under the one hold, released at the
    /// end. A failing step ends the batch unsubmitted (the next `begin`
    /// drops it).
    pub fn record(mut self, max_steps: usize, wait: bool, steps: impl FnOnce(&mut R) -> Result<()>) -> Result<()> {
        self.0.begin(max_steps)?;
        steps(&mut self.0)?;
        self.0.submit(wait)
    }
}
