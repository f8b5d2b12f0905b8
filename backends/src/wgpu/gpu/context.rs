//! An opened GPU: the wgpu device and queue, how its errors become
//! Gantry errors, and submission.

use std::sync::Arc;

use ::wgpu;
use gantry_engine::{Error, Result};

use super::adapter::{AdapterFacts, FoundAdapter};
use super::bindings::Bindings;
use crate::device_state::{ByteCounter, ErrorLog, IdCounter, StagingSlot};

/// A point in a GPU's queue: once it is reached, everything submitted
/// before it has run.
#[derive(Debug, Clone)]
pub struct Submission(wgpu::SubmissionIndex);

/// One opened adapter: device, queue, the bind-group layout every kernel
/// shares, and the error sink. Shared by the device, its buffers and its
/// backends through an `Arc`.
pub struct Gpu {
    /// What the adapter is.
    pub facts: AdapterFacts,
    /// The device name used in error messages (`"wgpu0"`).
    pub name: String,
    pub(super) device: wgpu::Device,
    pub(super) queue: wgpu::Queue,
    /// Errors wgpu reported outside an error scope (validation of commands):
    /// each is a bug in Gantry, turned into an `Err` at the next submit.
    uncaptured: Arc<ErrorLog>,
    pub(super) bindings: Bindings,
    /// The read-back buffer, reused across reads (grown on demand).
    pub(super) readback: StagingSlot<wgpu::Buffer>,
    buffer_ids: IdCounter,
    /// Bytes currently allocated in device buffers by Gantry.
    pub(super) allocated: ByteCounter,
}

impl std::fmt::Debug for Gpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gpu").field("name", &self.name).field("facts", &self.facts).finish()
    }
}

impl Gpu {
    /// Opens `found` with every limit the adapter offers and `shader-f16`
    /// where it has it.
    pub fn open(found: FoundAdapter, name: String) -> Result<Arc<Gpu>> {
        let FoundAdapter { adapter, facts } = found;
        let mut features = wgpu::Features::empty();
        if facts.shader_f16 {
            features |= wgpu::Features::SHADER_F16;
        }
        let desc = wgpu::DeviceDescriptor {
            label: Some("gantry"),
            required_features: features,
            required_limits: adapter.limits(),
            ..Default::default()
        };
        let (device, queue) = pollster::block_on(adapter.request_device(&desc)).map_err(|e| Error::Backend {
            backend: name.clone(),
            reason: format!("cannot open {} ({}): {e}", facts.name, facts.api),
        })?;
        let uncaptured: Arc<ErrorLog> = Arc::default();
        let sink = uncaptured.clone();
        device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| sink.push(e.to_string())));
        let bindings = Bindings::new(&device, facts.limits.min_uniform_buffer_offset_alignment);
        Ok(Arc::new(Gpu {
            facts,
            name,
            device,
            queue,
            uncaptured,
            bindings,
            readback: StagingSlot::default(),
            buffer_ids: IdCounter::new(1),
            allocated: ByteCounter::default(),
        }))
    }

    /// A Gantry error from this device.
    pub fn error(&self, reason: impl Into<String>) -> Error {
        Error::Backend { backend: self.name.clone(), reason: reason.into() }
    }

    /// Errors wgpu reported since the last call, as one `Err`.
    pub(super) fn check_uncaptured(&self) -> Result<()> {
        let errors = self.uncaptured.take().map_err(|_| self.error("error sink poisoned"))?;
        if errors.is_empty() {
            return Ok(());
        }
        Err(self.error(format!("wgpu reported: {}", errors.join("; "))))
    }

    /// Runs `make` inside an error scope catching `filter`; a caught error
    /// becomes an `Err` describing `what`.
    pub(super) fn scoped<T>(&self, filter: wgpu::ErrorFilter, what: &str, make: impl FnOnce() -> T) -> Result<T> {
        let scope = self.device.push_error_scope(filter);
        let value = make();
        match pollster::block_on(scope.pop()) {
            None => Ok(value),
            Some(e) => Err(self.error(format!("{what}: {e}"))),
        }
    }

    pub(super) fn next_id(&self) -> u64 {
        self.buffer_ids.next()
    }

    /// Submits `commands` and waits until the GPU has run them.
    pub(super) fn submit_and_wait(&self, commands: wgpu::CommandBuffer) -> Result<()> {
        let index = self.queue.submit([commands]);
        self.check_uncaptured()?;
        self.wait_for(Some(index))
    }

    /// Submits `commands` without waiting.
    pub(super) fn submit(&self, commands: wgpu::CommandBuffer) -> Result<()> {
        self.queue.submit([commands]);
        self.check_uncaptured()
    }

    /// The current end of the queue (an empty submission, which also
    /// flushes pending buffer writes).
    pub fn mark(&self) -> Result<Submission> {
        let index = self.queue.submit(std::iter::empty());
        self.check_uncaptured()?;
        Ok(Submission(index))
    }

    /// Waits until the queue has run everything up to `point`.
    pub fn wait_until(&self, point: &Submission) -> Result<()> {
        self.wait_for(Some(point.0.clone()))
    }

    fn wait_for(&self, index: Option<wgpu::SubmissionIndex>) -> Result<()> {
        self.device
            .poll(wgpu::PollType::Wait { submission_index: index, timeout: None })
            .map_err(|e| self.error(format!("waiting for the GPU: {e}")))?;
        self.check_uncaptured()
    }

    /// Waits until everything submitted to the queue so far has run.
    pub fn wait_idle(&self) -> Result<()> {
        self.wait_for(None)
    }

    /// Number of bind groups cached (each a distinct set of buffers).
    pub fn cached_bind_groups(&self) -> usize {
        self.bindings.cached_groups()
    }

    /// Bytes Gantry has allocated on this device.
    pub fn allocated_bytes(&self) -> u64 {
        self.allocated.get()
    }

    pub(super) fn encoder(&self, label: &str) -> wgpu::CommandEncoder {
        self.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some(label) })
    }

    /// Whether the queue has run everything submitted to it, asked without
    /// waiting (a non-blocking poll, which also runs finished callbacks).
    pub fn is_idle(&self) -> Result<bool> {
        let status = self.device.poll(wgpu::PollType::Poll).map_err(|e| self.error(format!("polling the GPU: {e}")))?;
        self.check_uncaptured()?;
        Ok(status.is_queue_empty())
    }
}
