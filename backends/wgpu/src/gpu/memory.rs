//! Device buffers and the transfers between them and host memory.
//!
//! wgpu copies in 4-byte units (`COPY_BUFFER_ALIGNMENT`); tensors start and
//! end anywhere, so writes with ragged edges read the edge words back first
//! and reads fetch the enclosing words.

use std::sync::Arc;

use ::wgpu;
use gantry_engine::{Result, check_range};

use super::context::Gpu;

/// Bytes wgpu copies in one unit.
const COPY_ALIGN: u64 = wgpu::COPY_BUFFER_ALIGNMENT;
/// Largest read staged at once: bounds the read-back buffer.
const READBACK_CHUNK: u64 = 32 << 20;
/// Largest fill pattern written at once.
const FILL_CHUNK: usize = 4 << 20;

/// A storage buffer on a GPU, usable by every kernel, with a process-unique
/// id (bind groups are cached by buffer ids).
pub struct GpuBuffer {
    id: u64,
    raw: wgpu::Buffer,
    size: u64,
    gpu: Arc<Gpu>,
}

impl std::fmt::Debug for GpuBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuBuffer").field("id", &self.id).field("size", &self.size).finish()
    }
}

fn round_up(n: u64, to: u64) -> u64 {
    n.div_ceil(to) * to
}

impl GpuBuffer {
    /// Allocates a storage buffer of at least `size` bytes (rounded up to 4,
    /// and at least 4: bindings cannot be empty). `size` beyond the device's
    /// largest storage binding is an `Err`, so every buffer can be bound whole.
    pub fn new(gpu: &Arc<Gpu>, size: u64, label: &str) -> Result<GpuBuffer> {
        let limit = gpu.facts.limits.max_storage_buffer_binding_size.min(gpu.facts.limits.max_buffer_size);
        let padded = round_up(size.max(COPY_ALIGN), COPY_ALIGN);
        if padded > limit {
            return Err(gantry_engine::Error::OutOfMemory {
                buffer_type: format!("{} (largest storage binding {limit} bytes)", gpu.name),
                size: size as usize,
            });
        }
        let raw = gpu.catch(&format!("allocating {padded} bytes"), || {
            gpu.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size: padded,
                usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            })
        })?;
        gpu.allocated.add(padded);
        Ok(GpuBuffer { id: gpu.next_id(), raw, size: padded, gpu: gpu.clone() })
    }

    /// A small uniform buffer for kernel parameters.
    pub(super) fn new_uniform(gpu: &Arc<Gpu>, size: u64) -> Result<GpuBuffer> {
        let padded = round_up(size.max(COPY_ALIGN), COPY_ALIGN);
        let raw = gpu.catch("allocating kernel parameters", || {
            gpu.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("gantry params"),
                size: padded,
                usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            })
        })?;
        gpu.allocated.add(padded);
        Ok(GpuBuffer { id: gpu.next_id(), raw, size: padded, gpu: gpu.clone() })
    }

    /// The id bind groups know this buffer by.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Size in bytes (a multiple of 4).
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The GPU owning this buffer.
    pub fn gpu(&self) -> &Arc<Gpu> {
        &self.gpu
    }

    pub(super) fn raw(&self) -> &wgpu::Buffer {
        &self.raw
    }

    fn check(&self, offset: u64, len: u64) -> Result<()> {
        check_range(&self.gpu.name, self.size as usize, offset as usize, len as usize)
    }

    /// Writes `data` at `offset` through the queue (ordered before any later
    /// submission; `data` may be reused as soon as this returns).
    pub fn write(&self, offset: u64, data: &[u8]) -> Result<()> {
        let len = data.len() as u64;
        self.check(offset, len)?;
        if len == 0 {
            return Ok(());
        }
        let start = offset / COPY_ALIGN * COPY_ALIGN;
        let end = round_up(offset + len, COPY_ALIGN);
        if start == offset && end == offset + len {
            return self.queue_write(offset, data);
        }
        // Ragged edges: keep the bytes around the tensor that share its first
        // and last words.
        let mut words = vec![0u8; (end - start) as usize];
        let n = words.len();
        if start != offset {
            self.read_aligned(start, &mut words[..4])?;
        }
        if end != offset + len && (n > 4 || start == offset) {
            self.read_aligned(end - 4, &mut words[n - 4..])?;
        }
        let at = (offset - start) as usize;
        words[at..at + data.len()].copy_from_slice(data);
        self.queue_write(start, &words)
    }

    /// Queues the write of 4-aligned `data` at 4-aligned `offset`.
    fn queue_write(&self, offset: u64, data: &[u8]) -> Result<()> {
        self.gpu.catch("writing a buffer", || self.gpu.queue.write_buffer(&self.raw, offset, data))?;
        self.gpu.check_uncaptured()
    }

    /// Reads `out.len()` bytes at `offset`, waiting for the copy out (so for
    /// everything submitted before it, and nothing submitted after).
    pub fn read(&self, offset: u64, out: &mut [u8]) -> Result<()> {
        let len = out.len() as u64;
        self.check(offset, len)?;
        if len == 0 {
            return Ok(());
        }
        let start = offset / COPY_ALIGN * COPY_ALIGN;
        let end = round_up(offset + len, COPY_ALIGN);
        if start == offset && end == offset + len {
            return self.read_aligned(offset, out);
        }
        let mut words = vec![0u8; (end - start) as usize];
        self.read_aligned(start, &mut words)?;
        let at = (offset - start) as usize;
        out.copy_from_slice(&words[at..at + out.len()]);
        Ok(())
    }

    /// Reads 4-aligned `out.len()` bytes at 4-aligned `offset` through the
    /// device's read-back buffer, in chunks.
    fn read_aligned(&self, offset: u64, out: &mut [u8]) -> Result<()> {
        let gpu = &self.gpu;
        let mut slot = gpu.readback.lock().map_err(|_| gpu.error("read-back buffer poisoned"))?;
        let mut done = 0u64;
        let total = out.len() as u64;
        while done < total {
            let n = (total - done).min(READBACK_CHUNK);
            let need = round_up(n, COPY_ALIGN);
            let staging = slot.fitting(
                |b| b.size() >= need,
                || {
                    let size = need.max(64 << 10).next_power_of_two().min(round_up(READBACK_CHUNK, COPY_ALIGN));
                    gpu.catch("allocating the read-back buffer", || {
                        gpu.device.create_buffer(&wgpu::BufferDescriptor {
                            label: Some("gantry read-back"),
                            size,
                            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                            mapped_at_creation: false,
                        })
                    })
                },
            )?;
            let copied = gpu.submit_commands("gantry read", |encoder| {
                encoder.copy_buffer_to_buffer(&self.raw, offset + done, staging, 0, need);
            })?;
            let (tx, rx) = std::sync::mpsc::channel();
            // Mapped once the copy's submission has run: waiting for that
            // point (not for the whole queue) fires the callback, here or
            // in whichever thread (the host's) polls the device first.
            gpu.catch("mapping the read-back buffer", || {
                staging.map_async(wgpu::MapMode::Read, 0..need, move |r| {
                    let _ = tx.send(r);
                });
            })?;
            gpu.wait_until(&copied)?;
            rx.recv()
                .map_err(|_| gpu.error("read-back mapping was dropped"))?
                .map_err(|e| gpu.error(format!("mapping the read-back buffer: {e}")))?;
            {
                let view = staging
                    .get_mapped_range(0..need)
                    .map_err(|e| gpu.error(format!("reading the read-back buffer: {e}")))?;
                out[done as usize..(done + n) as usize].copy_from_slice(&view[..n as usize]);
            }
            gpu.catch("unmapping the read-back buffer", || staging.unmap())?;
            done += n;
        }
        Ok(())
    }

    /// Sets `len` bytes at `offset` to `value`.
    pub fn fill(&self, offset: u64, len: u64, value: u8) -> Result<()> {
        self.check(offset, len)?;
        if len == 0 {
            return Ok(());
        }
        if value == 0 && offset.is_multiple_of(COPY_ALIGN) && len.is_multiple_of(COPY_ALIGN) {
            return self
                .gpu
                .submit_commands("gantry clear", |encoder| encoder.clear_buffer(&self.raw, offset, Some(len)))
                .map(drop);
        }
        let pattern = vec![value; (len as usize).min(FILL_CHUNK)];
        let mut done = 0u64;
        while done < len {
            let n = (len - done).min(pattern.len() as u64);
            self.write(offset + done, &pattern[..n as usize])?;
            done += n;
        }
        Ok(())
    }

    /// Copies `len` bytes from `src` at `src_offset` to `dst_offset` on the
    /// GPU. `Ok(false)` when the GPU cannot: another device, the same
    /// buffer (wgpu forbids it), or offsets and length not 4-aligned.
    pub fn copy_from(&self, dst_offset: u64, src: &GpuBuffer, src_offset: u64, len: u64) -> Result<bool> {
        self.check(dst_offset, len)?;
        src.check(src_offset, len)?;
        let aligned = dst_offset.is_multiple_of(COPY_ALIGN)
            && src_offset.is_multiple_of(COPY_ALIGN)
            && len.is_multiple_of(COPY_ALIGN);
        if !Arc::ptr_eq(&self.gpu, &src.gpu) || self.id == src.id || !aligned {
            return Ok(false);
        }
        if len > 0 {
            self.gpu.submit_commands("gantry copy", |encoder| {
                encoder.copy_buffer_to_buffer(&src.raw, src_offset, &self.raw, dst_offset, len);
            })?;
        }
        Ok(true)
    }
}

impl Drop for GpuBuffer {
    fn drop(&mut self) {
        self.gpu.bindings.forget_buffer(self.id);
        self.gpu.allocated.sub(self.size);
        // Dropping the handle (not `destroy`) lets wgpu free the memory once
        // submitted work that reads it has finished.
    }
}
