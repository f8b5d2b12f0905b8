//! A tensor read into host memory without blocking the caller
//! ([`TensorRead`]), through staging memory the tensor's backend keeps
//! ([`StagedRead`], made by [`crate::Buffer::begin_read`]).
//!
//! Why the backend keeps the staging memory: a read of device memory that
//! does not block needs somewhere for the bytes to land while the caller
//! goes on (a mappable buffer on wgpu, pinned memory on CUDA), and only the
//! backend knows what that memory is and how to wait for it. Handing the
//! caller's `&mut [u8]` to the backend instead
//! ([`crate::Backend::get_tensor_async`]) ties the read to the borrow, so it
//! cannot outlive the call that queued it; the staged read outlives it and
//! is polled later. Keeping the staging object in the caller's
//! [`TensorRead`] slot, rather than making one per read, means a loop that
//! reads the same output every frame or token allocates it once: the
//! backend reuses the object it finds in the slot (and its memory, grown
//! only when a read needs more).

use std::any::Any;

use gantry_arenas::TensorId;

use crate::{Context, Error, Result};

/// A read a backend staged: its bytes land in memory the backend owns (a
/// mappable staging buffer, pinned host memory), and the object is kept in
/// a [`TensorRead`] and reused for the next read through the same backend.
///
/// Its life: [`crate::Buffer::begin_read`] prepares it (nothing submitted
/// yet), [`StagedRead::submit`] queues the copy, [`StagedRead::poll`] says
/// without blocking whether the bytes are in host memory,
/// [`StagedRead::wait`] blocks until they are, and [`StagedRead::take`]
/// copies them out, after which the next read can be prepared.
pub trait StagedRead: Any + Send + Sync {
    /// Whether a read is prepared and not submitted yet.
    fn is_prepared(&self) -> bool;

    /// Queues the prepared read's copy and returns at once. `Err` when
    /// nothing is prepared.
    fn submit(&mut self) -> Result<()>;

    /// Whether the submitted read's bytes are in host memory, answered
    /// without blocking. `Err` when nothing was submitted or the device
    /// failed.
    fn poll(&mut self) -> Result<bool>;

    /// Waits for the submitted read (for its own copy, not for work
    /// submitted after it).
    fn wait(&mut self) -> Result<()>;

    /// Copies the finished read's first `out.len()` bytes into `out` (at
    /// most the bytes read) and makes the staging ready for the next read.
    /// `Err` when the read has not finished or `out` is longer than it.
    fn take(&mut self, out: &mut [u8]) -> Result<()>;

    /// Drops the read in hand, whatever its state (waiting for its copy if
    /// it is in flight), keeping the staging memory for the next one.
    fn discard(&mut self) -> Result<()>;
}

/// The slot a backend's [`StagedRead`] lives in between reads (inside a
/// [`TensorRead`]): [`crate::Buffer::begin_read`] takes the object it finds
/// here when it is of its own type, and replaces it otherwise.
#[derive(Default)]
pub struct ReadStaging {
    staged: Option<Box<dyn StagedRead>>,
}

impl ReadStaging {
    /// The staged read kept here if it is an `S`, else a new `S` put in its
    /// place (the first read, or the first through another backend: that
    /// backend's read is discarded first, waiting for it if it is in flight).
    pub fn get_or_default<S: StagedRead + Default>(&mut self) -> Result<&mut S> {
        let reusable = self.staged.as_deref().is_some_and(|s| (s as &dyn Any).is::<S>());
        if !reusable {
            if let Some(other) = self.staged.as_deref_mut() {
                other.discard()?;
            }
            self.staged = Some(Box::new(S::default()));
        }
        self.staged
            .as_deref_mut()
            .and_then(|s| (s as &mut dyn Any).downcast_mut::<S>())
            .ok_or_else(|| Error::Unsupported("a read's staging slot holds another backend's read".into()))
    }

    /// The staged read kept here, if any.
    pub fn get(&self) -> Option<&dyn StagedRead> {
        self.staged.as_deref()
    }

    fn get_mut(&mut self) -> Option<&mut dyn StagedRead> {
        self.staged.as_deref_mut()
    }
}

impl std::fmt::Debug for ReadStaging {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadStaging").field("kept", &self.staged.is_some()).finish()
    }
}

/// Where a [`TensorRead`] stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ReadState {
    /// No read in hand.
    Idle,
    /// The tensor is readable from host memory once its compute has
    /// finished: [`TensorRead::take`] reads it through the context.
    Host,
    /// The tensor's backend staged the read.
    Staged,
}

/// A tensor read into host memory without blocking: a reusable slot the
/// caller owns (one per output it reads, kept from read to read).
///
/// [`TensorRead::begin`] prepares the read of a tensor whose compute was
/// started. Where the tensor's buffer stages reads (a GPU's memory,
/// [`crate::Buffer::begin_read`]), the read goes through staging memory the
/// backend keeps in this slot: [`TensorRead::submit`] queues the copy once
/// the compute has finished, [`TensorRead::poll`] answers without blocking,
/// and [`TensorRead::take`] copies the bytes out. Anywhere else (the CPU,
/// host buffers) the tensor is readable from host memory once the compute
/// has finished: submit does nothing, poll answers `true` at once, and take
/// reads through the context. So one loop serves every backend:
///
/// ```no_run
/// # use gantry_engine::{Context, Result, TensorId, TensorRead, sched::Scheduler, Graph};
/// # fn frame(sched: &mut Scheduler, ctx: &mut Context, graph: Graph<'_>, out: TensorId, host: &mut [f32]) -> Result<()> {
/// let mut read = TensorRead::new(); // kept from frame to frame
/// sched.graph_compute_async(ctx, graph)?; // returns once submitted
/// read.begin(ctx, out)?; // prepared, nothing submitted
/// while !sched.is_done()? {
///     // ... a frame's own work ...
/// }
/// read.submit()?; // the copy queued behind the finished compute
/// while !read.poll()? {
///     // ... the next frame's own work ...
/// }
/// read.take_f32(ctx, host)?; // a copy out of the staging memory
/// # Ok(()) }
/// ```
///
/// Submit once the compute has finished: queued right behind a running
/// compute the copy would be correct too, but some drivers (Mesa's
/// lavapipe) make a submission wait for the one before it to finish, and
/// that wait would be inside `submit`.
pub struct TensorRead {
    staging: ReadStaging,
    state: ReadState,
    /// The tensor being read and its bytes.
    tensor: Option<TensorId>,
    len: usize,
}

impl Default for TensorRead {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for TensorRead {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TensorRead")
            .field("state", &self.state)
            .field("tensor", &self.tensor)
            .field("len", &self.len)
            .field("staging", &self.staging)
            .finish()
    }
}

impl TensorRead {
    /// A slot with no read and no staging yet (the backend makes its
    /// staging at the first read through it).
    pub fn new() -> Self {
        Self { staging: ReadStaging::default(), state: ReadState::Idle, tensor: None, len: 0 }
    }

    /// Prepares the read of all of `tensor`'s bytes, submitting nothing.
    /// `Ok(true)` when its backend staged it (submit it once the compute
    /// has finished), `Ok(false)` when it is readable from host memory
    /// once the compute has finished. A read in hand that was not submitted
    /// (or is read from host memory) is replaced. `Err`, naming the tensor,
    /// when it is stale, not allocated or not contiguous, when its backend
    /// refuses, or while a submitted staged read was neither taken nor
    /// discarded ([`TensorRead::discard`] drops it, waiting for it if it is
    /// in flight: `begin` never waits). The range read is the one the
    /// tensor has now: if its placement changes before the submit, other
    /// bytes are read.
    pub fn begin(&mut self, ctx: &Context, tensor: TensorId) -> Result<bool> {
        let desc = ctx.desc(tensor)?;
        let refuse = |why: String| Error::Unsupported(format!("async read of {}: {why}", ctx.describe(tensor)));
        if self.is_staged() && !self.is_prepared() {
            return Err(refuse(
                "the read submitted before is in flight or not taken: take it, or discard it first".into(),
            ));
        }
        if !desc.is_contiguous() {
            return Err(refuse(format!("not contiguous (strides {:?} bytes); read a `cont` copy", desc.nb)));
        }
        let len = desc.nbytes();
        let (entry, placement) = ctx.tensor_buffer(tensor)?;
        let staged =
            entry.buffer.begin_read(placement.offset, len, &mut self.staging).map_err(|e| refuse(e.to_string()))?;
        self.state = if staged { ReadState::Staged } else { ReadState::Host };
        self.tensor = Some(tensor);
        self.len = len;
        Ok(staged)
    }

    /// Whether the read in hand goes through its backend's staging.
    pub fn is_staged(&self) -> bool {
        self.state == ReadState::Staged
    }

    /// Whether a staged read is prepared and not submitted yet.
    pub fn is_prepared(&self) -> bool {
        self.is_staged() && self.staging.get().is_some_and(|s| s.is_prepared())
    }

    /// Queues a prepared staged read's copy and returns at once; nothing
    /// when it was submitted already or the tensor is read from host memory.
    /// Call it once the compute that writes the tensor has finished. `Err`
    /// when no read was begun.
    pub fn submit(&mut self) -> Result<()> {
        match self.state {
            ReadState::Idle => Err(nothing_begun()),
            ReadState::Host => Ok(()),
            ReadState::Staged => match self.staging.get_mut() {
                Some(s) if s.is_prepared() => s.submit(),
                Some(_) => Ok(()),
                None => Err(nothing_begun()),
            },
        }
    }

    /// Whether the read's bytes can be taken, answered without blocking:
    /// `true` at once for a tensor read from host memory (the caller has
    /// seen its compute finish), one non-blocking device poll for a staged
    /// read. `Err` when no read was begun, a staged read was not submitted,
    /// or the device failed.
    pub fn poll(&mut self) -> Result<bool> {
        match self.state {
            ReadState::Idle => Err(nothing_begun()),
            ReadState::Host => Ok(true),
            ReadState::Staged => self.staging.get_mut().ok_or_else(nothing_begun)?.poll(),
        }
    }

    /// Waits for a submitted staged read (for its own copy only); nothing
    /// for a tensor read from host memory. `Err` when no read was begun.
    pub fn wait(&mut self) -> Result<()> {
        match self.state {
            ReadState::Idle => Err(nothing_begun()),
            ReadState::Host => Ok(()),
            ReadState::Staged => self.staging.get_mut().ok_or_else(nothing_begun)?.wait(),
        }
    }

    /// The tensor being read, if a read is in hand.
    pub fn tensor(&self) -> Option<TensorId> {
        self.tensor
    }

    /// Bytes of the read in hand (the whole tensor).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the read in hand is of no byte (or there is none).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Copies the read's first `out.len()` bytes (at most
    /// [`TensorRead::len`]) into `out`; the read is taken once, and the
    /// next can begin. A tensor in host memory is read through `ctx` (its
    /// compute must have finished); a staged read must have finished
    /// ([`TensorRead::poll`] or [`TensorRead::wait`]). `Err` otherwise, or
    /// when `out` is longer than the read.
    pub fn take(&mut self, ctx: &Context, out: &mut [u8]) -> Result<()> {
        let tensor = match (self.state, self.tensor) {
            (ReadState::Idle, _) | (_, None) => return Err(nothing_begun()),
            (_, Some(t)) => t,
        };
        if out.len() > self.len {
            return Err(Error::Unsupported(format!(
                "async read of {}: it holds {} bytes, fewer than the {} asked",
                ctx.describe(tensor),
                self.len,
                out.len()
            )));
        }
        match self.state {
            ReadState::Staged => self.staging.get_mut().ok_or_else(nothing_begun)?.take(out)?,
            _ => ctx.read_tensor_bytes(tensor, 0, out)?,
        }
        self.state = ReadState::Idle;
        self.tensor = None;
        Ok(())
    }

    /// [`TensorRead::take`] into f32 values (an F32 tensor's).
    pub fn take_f32(&mut self, ctx: &Context, out: &mut [f32]) -> Result<()> {
        self.take(ctx, bytemuck::cast_slice_mut(out))
    }

    /// Drops the read in hand, whatever its state (waiting for a staged
    /// read's copy if it is in flight); the staging is kept and the next
    /// read can begin.
    pub fn discard(&mut self) -> Result<()> {
        self.state = ReadState::Idle;
        self.tensor = None;
        match self.staging.get_mut() {
            Some(s) => s.discard(),
            None => Ok(()),
        }
    }

    /// The staging object its backend keeps in this slot for the next read
    /// (`None` before the first staged read): the same object from read to
    /// read through the same backend.
    pub fn staged(&self) -> Option<&dyn StagedRead> {
        self.staging.get()
    }
}

fn nothing_begun() -> Error {
    Error::Unsupported("no async read was begun".into())
}
