//! Allocating a list of tensors into fresh buffers of one buffer type
//! (ggml's `ggml_backend_alloc_ctx_tensors_from_buft`).
//!
//! This is the simple allocator for weights and test inputs: every tensor
//! gets its own range, nothing is reused. Graphs with intermediate results
//! use the graph allocator instead, which plans reuse.

use std::sync::Arc;

use gantry_arenas::keys::slot_index;
use gantry_arenas::{BufferId, TensorId};

use crate::{BufferType, BufferUsage, Context, Error, Result};

/// The buffers [`Context::alloc_tensors`] made: one, or several when the
/// buffer type's `max_size` forced a split (ggml's multi-buffer).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TensorBuffers {
    buffers: Vec<BufferId>,
}

impl TensorBuffers {
    /// The buffers, in allocation order.
    pub fn buffers(&self) -> &[BufferId] {
        &self.buffers
    }

    /// Number of buffers.
    pub fn len(&self) -> usize {
        self.buffers.len()
    }

    /// Whether nothing was allocated (every tensor already had memory or was a view).
    pub fn is_empty(&self) -> bool {
        self.buffers.is_empty()
    }
}

fn align_up(n: usize, align: usize) -> Option<usize> {
    n.checked_add(align - 1).map(|v| v & !(align - 1))
}

impl Context {
    /// Gives memory to every tensor of `tensors` that has none, in buffers of
    /// `buffer_type`: tensors are laid out one after the other at the buffer
    /// type's alignment, and a new buffer is started whenever the next tensor
    /// would make the current one larger than `max_size`.
    ///
    /// Views are skipped (their memory is their source's), as are tensors
    /// already allocated and repeated ids. A tensor larger than `max_size` is
    /// an `Err` naming it; on any error nothing stays allocated.
    ///
    /// Pass `graph.leafs()` to allocate a graph's inputs and weights.
    pub fn alloc_tensors(
        &mut self,
        tensors: &[TensorId],
        buffer_type: &Arc<dyn BufferType>,
        usage: BufferUsage,
    ) -> Result<TensorBuffers> {
        let align = buffer_type.alignment();
        if !align.is_power_of_two() {
            return Err(Error::Unsupported(format!(
                "buffer type {} has alignment {align}, which is not a power of two",
                buffer_type.name()
            )));
        }
        let max_size = buffer_type.max_size();

        // (tensor, offset in its batch); a batch becomes one buffer.
        let mut seen = vec![false; self.slot_capacity() + 1];
        let mut batches: Vec<(Vec<(TensorId, usize)>, usize)> = Vec::new();
        let mut current: Vec<(TensorId, usize)> = Vec::new();
        let mut current_size = 0usize;
        for &t in tensors {
            let desc = self.desc(t)?;
            let slot = slot_index(t);
            if desc.is_view() || self.is_allocated(t) || std::mem::replace(&mut seen[slot], true) {
                continue;
            }
            let size = align_up(buffer_type.alloc_size(&desc.layout()), align)
                .ok_or_else(|| Error::Overflow(format!("allocation size of {}", self.describe(t))))?;
            if size > max_size {
                return Err(Error::InvalidTensor {
                    tensor: self.describe(t),
                    reason: format!(
                        "needs {size} bytes, more than {}'s largest buffer of {max_size} bytes",
                        buffer_type.name()
                    ),
                });
            }
            if !current.is_empty() && current_size + size > max_size {
                batches.push((std::mem::take(&mut current), current_size));
                current_size = 0;
            }
            current.push((t, current_size));
            current_size += size;
        }
        if !current.is_empty() {
            batches.push((current, current_size));
        }

        let mut made = TensorBuffers::default();
        for (members, size) in &batches {
            let buffer = match self.alloc_buffer(buffer_type, *size, usage) {
                Ok(b) => b,
                Err(e) => {
                    self.undo_alloc(&made, &batches);
                    return Err(e);
                }
            };
            made.buffers.push(buffer);
            for &(t, offset) in members {
                if let Err(e) = self.place(t, buffer, offset) {
                    self.undo_alloc(&made, &batches);
                    return Err(e);
                }
            }
        }
        Ok(made)
    }

    fn undo_alloc(&mut self, made: &TensorBuffers, batches: &[(Vec<(TensorId, usize)>, usize)]) {
        for (members, _) in batches {
            for &(t, _) in members {
                self.unplace(t);
            }
        }
        for &b in made.buffers() {
            let _ = self.free_buffer(b);
        }
    }

    /// Frees every buffer of `buffers`; the tensors in them become unallocated.
    pub fn free_tensor_buffers(&mut self, buffers: &TensorBuffers) -> Result<()> {
        for &b in buffers.buffers() {
            self.free_buffer(b)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::TestBufferType;
    use crate::{DType, TensorDesc};

    #[test]
    fn one_buffer_when_everything_fits() {
        let mut ctx = Context::new();
        let a = ctx.tensor(DType::F32, [3]).unwrap(); // 12 bytes -> 16
        let b = ctx.tensor(DType::F16, [5]).unwrap(); // 10 bytes -> 16
        let v = ctx.view_1d(a, 2, 4).unwrap();
        let bufs = ctx
            .alloc_tensors(&[a, v, b, a], &TestBufferType::device("test", 16).shared(), BufferUsage::Weights)
            .unwrap();
        assert_eq!(bufs.len(), 1);
        let (pa, pb) = (ctx.placement(a).unwrap(), ctx.placement(b).unwrap());
        assert_eq!((pa.offset, pb.offset), (0, 16));
        assert_eq!(ctx.buffer(pa.buffer).unwrap().buffer.size(), 32);
        assert_eq!(ctx.buffer(pa.buffer).unwrap().usage, BufferUsage::Weights);
        assert_eq!(ctx.placement(v).unwrap().offset, 4, "the view resolves through its source");
        ctx.set_f32(a, &[1.0, 2.0, 3.0]).unwrap();
        assert_eq!(ctx.read_f32(v).unwrap(), vec![2.0, 3.0]);
    }

    #[test]
    fn splits_at_max_size_and_skips_allocated() {
        let mut ctx = Context::new();
        let ts: Vec<TensorId> = (0..5).map(|_| ctx.tensor(DType::F32, [8]).unwrap()).collect(); // 32 bytes each
        let bt = TestBufferType::device("test", 32).with_max_size(64).shared();
        let first = ctx.alloc_tensors(&ts[..1], &bt, BufferUsage::Any).unwrap();
        let bufs = ctx.alloc_tensors(&ts, &bt, BufferUsage::Any).unwrap();
        assert_eq!(bufs.len(), 2, "4 tensors of 32 bytes in buffers of at most 64");
        assert_eq!(ctx.placement(ts[0]).unwrap().buffer, first.buffers()[0], "already allocated: kept");
        let offsets: Vec<usize> = ts[1..].iter().map(|&t| ctx.placement(t).unwrap().offset).collect();
        assert_eq!(offsets, vec![0, 32, 0, 32]);
        for b in bufs.buffers() {
            assert!(ctx.buffer(*b).unwrap().buffer.size() <= 64);
        }
        ctx.free_tensor_buffers(&bufs).unwrap();
        assert!(!ctx.is_allocated(ts[1]) && ctx.is_allocated(ts[0]));
        assert!(ctx.alloc_tensors(&[], &bt, BufferUsage::Any).unwrap().is_empty());
    }

    #[test]
    fn a_tensor_larger_than_max_size_is_an_error_and_nothing_stays() {
        let mut ctx = Context::new();
        let small = ctx.tensor(DType::F32, [4]).unwrap();
        let big = ctx.tensor(DType::F32, [100]).unwrap();
        ctx.set_name(big, "too_big").unwrap();
        let err = ctx
            .alloc_tensors(
                &[small, big],
                &TestBufferType::device("test", 16).with_max_size(256).shared(),
                BufferUsage::Any,
            )
            .unwrap_err()
            .to_string();
        assert!(err.contains("too_big"), "{err}");
        assert!(!ctx.is_allocated(small));
        assert_eq!(ctx.buffers().count(), 0);
    }

    #[test]
    fn zero_size_tensors_get_a_valid_place() {
        let mut ctx = Context::new();
        let desc = TensorDesc::contiguous(DType::F32, [0, 3, 1, 1]).unwrap();
        let e = ctx.insert(desc);
        let bufs = ctx.alloc_tensors(&[e], &TestBufferType::device("test", 64).shared(), BufferUsage::Any).unwrap();
        assert_eq!(bufs.len(), 1);
        assert!(ctx.is_allocated(e));
        assert!(ctx.read_f32(e).unwrap().is_empty());
    }
}
