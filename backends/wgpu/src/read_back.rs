//! A tensor read back to host memory without blocking the caller: started
//! after its compute was submitted, polled once per frame, taken once done.

use gantry_engine::{Context, Error, Result, TensorId};

use super::WgpuBuffer;
use super::gpu::GpuReadBack;

/// Reads a tensor of a wgpu device's memory into host memory without
/// waiting: [`TensorReadBack::start`] queues the copy (after the compute
/// that writes the tensor, on the same in-order queue) and its mapping, and
/// returns; [`TensorReadBack::poll`] answers without blocking;
/// [`TensorReadBack::take`] copies the bytes out. A blocking read
/// (`Context::read_tensor_bytes`) instead waits for the copy and the mapping
/// in the call. The staging buffer is kept from read to read, so a frame
/// loop reading the same output every frame allocates no GPU memory after
/// the first.
///
/// Start the read once the compute has finished (`Scheduler::is_done`):
/// queued right behind a running compute it would be correct too, but some
/// drivers (Mesa's lavapipe) make a submission wait for the one before it
/// to finish, and that wait would be inside `start`.
///
/// ```no_run
/// # use gantry_engine::{Context, Result, TensorId, sched::Scheduler, Graph};
/// # use gantry_backends::wgpu::TensorReadBack;
/// # fn frame(sched: &mut Scheduler, ctx: &mut Context, graph: Graph<'_>, out: TensorId, host: &mut [f32]) -> Result<()> {
/// let mut read = TensorReadBack::new();
/// sched.graph_compute_async(ctx, graph)?; // returns once submitted
/// while !sched.is_done()? {
///     // ... a frame's own work ...
/// }
/// read.start(ctx, out)?; // the copy and its mapping queued; returns at once
/// while !read.poll()? {
///     // ... the next frame's own work ...
/// }
/// read.take_f32(host)?; // a copy out of mapped memory
/// # Ok(()) }
/// ```
#[derive(Debug, Default)]
pub struct TensorReadBack {
    gpu: GpuReadBack,
    /// The tensor being read, for error messages.
    tensor: Option<TensorId>,
}

impl TensorReadBack {
    /// A read-back with no staging buffer yet (made at the first start).
    pub fn new() -> Self {
        Self::default()
    }

    /// Queues the read of `tensor`'s bytes and returns at once
    /// ([`TensorReadBack::prepare`], then [`TensorReadBack::submit`]).
    /// `Err`, naming the tensor, when it is stale, not allocated, not in a
    /// wgpu device's memory, or not contiguous, or while the read started
    /// before is still in flight.
    pub fn start(&mut self, ctx: &Context, tensor: TensorId) -> Result<()> {
        self.prepare(ctx, tensor)?;
        self.submit()
    }

    /// Checks `tensor` and remembers where its bytes are, submitting nothing:
    /// [`TensorReadBack::submit`] queues the copy later, without the context
    /// (a session prepares the read when it starts a batch and submits it
    /// once the compute has finished). The same errors as
    /// [`TensorReadBack::start`]. The range read is the one the tensor has
    /// now: if its placement changes before the submit, other bytes are read.
    pub fn prepare(&mut self, ctx: &Context, tensor: TensorId) -> Result<()> {
        let desc = ctx.desc(tensor)?;
        let refuse = |why: String| Error::Unsupported(format!("async read-back of {}: {why}", ctx.describe(tensor)));
        if !desc.is_contiguous() {
            return Err(refuse(format!("not contiguous (strides {:?} bytes); read a `cont` copy", desc.nb)));
        }
        let (entry, placement) = ctx.tensor_buffer(tensor)?;
        let Some(buffer) = entry.buffer.as_any().downcast_ref::<WgpuBuffer>() else {
            return Err(refuse(format!("it is in {} memory, not a wgpu device's", entry.buffer_type.name())));
        };
        self.gpu
            .prepare(buffer.mem(), placement.offset as u64, desc.nbytes() as u64)
            .map_err(|e| refuse(e.to_string()))?;
        self.tensor = Some(tensor);
        Ok(())
    }

    /// Drops the read in hand, whatever its state (waiting for its copy if
    /// it is in flight); the next read can start.
    pub fn discard(&mut self) -> Result<()> {
        self.tensor = None;
        self.gpu.discard()
    }

    /// Whether a read is prepared and not submitted yet.
    pub fn is_prepared(&self) -> bool {
        self.gpu.is_prepared()
    }

    /// Queues the prepared read's copy and mapping; returns at once.
    pub fn submit(&mut self) -> Result<()> {
        self.gpu.submit()
    }

    /// Whether the started read's bytes are in host memory, without
    /// blocking. `Err` when none was started or the GPU failed.
    pub fn poll(&mut self) -> Result<bool> {
        self.gpu.poll()
    }

    /// Waits for the started read (for its copy only, not for work
    /// submitted after it).
    pub fn wait(&mut self) -> Result<()> {
        self.gpu.wait()
    }

    /// The tensor being read, if a read was started.
    pub fn tensor(&self) -> Option<TensorId> {
        self.tensor
    }

    /// Bytes of the started read.
    pub fn len(&self) -> usize {
        self.gpu.len()
    }

    /// Whether the started read is of no byte (or none was started).
    pub fn is_empty(&self) -> bool {
        self.gpu.is_empty()
    }

    /// Copies the finished read into `out` (exactly [`TensorReadBack::len`]
    /// bytes); the next read can start. `Err` when it has not finished.
    pub fn take(&mut self, out: &mut [u8]) -> Result<()> {
        self.gpu.take(out)
    }

    /// [`TensorReadBack::take`] into f32 values (an F32 tensor's).
    pub fn take_f32(&mut self, out: &mut [f32]) -> Result<()> {
        self.gpu.take(bytemuck::cast_slice_mut(out))
    }
}
