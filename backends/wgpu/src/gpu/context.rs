//! An opened GPU: the wgpu device and queue, how its errors become
//! Gantry errors, and submission.

use std::sync::{Arc, OnceLock};

use ::wgpu;
use gantry_engine::{BackendErrorKind, Error, Result};

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
    /// Why the device was lost, once wgpu said so (its device-lost callback,
    /// installed on a device Gantry opened): every error after that is
    /// [`BackendErrorKind::DeviceLost`]. Never set on a host's device, whose
    /// callback stays the host's.
    lost: Arc<OnceLock<String>>,
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
        let (device, queue) = pollster::block_on(adapter.request_device(&desc)).map_err(|e| {
            let reason = format!("cannot open {} ({}): {e}", facts.name, facts.api);
            Error::backend_with_source(name.clone(), BackendErrorKind::DeviceUnavailable, reason, e)
        })?;
        let uncaptured: Arc<ErrorLog> = Arc::default();
        let sink = uncaptured.clone();
        device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| sink.push(e.to_string())));
        let lost: Arc<OnceLock<String>> = Arc::default();
        let flag = lost.clone();
        device.set_device_lost_callback(move |why, message| {
            let _ = flag.set(format!("{why:?}: {message}"));
        });
        Self::assemble(facts, name, GpuOwner::Gantry, device, queue, Some(uncaptured), lost)
    }

    /// A `Gpu` over an opened device: makes the shared bind-group layout.
    pub(super) fn assemble(
        facts: AdapterFacts,
        name: String,
        owner: GpuOwner,
        device: wgpu::Device,
        queue: wgpu::Queue,
        uncaptured: Option<Arc<ErrorLog>>,
        lost: Arc<OnceLock<String>>,
    ) -> Result<Arc<Gpu>> {
        let what = "making the kernels' bind-group layout";
        let bindings = catch_on(&device, (&name, &lost), what, BackendErrorKind::Other, || {
            Bindings::new(&device, facts.limits.min_uniform_buffer_offset_alignment)
        })?;
        Ok(Arc::new(Gpu {
            facts,
            name,
            owner,
            device,
            queue,
            uncaptured,
            lost,
            own: OwnSubmissions::default(),
            bindings,
            readback: StagingSlot::default(),
            buffer_ids: IdCounter::new(1),
            allocated: ByteCounter::default(),
        }))
    }

    /// A Gantry error from this device, of kind [`BackendErrorKind::Other`]
    /// (see [`Gpu::error_of`]).
    pub fn error(&self, reason: impl Into<String>) -> Error {
        self.error_of(BackendErrorKind::Other, reason)
    }

    /// A Gantry error from this device of `kind`, or of kind
    /// [`BackendErrorKind::DeviceLost`] once the device was lost (whatever
    /// failed then failed because of that; the message says so too).
    pub fn error_of(&self, kind: BackendErrorKind, reason: impl Into<String>) -> Error {
        lost_or(&self.lost, Error::backend(self.name.clone(), kind, reason))
    }

    /// Why the device was lost, once wgpu reported it (only on a device
    /// Gantry opened: a host's device's loss goes to the host's callback).
    pub fn lost_reason(&self) -> Option<&str> {
        self.lost.get().map(String::as_str)
    }

    /// `Err` of kind [`BackendErrorKind::DeviceLost`] once the device was
    /// lost, naming `what` was being done. Call it before polling the
    /// device: wgpu panics on a poll of a lost device.
    pub(super) fn check_not_lost(&self, what: &str) -> Result<()> {
        check_lost(&self.lost, &self.name, what)
    }

    /// Errors wgpu reported outside any error scope since the last call, as
    /// one `Err` (always `Ok` on a host's device: those go to the host).
    pub(super) fn check_uncaptured(&self) -> Result<()> {
        self.check_not_lost("checking for errors")?;
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
        catch_on(&self.device, (&self.name, &self.lost), what, BackendErrorKind::Other, make)
    }

    /// [`Gpu::catch`] for compiling a kernel: a validation or internal
    /// error is [`BackendErrorKind::KernelCompile`].
    pub(super) fn catch_compile<T>(&self, what: &str, make: impl FnOnce() -> T) -> Result<T> {
        catch_on(&self.device, (&self.name, &self.lost), what, BackendErrorKind::KernelCompile, make)
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
        self.check_not_lost("waiting for the GPU")?;
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
        self.check_not_lost("polling the GPU")?;
        let poll = wgpu::PollType::Wait { submission_index: Some(index), timeout: Some(std::time::Duration::ZERO) };
        match self.device.poll(poll) {
            Ok(_) => self.check_uncaptured().map(|()| true),
            Err(wgpu::PollError::Timeout) => Ok(false),
            Err(e) => Err(self.error(format!("polling the GPU: {e}"))),
        }
    }
}

/// `error`, or, once the device was lost (`lost` set), a
/// [`BackendErrorKind::DeviceLost`] error saying so, with `error` as its source.
fn lost_or(lost: &OnceLock<String>, error: Error) -> Error {
    match (lost.get(), &error) {
        (Some(why), Error::Backend { backend, reason, .. }) => {
            let (backend, reason) = (backend.clone(), format!("{reason}; the device was lost ({why})"));
            Error::backend_with_source(backend, BackendErrorKind::DeviceLost, reason, error)
        }
        _ => error,
    }
}

/// `Err` of kind [`BackendErrorKind::DeviceLost`] once the device `name` was
/// lost (`lost` set) while doing `what`: wgpu reports a lost device only
/// through its callback (calls on it raise no error, and a wait on it
/// panics), so every call checks this first.
fn check_lost(lost: &OnceLock<String>, name: &str, what: &str) -> Result<()> {
    match lost.get() {
        None => Ok(()),
        Some(why) => {
            Err(Error::backend(name, BackendErrorKind::DeviceLost, format!("{what}: the device was lost ({why})")))
        }
    }
}

/// The kind of an error wgpu raised in an error scope: out of memory is
/// [`BackendErrorKind::OutOfDeviceMemory`]; a validation or internal error
/// is `invalid` ([`BackendErrorKind::KernelCompile`] while compiling a
/// kernel, else [`BackendErrorKind::Other`]: a bug in Gantry's use of wgpu,
/// or a limit of the driver).
pub fn scope_error_kind(e: &wgpu::Error, invalid: BackendErrorKind) -> BackendErrorKind {
    match e {
        wgpu::Error::OutOfMemory { .. } => BackendErrorKind::OutOfDeviceMemory,
        _ => invalid,
    }
}

/// [`Gpu::catch`] before there is a `Gpu`: `make` inside error scopes on
/// `device`, each caught error an `Err` of device `name` describing `what`
/// (of the kind [`scope_error_kind`] says with `invalid`, or
/// [`BackendErrorKind::DeviceLost`] once `lost` is set).
fn catch_on<T>(
    device: &wgpu::Device,
    (name, lost): (&str, &OnceLock<String>),
    what: &str,
    invalid: BackendErrorKind,
    make: impl FnOnce() -> T,
) -> Result<T> {
    let validation = device.push_error_scope(wgpu::ErrorFilter::Validation);
    let memory = device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
    let internal = device.push_error_scope(wgpu::ErrorFilter::Internal);
    let value = make();
    // Popped innermost first, as wgpu requires.
    let internal = pollster::block_on(internal.pop());
    let memory = pollster::block_on(memory.pop());
    let validation = pollster::block_on(validation.pop());
    match validation.or(memory).or(internal) {
        None => check_lost(lost, name, what).map(|()| value),
        Some(e) => {
            let (kind, reason) = (scope_error_kind(&e, invalid), format!("{what}: {e}"));
            Err(lost_or(lost, Error::backend_with_source(name, kind, reason, e)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::adapter::find_adapters;
    use crate::gpu::memory::GpuBuffer;

    /// The first adapter opened, or `None` (the test is skipped, saying so).
    fn open() -> Option<Arc<Gpu>> {
        let Some(found) = find_adapters().into_iter().next() else {
            eprintln!("skipped: no wgpu adapter");
            return None;
        };
        Some(Gpu::open(found, "wgpu0".into()).expect("the adapter opens"))
    }

    #[test]
    fn scope_errors_are_of_the_kind_their_filter_says() {
        let Some(gpu) = open() else { return };
        assert_eq!(gpu.error("x").backend_kind(), Some(BackendErrorKind::Other));
        assert!(gpu.lost_reason().is_none());
        let bad = gpu.compile("broken", "this is not WGSL").expect_err("a WGSL error");
        assert_eq!(bad.backend_kind(), Some(BackendErrorKind::KernelCompile), "{bad}");
        assert!(bad.to_string().contains("compiling kernel broken"), "{bad}");
    }

    #[test]
    fn a_destroyed_device_makes_every_error_device_lost() {
        let Some(gpu) = open() else { return };
        let buffer = GpuBuffer::new(&gpu, 256, "before").expect("a buffer");
        gpu.device.destroy();
        // wgpu calls the device-lost callback when it next looks at the device.
        let _ = gpu.device.poll(wgpu::PollType::Poll);
        assert!(gpu.lost_reason().is_some(), "the callback ran");
        let e = gpu.error_of(BackendErrorKind::OutOfDeviceMemory, "anything");
        assert_eq!(e.backend_kind(), Some(BackendErrorKind::DeviceLost), "{e}");
        assert!(e.to_string().contains("anything; the device was lost"), "{e}");
        let made = GpuBuffer::new(&gpu, 256, "after").map(|_| ()).expect_err("nothing is made on a lost device");
        assert_eq!(made.backend_kind(), Some(BackendErrorKind::DeviceLost), "{made}");
        let waited = gpu.mark().and_then(|point| gpu.wait_until(&point)).expect_err("no wait on a lost device");
        assert_eq!(waited.backend_kind(), Some(BackendErrorKind::DeviceLost), "{waited}");
        assert_eq!(gpu.is_idle().map_err(|e| e.backend_kind()), Err(Some(BackendErrorKind::DeviceLost)));
        drop(buffer);
    }
}
