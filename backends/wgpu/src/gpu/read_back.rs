//! A read of GPU memory into host memory that never blocks: the copy into a
//! staging buffer and its mapping are queued at once, polled, and the bytes
//! taken once the mapping is there.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use ::wgpu;
use gantry_engine::{Error, Result};

use super::context::{Gpu, Submission};
use super::memory::GpuBuffer;

/// Where a read stands (shared with the mapping's callback).
const IDLE: u8 = 0;
const COPYING: u8 = 1;
const MAPPED: u8 = 2;
const FAILED: u8 = 3;

/// One read at a time of a range of a [`GpuBuffer`], through a staging
/// buffer of its own that is kept (and grown on demand) from read to read.
/// It is the wgpu backend's [`gantry_engine::StagedRead`]: a
/// [`gantry_engine::TensorRead`] keeps it between reads.
pub struct GpuReadBack {
    /// The staging buffer and the GPU it is on.
    staging: Option<(Arc<Gpu>, wgpu::Buffer)>,
    /// Staging buffers made so far (one, in a loop reading the same output).
    staging_made: u64,
    state: Arc<AtomicU8>,
    /// The copy's submission, while it is in flight.
    submission: Option<Submission>,
    /// The range prepared and not submitted yet.
    source: Option<Source>,
    /// Bytes of the staging buffer mapped for the read in flight (the
    /// range rounded out to the copy alignment).
    mapped: u64,
    /// Where the read's bytes start in the mapped range, and how many.
    skip: usize,
    len: usize,
}

/// A range to copy: `copy` bytes of `buffer` from `start` (both 4-aligned).
struct Source {
    gpu: Arc<Gpu>,
    buffer: wgpu::Buffer,
    start: u64,
    copy: u64,
}

impl Default for GpuReadBack {
    fn default() -> Self {
        Self {
            staging: None,
            staging_made: 0,
            state: Arc::new(AtomicU8::new(IDLE)),
            submission: None,
            source: None,
            mapped: 0,
            skip: 0,
            len: 0,
        }
    }
}

impl std::fmt::Debug for GpuReadBack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuReadBack")
            .field("state", &self.state.load(Ordering::Relaxed))
            .field("len", &self.len)
            .finish()
    }
}

impl GpuReadBack {
    /// Checks and remembers the range to read (`len` bytes of `buffer` at
    /// `offset`), submitting nothing yet: a frame loop prepares the read when
    /// it starts a compute and submits it once the compute has finished
    /// (some drivers make a submission wait for the one running before it).
    /// The copy then runs after everything submitted to the queue before it
    /// (a compute that wrote those bytes). `Err` while a read is in flight
    /// (a mapped read not taken is dropped).
    pub fn prepare(&mut self, buffer: &GpuBuffer, offset: u64, len: u64) -> Result<()> {
        let gpu = buffer.gpu();
        match self.state.load(Ordering::Acquire) {
            COPYING => return Err(gpu.error("a read-back is in flight: poll it until it is done, or take it")),
            MAPPED => self.unmap()?,
            _ => {}
        }
        gantry_engine::check_range(&gpu.name, buffer.size() as usize, offset as usize, len as usize)?;
        // Copies take 4-aligned ranges; buffers are whole words long, so the
        // enclosing aligned range is always inside the buffer.
        let align = wgpu::COPY_BUFFER_ALIGNMENT;
        let start = offset / align * align;
        let end = (offset + len).div_ceil(align) * align;
        self.source = Some(Source { gpu: gpu.clone(), buffer: buffer.raw().clone(), start, copy: end - start });
        self.skip = (offset - start) as usize;
        self.len = len as usize;
        Ok(())
    }

    /// Whether a read is prepared and not submitted yet.
    pub fn is_prepared(&self) -> bool {
        self.source.is_some()
    }

    /// Queues the prepared read's copy and mapping and returns at once.
    /// `Err` when nothing is prepared.
    pub fn submit(&mut self) -> Result<()> {
        let Source { gpu, buffer, start, copy } = self.source.take().ok_or_else(nothing_started)?;
        let need = copy.max(wgpu::COPY_BUFFER_ALIGNMENT);
        let staging = self.staging_for(&gpu, need)?.clone();
        let copied = gpu.submit_commands("gantry async read", |encoder| {
            encoder.copy_buffer_to_buffer(&buffer, start, &staging, 0, copy);
        })?;
        self.state.store(COPYING, Ordering::Release);
        let state = self.state.clone();
        // The callback runs in whichever thread polls the device once the
        // copy's submission has run: ours (`poll`), or the host's.
        gpu.catch("mapping the async read-back buffer", || {
            staging.map_async(wgpu::MapMode::Read, 0..need, move |r| {
                state.store(if r.is_ok() { MAPPED } else { FAILED }, Ordering::Release);
            });
        })?;
        self.submission = Some(copied);
        self.mapped = need;
        Ok(())
    }

    /// Whether the read started last has its bytes in host memory, asked
    /// without waiting (one non-blocking device poll). `Err` when nothing was
    /// started or the mapping failed.
    pub fn poll(&mut self) -> Result<bool> {
        if self.source.is_some() {
            return Err(Error::Unsupported("the async read-back is prepared but not submitted yet".into()));
        }
        let (gpu, _) = self.staging.as_ref().ok_or_else(nothing_started)?;
        match self.state.load(Ordering::Acquire) {
            MAPPED => return Ok(true),
            IDLE => return Err(nothing_started()),
            FAILED => return Err(gpu.error("mapping the async read-back buffer failed")),
            _ => {}
        }
        // wgpu panics on a poll of a lost device: ask first.
        gpu.check_not_lost("polling a read-back")?;
        gpu.device.poll(wgpu::PollType::Poll).map_err(|e| gpu.error(format!("polling the GPU: {e}")))?;
        gpu.check_uncaptured()?;
        match self.state.load(Ordering::Acquire) {
            MAPPED => Ok(true),
            FAILED => Err(gpu.error("mapping the async read-back buffer failed")),
            _ => Ok(false),
        }
    }

    /// Waits for the read started last (only for its own copy, not for
    /// work submitted after it).
    pub fn wait(&mut self) -> Result<()> {
        if self.poll()? {
            return Ok(());
        }
        let gpu = self.staging.as_ref().map(|(gpu, _)| gpu.clone()).ok_or_else(nothing_started)?;
        gpu.wait_until(self.submission.as_ref().ok_or_else(nothing_started)?)?;
        match self.poll()? {
            true => Ok(()),
            false => Err(gpu.error("the async read-back's copy ran but its buffer was not mapped")),
        }
    }

    /// The read's length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the read is of no byte.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Staging buffers made so far: a loop reading the same output (or
    /// smaller ones) makes one, at its first read.
    pub fn staging_buffers_made(&self) -> u64 {
        self.staging_made
    }

    /// Copies the finished read's first `out.len()` bytes (at most
    /// [`GpuReadBack::len`]) into `out` and makes the staging buffer ready
    /// for the next read. `Err` when the read has not finished
    /// ([`GpuReadBack::poll`] says when) or `out` is longer than the read.
    pub fn take(&mut self, out: &mut [u8]) -> Result<()> {
        let (gpu, staging) = self.staging.as_ref().ok_or_else(nothing_started)?;
        if self.state.load(Ordering::Acquire) != MAPPED {
            return Err(gpu.error("the async read-back has not finished: poll it until it is done"));
        }
        if out.len() > self.len {
            return Err(gpu.error(format!("the async read-back holds {} bytes, fewer than {}", self.len, out.len())));
        }
        {
            let view = staging
                .get_mapped_range(0..self.mapped)
                .map_err(|e| gpu.error(format!("reading the async read-back buffer: {e}")))?;
            out.copy_from_slice(&view[self.skip..self.skip + out.len()]);
        }
        self.unmap()
    }

    /// Drops the read in hand, whatever its state (waiting for its copy if
    /// it is in flight), so that the next one can start.
    pub fn discard(&mut self) -> Result<()> {
        self.source = None;
        match self.state.load(Ordering::Acquire) {
            COPYING => {
                self.wait()?;
                self.unmap()
            }
            MAPPED => self.unmap(),
            _ => {
                self.state.store(IDLE, Ordering::Release);
                Ok(())
            }
        }
    }

    fn unmap(&mut self) -> Result<()> {
        if let Some((gpu, staging)) = &self.staging {
            gpu.catch("unmapping the async read-back buffer", || staging.unmap())?;
        }
        self.submission = None;
        self.state.store(IDLE, Ordering::Release);
        Ok(())
    }

    /// The staging buffer, made (or made larger, or on `gpu`) when the one
    /// kept cannot take `need` bytes.
    fn staging_for(&mut self, gpu: &Arc<Gpu>, need: u64) -> Result<&wgpu::Buffer> {
        let fits = self.staging.as_ref().is_some_and(|(g, b)| Arc::ptr_eq(g, gpu) && b.size() >= need);
        if !fits {
            let size = need.max(4096).next_power_of_two();
            let buffer = gpu.catch("allocating the async read-back buffer", || {
                gpu.device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some("gantry async read-back"),
                    size,
                    usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                    mapped_at_creation: false,
                })
            })?;
            self.staging = Some((gpu.clone(), buffer));
            self.staging_made += 1;
        }
        // Just made or kept: present either way.
        self.staging.as_ref().map(|(_, b)| b).ok_or_else(nothing_started)
    }
}

fn nothing_started() -> Error {
    Error::Unsupported("no async read-back was started".into())
}
