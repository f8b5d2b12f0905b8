//! The buffer table: allocate, register, free, re-label.

use std::sync::Arc;

use gantry_arenas::BufferId;

use super::{BufferEntry, Context};
use crate::{Buffer, BufferType, BufferUsage, Error, Result};

impl Context {
    /// Allocates a buffer of `size` bytes from `buffer_type` and registers it.
    pub fn alloc_buffer(
        &mut self,
        buffer_type: &Arc<dyn BufferType>,
        size: usize,
        usage: BufferUsage,
    ) -> Result<BufferId> {
        let buffer = buffer_type.alloc_buffer(size)?;
        Ok(self.add_buffer(buffer, buffer_type.clone(), usage))
    }

    /// Registers a buffer made elsewhere (e.g. over host memory).
    pub fn add_buffer(
        &mut self,
        buffer: Box<dyn Buffer>,
        buffer_type: Arc<dyn BufferType>,
        usage: BufferUsage,
    ) -> BufferId {
        self.revision += 1;
        self.buffers.insert(BufferEntry { buffer, buffer_type, usage })
    }

    /// The buffer table row of `id`.
    #[inline]
    pub fn buffer(&self, id: BufferId) -> Result<&BufferEntry> {
        self.buffers.get(id).ok_or_else(|| Error::StaleHandle { kind: "buffer", handle: format!("{id:?}") })
    }

    /// Sets what a buffer holds.
    pub fn set_buffer_usage(&mut self, id: BufferId, usage: BufferUsage) -> Result<()> {
        self.revision += 1;
        self.buffers
            .get_mut(id)
            .ok_or_else(|| Error::StaleHandle { kind: "buffer", handle: format!("{id:?}") })?
            .usage = usage;
        Ok(())
    }

    /// Frees a buffer. Tensors placed in it become unallocated.
    pub fn free_buffer(&mut self, id: BufferId) -> Result<()> {
        self.revision += 1;
        self.buffers
            .remove(id)
            .map(drop)
            .ok_or_else(|| Error::StaleHandle { kind: "buffer", handle: format!("{id:?}") })
    }

    /// Every registered buffer.
    pub fn buffers(&self) -> impl Iterator<Item = (BufferId, &BufferEntry)> + '_ {
        self.buffers.iter()
    }
}
