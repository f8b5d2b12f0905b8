//! An opened GPU: the wgpu device and queue, how its errors become
//! Gantry errors, and submission.

use std::sync::Arc;

use ::wgpu;
use gantry_engine::{Error, Result};

use super::adapter::{AdapterFacts, FoundAdapter};
use super::bindings::Bindings;
use gantry_engine::device_state::{ByteCounter, ErrorLog, IdCounter, OwnSubmissions, StagingSlot};

/// A point in a GPU's queue: once it is reached, everything submitted
/// before it has run.
#[derive(Debug, Clone)]
pub struct Submission(wgpu::SubmissionIndex);

/// Who opened the wgpu device a [`Gpu`] runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GpuOwner {
    /// Gantry requested it from the adapter ([`Gpu::open`]).
    Gantry,
    /// A host program did and handed it over ([`Gpu::from_host`]): Gantry
    /// shares its queue and leaves its uncaptured-error handler alone.
    Host,
}

/// One opened adapter: device, queue, the bind-group layout every kernel
/// shares, and the error sink. Shared by the device, its buffers and its
/// backends through an `Arc`.
///
/// Every wgpu call that can raise an error runs inside error scopes
/// (`Gpu::catch`; they are per thread, so they see only the calls of the
/// thread that pushed them), and every wait is for a point of Gantry's own
/// submissions, never for the whole queue: on a host's device, the host's
/// errors stay the host's and its later work never holds Gantry up.
pub struct Gpu {
    /// What the adapter is (limits and `shader-f16` as the device has them).
    pub facts: AdapterFacts,
    /// The device name used in error messages (`"wgpu0"`).
    pub name: String,
    /// Who opened the device.
    pub owner: GpuOwner,
    pub(super) device: wgpu::Device,
    pub(super) queue: wgpu::Queue,
    /// Errors wgpu reported outside an error scope, on a device Gantry
    /// opened (its uncaptured-error handler is Gantry's): each is a bug in
    /// Gantry, turned into an `Err` at the next check. `None` on a host's
    /// device, whose handler stays the host's.
    uncaptured: Option<Arc<ErrorLog>>,
    /// The latest of Gantry's own submissions: what `wait_for_own_work`
    /// waits for.
    own: OwnSubmissions<wgpu::SubmissionIndex>,
    pub(super) bindings: Bindings,
    /// The read-back buffer, reused across reads (grown on demand).
    pub(super) readback: StagingSlot<wgpu::Buffer>,
    buffer_ids: IdCounter,
    /// Bytes currently allocated in device buffers by Gantry.
    pub(super) allocated: ByteCounter,
}

impl std::fmt::Debug for Gpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gpu").field("name", &self.name).field("owner", &self.owner).field("facts", &self.facts).finish()
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
        Self::assemble(facts, name, GpuOwner::Gantry, device, queue, Some(uncaptured))
    }

    /// A `Gpu` over an opened device: makes the shared bind-group layout.
    pub(super) fn assemble(
        facts: AdapterFacts,
        name: String,
        owner: GpuOwner,
        device: wgpu::Device,
        queue: wgpu::Queue,
        uncaptured: Option<Arc<ErrorLog>>,
    ) -> Result<Arc<Gpu>> {
        let bindings = catch_on(&device, &name, "making the kernels' bind-group layout", || {
            Bindings::new(&device, facts.limits.min_uniform_buffer_offset_alignment)
        })?;
        Ok(Arc::new(Gpu {
            facts,
            name,
            owner,
            device,
            queue,
            uncaptured,
            own: OwnSubmissions::default(),
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

    /// Errors wgpu reported outside any error scope since the last call, as
    /// one `Err` (always `Ok` on a host's device: those go to the host).
    pub(super) fn check_uncaptured(&self) -> Result<()> {
        let Some(log) = &self.uncaptured else { return Ok(()) };
        let errors = log.take().map_err(|_| self.error("error sink poisoned"))?;
        if errors.is_empty() {
            return Ok(());
        }
        Err(self.error(format!("wgpu reported: {}", errors.join("; "))))
    }

    /// Runs `make` inside error scopes catching validation, out-of-memory
    /// and internal errors; a caught error becomes an `Err` describing
    /// `what`. The scopes are this thread's, so they catch exactly the wgpu
    /// calls `make` makes (a host thread's calls meanwhile are not seen).
    pub(super) fn catch<T>(&self, what: &str, make: impl FnOnce() -> T) -> Result<T> {
        catch_on(&self.device, &self.name, what, make)
    }

    pub(super) fn next_id(&self) -> u64 {
        self.buffer_ids.next()
    }

    /// Records commands with `encode` into a new command encoder, submits
    /// them as one of Gantry's own submissions and returns its point; every
    /// error wgpu raises on the way is an `Err` describing `what`.
    pub(super) fn submit_commands(
        &self,
        what: &str,
        encode: impl FnOnce(&mut wgpu::CommandEncoder),
    ) -> Result<Submission> {
        let index = self.catch(what, || {
            let mut encoder = self.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some(what) });
            encode(&mut encoder);
            let commands = encoder.finish();
            self.own.submit(|| self.queue.submit([commands]))
        })?;
        self.check_uncaptured()?;
        Ok(Submission(index))
    }

    /// The current end of the queue, as one of Gantry's own submissions (an
    /// empty one, which also flushes pending buffer writes).
    pub fn mark(&self) -> Result<Submission> {
        let index = self.catch("marking the queue", || self.own.submit(|| self.queue.submit(std::iter::empty())))?;
        self.check_uncaptured()?;
        Ok(Submission(index))
    }

    /// Waits until the queue has run everything up to `point` (work
    /// submitted after `point`, by Gantry or the host, is not waited for).
    pub fn wait_until(&self, point: &Submission) -> Result<()> {
        self.device
            .poll(wgpu::PollType::Wait { submission_index: Some(point.0.clone()), timeout: None })
            .map_err(|e| self.error(format!("waiting for the GPU: {e}")))?;
        self.check_uncaptured()
    }

    /// Waits until everything Gantry submitted to the queue so far has run:
    /// up to its latest own submission, so a host's work submitted after it
    /// is not waited for. Returns at once before Gantry's first submission
    /// (buffer writes with no submission after them need no wait: their
    /// data was copied when they were queued, and any later submission runs
    /// after them).
    pub fn wait_for_own_work(&self) -> Result<()> {
        match self.own.latest() {
            Some(index) => self.wait_until(&Submission(index)),
            None => self.check_uncaptured(),
        }
    }

    /// Number of bind groups cached (each a distinct set of buffers).
    pub fn cached_bind_groups(&self) -> usize {
        self.bindings.cached_groups()
    }

    /// Bytes Gantry has allocated on this device.
    pub fn allocated_bytes(&self) -> u64 {
        self.allocated.get()
    }

    /// Whether the queue has run Gantry's latest own submission, asked
    /// without waiting (a zero-timeout poll, which also runs finished
    /// callbacks); the host's later work on a shared queue is not waited
    /// for. `true` before Gantry's first submission.
    pub fn is_idle(&self) -> Result<bool> {
        let Some(index) = self.own.latest() else {
            return self.check_uncaptured().map(|()| true);
        };
        let poll = wgpu::PollType::Wait { submission_index: Some(index), timeout: Some(std::time::Duration::ZERO) };
        match self.device.poll(poll) {
            Ok(_) => self.check_uncaptured().map(|()| true),
            Err(wgpu::PollError::Timeout) => Ok(false),
            Err(e) => Err(self.error(format!("polling the GPU: {e}"))),
        }
    }
}

/// [`Gpu::catch`] before there is a `Gpu`: `make` inside error scopes on
/// `device`, each caught error an `Err` of device `name` describing `what`.
fn catch_on<T>(device: &wgpu::Device, name: &str, what: &str, make: impl FnOnce() -> T) -> Result<T> {
    let validation = device.push_error_scope(wgpu::ErrorFilter::Validation);
    let memory = device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
    let internal = device.push_error_scope(wgpu::ErrorFilter::Internal);
    let value = make();
    // Popped innermost first, as wgpu requires.
    let internal = pollster::block_on(internal.pop());
    let memory = pollster::block_on(memory.pop());
    let validation = pollster::block_on(validation.pop());
    match validation.or(memory).or(internal) {
        None => Ok(value),
        Some(e) => Err(Error::Backend { backend: name.to_string(), reason: format!("{what}: {e}") }),
    }
}
