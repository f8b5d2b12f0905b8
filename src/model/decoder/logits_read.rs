//! A started batch's logits on their way to host memory. In a wgpu
//! device's memory they come back by a read-back submitted once the compute
//! has finished (found by the session's non-blocking poll), so that neither
//! the poll nor `decode_finish` waits for a mapping; anywhere else the
//! session reads them once the compute has finished.

use gantry_engine::{Context, TensorId};

use crate::Result;

/// The read of one started batch's logits (kept from batch to batch: its
/// staging memory is reused).
#[derive(Debug, Default)]
pub(crate) struct LogitsRead {
    #[cfg(feature = "wgpu")]
    read_back: gantry_backends::wgpu::TensorReadBack,
    /// Whether the batch in flight reads its logits through `read_back`.
    #[cfg(feature = "wgpu")]
    through_read_back: bool,
}

impl LogitsRead {
    /// Prepares the read of `logits` for a batch just started: a read-back
    /// when they are in a wgpu device's memory (else [`LogitsRead::finish`]
    /// leaves the read to the session).
    pub(crate) fn begin(&mut self, ctx: &Context, logits: TensorId) -> Result<()> {
        #[cfg(feature = "wgpu")]
        {
            // A read of an earlier batch that failed on the way is dropped.
            self.read_back.discard()?;
            let (entry, _) = ctx.tensor_buffer(logits)?;
            self.through_read_back = entry.buffer.as_any().is::<gantry_backends::wgpu::WgpuBuffer>();
            if self.through_read_back {
                self.read_back.prepare(ctx, logits)?;
            }
        }
        #[cfg(not(feature = "wgpu"))]
        let _ = (ctx, logits);
        Ok(())
    }

    /// Whether the logits are in host memory, once the compute has
    /// finished (`compute_done`), asked without blocking: the first poll
    /// after the compute submits the read-back, later ones poll it.
    pub(crate) fn poll(&mut self, compute_done: bool) -> Result<bool> {
        if !compute_done {
            return Ok(false);
        }
        #[cfg(feature = "wgpu")]
        if self.through_read_back {
            if self.read_back.is_prepared() {
                self.read_back.submit()?;
            }
            return Ok(self.read_back.poll()?);
        }
        Ok(true)
    }

    /// The first `n_floats` logits into `out` through the read-back, once
    /// the compute has finished (submitting and waiting for it if polls have
    /// not brought it in yet). `Ok(false)`, nothing done, when the logits
    /// are not read back: the caller reads them from host memory.
    pub(crate) fn finish(&mut self, n_floats: usize, out: &mut Vec<f32>) -> Result<bool> {
        #[cfg(feature = "wgpu")]
        if std::mem::take(&mut self.through_read_back) {
            if self.read_back.is_prepared() {
                self.read_back.submit()?;
            }
            self.read_back.wait()?;
            // The read-back holds the whole tensor; the batch asked for its first rows.
            out.resize(self.read_back.len() / 4, 0.0);
            self.read_back.take_f32(out)?;
            out.truncate(n_floats);
            return Ok(true);
        }
        #[cfg(not(feature = "wgpu"))]
        let _ = (n_floats, out);
        Ok(false)
    }
}
