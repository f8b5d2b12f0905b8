//! The buffer table: allocate, register, free, re-label.

use std::sync::Arc;

use gantry_arenas::BufferId;

use super::{BufferEntry, Context};
use crate::{Buffer, BufferType, BufferUsage, Device, DeviceType, Error, MultiBuffer, Result, same_buffer_type};

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
        self.buffers.insert(BufferEntry { buffer, buffer_type, usage, chunks: Vec::new() })
    }

    /// Allocates one chunk of `buffer_type` per entry of `chunk_sizes` (each
    /// at most the type's `max_size`) and one handle over them all, which
    /// is returned (ggml's multi-buffer): tensors are placed in the chunks
    /// ([`Context::buffer_chunks`]); usage, clearing and freeing through the
    /// handle apply to every chunk. On an error nothing stays allocated.
    pub fn alloc_multi_buffer(
        &mut self,
        buffer_type: &Arc<dyn BufferType>,
        chunk_sizes: &[usize],
        usage: BufferUsage,
    ) -> Result<BufferId> {
        let mut chunks = Vec::with_capacity(chunk_sizes.len());
        for &size in chunk_sizes {
            let chunk = if size > buffer_type.max_size() {
                Err(Error::OutOfMemory {
                    buffer_type: format!("{} (largest buffer {} bytes)", buffer_type.name(), buffer_type.max_size()),
                    size,
                })
            } else {
                self.alloc_buffer(buffer_type, size, usage)
            };
            match chunk {
                Ok(id) => chunks.push(id),
                Err(e) => {
                    for id in chunks {
                        let _ = self.free_buffer(id);
                    }
                    return Err(e);
                }
            }
        }
        let total = chunk_sizes.iter().sum();
        let handle = Box::new(MultiBuffer::new(total, chunks.len()));
        self.revision += 1;
        Ok(self.buffers.insert(BufferEntry { buffer: handle, buffer_type: buffer_type.clone(), usage, chunks }))
    }

    /// A multi-buffer's chunks (empty for a plain buffer).
    pub fn buffer_chunks(&self, id: BufferId) -> Result<&[BufferId]> {
        Ok(&self.buffer(id)?.chunks)
    }

    /// Whether `id` is a multi-buffer's handle.
    pub fn is_multi_buffer(&self, id: BufferId) -> Result<bool> {
        Ok(self.buffer(id)?.buffer.is_multi())
    }

    /// Sets every byte of a buffer (of every chunk of a multi-buffer) to `value`.
    pub fn clear_buffer(&self, id: BufferId, value: u8) -> Result<()> {
        let entry = self.buffer(id)?;
        entry.buffer.clear(value)?;
        for &chunk in &entry.chunks {
            self.buffer(chunk)?.buffer.clear(value)?;
        }
        Ok(())
    }

    /// The buffer table row of `id`.
    #[inline]
    pub fn buffer(&self, id: BufferId) -> Result<&BufferEntry> {
        self.buffers.get(id).ok_or_else(|| Error::StaleHandle { kind: "buffer", handle: format!("{id:?}") })
    }

    /// Sets what a buffer holds (every chunk of a multi-buffer too).
    pub fn set_buffer_usage(&mut self, id: BufferId, usage: BufferUsage) -> Result<()> {
        self.revision += 1;
        let entry =
            self.buffers.get_mut(id).ok_or_else(|| Error::StaleHandle { kind: "buffer", handle: format!("{id:?}") })?;
        entry.usage = usage;
        let chunks = std::mem::take(&mut entry.chunks);
        for &chunk in &chunks {
            if let Some(c) = self.buffers.get_mut(chunk) {
                c.usage = usage;
            }
        }
        if let Some(entry) = self.buffers.get_mut(id) {
            entry.chunks = chunks;
        }
        Ok(())
    }

    /// Frees a buffer (a multi-buffer with all its chunks). Tensors placed
    /// in it become unallocated.
    pub fn free_buffer(&mut self, id: BufferId) -> Result<()> {
        self.revision += 1;
        let entry =
            self.buffers.remove(id).ok_or_else(|| Error::StaleHandle { kind: "buffer", handle: format!("{id:?}") })?;
        for chunk in entry.chunks {
            self.buffers.remove(chunk);
        }
        Ok(())
    }

    /// Every registered buffer.
    pub fn buffers(&self) -> impl Iterator<Item = (BufferId, &BufferEntry)> + '_ {
        self.buffers.iter()
    }

    /// Bytes of the registered buffers whose memory is on `device` (see
    /// [`BufferEntry::is_on`]): weights, caches and compute buffers alike —
    /// what a memory budget counts. A multi-buffer counts once, by its chunks.
    pub fn held_bytes(&self, device: &dyn Device) -> usize {
        self.buffers.values().filter(|e| e.chunks.is_empty() && e.is_on(device)).map(|e| e.buffer.size()).sum()
    }
}

impl BufferEntry {
    /// Whether this buffer's memory is `device`'s: host memory (the CPU's
    /// buffers, mapped files, a GPU's pinned host buffers) is the CPU
    /// device's; device memory is its buffer type's device's, or, for a
    /// buffer type that names no device, `device`'s when it is the device's
    /// own buffer type.
    pub fn is_on(&self, device: &dyn Device) -> bool {
        let buft = &self.buffer_type;
        if buft.is_host() {
            return device.device_type() == DeviceType::Cpu;
        }
        match buft.device() {
            Some(owner) => owner.name() == device.name(),
            None => same_buffer_type(buft, &device.buffer_type()),
        }
    }
}
