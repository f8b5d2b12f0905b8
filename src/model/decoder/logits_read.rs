//! A started batch's logits on their way to host memory, through the
//! engine's read that does not block ([`TensorRead`]). Where the logits'
//! backend stages reads (a GPU's memory), the read is submitted once the
//! compute has finished (found by the session's non-blocking poll), so that
//! neither the poll nor `decode_finish` waits for a mapping; anywhere else
//! the logits are read from host memory once the compute has finished. The
//! session needs no knowledge of which backend holds them.

use gantry_engine::{Context, TensorId, TensorRead};

use crate::Result;

/// The read of one started batch's logits (kept from batch to batch: the
/// backend's staging memory in it is reused).
#[derive(Debug, Default)]
pub(crate) struct LogitsRead {
    read: TensorRead,
}

impl LogitsRead {
    /// Prepares the read of `logits` for a batch just started; nothing is
    /// submitted until the compute has finished.
    pub(crate) fn begin(&mut self, ctx: &Context, logits: TensorId) -> Result<()> {
        // A read of an earlier batch that failed on the way is dropped.
        self.read.discard()?;
        self.read.begin(ctx, logits)?;
        Ok(())
    }

    /// Whether the logits are in host memory, once the compute has
    /// finished (`compute_done`), asked without blocking: the first poll
    /// after the compute submits a staged read, later ones poll it.
    pub(crate) fn poll(&mut self, compute_done: bool) -> Result<bool> {
        if !compute_done {
            return Ok(false);
        }
        self.read.submit()?;
        Ok(self.read.poll()?)
    }

    /// The first `n_floats` logits into `out`, once the compute has
    /// finished (submitting the read and waiting for it if polls have not
    /// brought it in yet).
    pub(crate) fn finish(&mut self, ctx: &Context, n_floats: usize, out: &mut Vec<f32>) -> Result<()> {
        self.read.submit()?;
        self.read.wait()?;
        // The read holds the whole tensor; the batch asked for its first rows.
        // Fallible: the graph's shape check bounds the size, but a large
        // batch's logits may still not fit next to the model.
        size_for(out, n_floats)?;
        self.read.take_f32(ctx, out)?;
        Ok(())
    }
}

/// Sizes `out` for `n_floats` logits, fallibly: the graph's shape check
/// bounds the size, but a long prompt's logits of every position (2,000
/// tokens of a 200k vocabulary: 1.6 GB) may still not fit next to the model.
pub(crate) fn size_for(out: &mut Vec<f32>, n_floats: usize) -> Result<()> {
    out.clear();
    out.try_reserve_exact(n_floats).map_err(|_| {
        crate::Error::Model(format!(
            "no memory to read {n_floats} logits back ({} bytes)",
            n_floats.saturating_mul(size_of::<f32>())
        ))
    })?;
    out.resize(n_floats, 0.0);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::size_for;

    #[test]
    fn logits_past_the_memory_are_an_error_not_an_abort() {
        let mut out = vec![1.0f32; 4];
        let e = size_for(&mut out, usize::MAX / 8).unwrap_err().to_string();
        assert!(e.contains("no memory to read") && e.contains("logits back"), "{e}");
        size_for(&mut out, 3).unwrap();
        assert_eq!(out, [0.0; 3]);
    }
}
