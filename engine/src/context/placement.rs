//! Where each tensor's bytes are: a buffer and an offset, or its view source's.

use gantry_arenas::{BufferId, TensorId};

use super::{BufferEntry, Context, Placement};
use crate::{Error, Result, check_range};

impl Context {
    /// Places `t` at `offset` in `buffer`. The tensor must not be a view, must
    /// fit in the buffer, and the offset must respect the buffer type's alignment.
    pub fn place(&mut self, t: TensorId, buffer: BufferId, offset: usize) -> Result<()> {
        let desc = self.desc(t)?;
        if desc.view_src.is_some() {
            return Err(Error::InvalidTensor {
                tensor: self.describe(t),
                reason: "a view takes its memory from its source and cannot be placed".into(),
            });
        }
        let entry = self.buffer(buffer)?;
        let align = entry.buffer_type.alignment();
        if !offset.is_multiple_of(align) {
            return Err(Error::InvalidTensor {
                tensor: self.describe(t),
                reason: format!(
                    "offset {offset} is not a multiple of {}'s alignment {align}",
                    entry.buffer_type.name()
                ),
            });
        }
        let size = entry.buffer_type.alloc_size(&desc.layout());
        check_range(entry.buffer_type.name(), entry.buffer.size(), offset, size)
            .map_err(|e| Error::InvalidTensor { tensor: self.describe(t), reason: e.to_string() })?;
        self.placements.insert(t, Placement { buffer, offset });
        self.revision += 1;
        Ok(())
    }

    /// Forgets where `t` was placed.
    pub fn unplace(&mut self, t: TensorId) {
        self.revision += 1;
        self.placements.remove(t);
    }

    /// Where `t`'s first byte is: its own placement, or its view source's plus
    /// the view offset. `None` when unallocated.
    #[inline]
    pub fn placement(&self, t: TensorId) -> Option<Placement> {
        let desc = self.tensors.get(t)?;
        match desc.view_src {
            None => self.placements.get(t).copied(),
            Some(src) => {
                let p = self.placements.get(src)?;
                Some(Placement { buffer: p.buffer, offset: p.offset + desc.view_offset })
            }
        }
    }

    /// Where `t` itself was placed, not looking through a view (for tables
    /// that already know `t` is no view).
    #[inline]
    pub(crate) fn own_placement(&self, t: TensorId) -> Option<Placement> {
        self.placements.get(t).copied()
    }

    /// Whether `t` (or its view source) has memory.
    pub fn is_allocated(&self, t: TensorId) -> bool {
        self.placement(t).is_some_and(|p| self.buffers.contains_key(p.buffer))
    }

    /// The buffer table row holding `t`, with `t`'s placement.
    #[inline]
    pub fn tensor_buffer(&self, t: TensorId) -> Result<(&BufferEntry, Placement)> {
        let p = self.placement(t).ok_or_else(|| self.not_allocated(t))?;
        let entry = self.buffers.get(p.buffer).ok_or_else(|| self.not_allocated(t))?;
        Ok((entry, p))
    }

    /// Host address of `t`'s first byte; `Err` when `t` is unallocated or
    /// not in host memory.
    #[inline]
    pub fn host_ptr(&self, t: TensorId) -> Result<*mut u8> {
        let (entry, p) = self.tensor_buffer(t)?;
        let base = entry.buffer.host_ptr().ok_or_else(|| {
            Error::Unsupported(format!(
                "tensor {} is in {} memory, not host memory",
                self.describe(t),
                entry.buffer_type.name()
            ))
        })?;
        // Offsets were checked against the buffer size when the tensor was placed.
        Ok(base.wrapping_add(p.offset))
    }

    fn not_allocated(&self, t: TensorId) -> Error {
        Error::NotAllocated(self.describe(t))
    }
}
