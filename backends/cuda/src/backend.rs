//! The CUDA backend: one stream on a device. A graph is planned into
//! launches (`ops`), its scratch memory resolved, then run on the stream
//! directly or as a CUDA graph (`graphs`); `graph_compute` waits, the async
//! variant does not. Copies into its memory run on the stream too, ordered
//! after the source stream's work with an event.

use std::any::Any;
use std::ffi::c_void;
use std::sync::{Arc, Mutex, MutexGuard};

use cudarc::driver::{CudaEvent, CudaStream, result, sys};
use gantry_arenas::{EventId, TensorId};
use gantry_engine::{
    Backend, BackendErrorKind, ComputeStatus, Context, Device, Error, Graph, GraphPlan, PlanTable, Result,
};

use super::buffer::CudaBuffer;
use super::cublas::Blas;
use super::device::CudaDevice;
use super::gpu::Gpu;
use super::graphs::{GraphAction, GraphCache, graphs_enabled};
use super::kernels::constants::{ERR_EXPERT_ID, ERR_ROW_INDEX, ERR_STATE_ID};
use super::launch::{Launch, resolve_scratch};
use super::ops::Planner;
use super::plan::CudaPlan;

/// Dynamic shared memory a kernel gets without asking (48 KiB).
const DEFAULT_SHARED_LIMIT: u32 = 48 << 10;

/// A captured graph, destroyed when dropped (after any launch of it
/// finishes: the driver defers the destruction).
pub struct GraphExec {
    exec: sys::CUgraphExec,
    gpu: Arc<Gpu>,
}

// SAFETY: a graph exec is a driver handle usable from any thread with its
// context current; it is used under the backend's lock.
unsafe impl Send for GraphExec {}
// SAFETY: as above.
unsafe impl Sync for GraphExec {}

impl Drop for GraphExec {
    fn drop(&mut self) {
        if self.gpu.context().is_ok() {
            // SAFETY: instantiated once, destroyed once.
            let _ = unsafe { result::graph::exec_destroy(self.exec) };
        }
    }
}

/// The backend's error word: pinned host memory the kernels write through
/// its device address (an index out of range) and the host reads after a
/// synchronize.
struct ErrorWord {
    host: *mut i32,
    device: u64,
    gpu: Arc<Gpu>,
}

// SAFETY: plain pinned memory, read and reset only after the stream is synchronized.
unsafe impl Send for ErrorWord {}
// SAFETY: as above.
unsafe impl Sync for ErrorWord {}

impl ErrorWord {
    fn new(gpu: &Arc<Gpu>) -> Result<Self> {
        gpu.context()?;
        let flags = sys::CU_MEMHOSTALLOC_DEVICEMAP | sys::CU_MEMHOSTALLOC_PORTABLE;
        // SAFETY: 4 bytes of pinned memory, owned by this word and freed on drop.
        let host = unsafe { result::malloc_host(4, flags) }.map_err(|e| gpu.error("cuMemHostAlloc", e))?.cast::<i32>();
        // SAFETY: `host` is 4 writable bytes.
        unsafe { host.write_volatile(0) };
        let mut device: sys::CUdeviceptr = 0;
        // SAFETY: `host` was allocated with DEVICEMAP; `device` is a local.
        unsafe { sys::cuMemHostGetDevicePointer_v2(&mut device, host.cast(), 0) }
            .result()
            .map_err(|e| gpu.error("cuMemHostGetDevicePointer", e))?;
        Ok(Self { host, device, gpu: gpu.clone() })
    }

    /// The bits set since the last call, cleared.
    fn take(&self) -> i32 {
        // SAFETY: the word lives as long as `self`; the stream that writes it is synchronized.
        unsafe {
            let v = self.host.read_volatile();
            if v != 0 {
                self.host.write_volatile(0);
            }
            v
        }
    }
}

impl Drop for ErrorWord {
    fn drop(&mut self) {
        if self.gpu.context().is_ok() {
            // SAFETY: allocated by cuMemHostAlloc, freed once.
            let _ = unsafe { result::free_host(self.host.cast::<c_void>()) };
        }
    }
}

/// What one compute needs and keeps between computes.
struct StreamState {
    launches: Vec<Launch>,
    scratch: Option<CudaBuffer>,
    /// Counts scratch replacements (graph plans resolved against an older
    /// scratch are planned again).
    scratch_generation: u64,
    graphs: GraphCache<GraphExec>,
}

/// A stream on a [`CudaDevice`].
pub struct CudaBackend {
    device: CudaDevice,
    stream: Arc<CudaStream>,
    blas: Blas,
    /// Recorded on this stream when another backend copies from its memory.
    copy_event: CudaEvent,
    err: ErrorWord,
    state: Mutex<StreamState>,
    plans: PlanTable<CudaPlan>,
    graphs_on: bool,
}

impl CudaBackend {
    /// A new stream on `device`.
    ///
    /// Environment: `GANTRY_CUDA_GRAPHS` (`0`, `off` or `false` turns CUDA
    /// graphs off for this backend; [`crate::graphs::graphs_enabled`]) is
    /// read here, once per backend.
    pub fn new(device: CudaDevice) -> Result<Self> {
        let gpu = device.gpu().clone();
        let stream = gpu.context()?.new_stream().map_err(|e| gpu.error("cuStreamCreate", e))?;
        let blas = Blas::new(&gpu, stream.cu_stream())?;
        let copy_event = gpu.new_event()?;
        let err = ErrorWord::new(&gpu)?;
        let graphs_on = graphs_enabled();
        let state = StreamState {
            launches: Vec::new(),
            scratch: None,
            scratch_generation: 0,
            graphs: GraphCache::new(graphs_on),
        };
        Ok(Self { device, stream, blas, copy_event, err, state: Mutex::new(state), plans: PlanTable::new(), graphs_on })
    }

    fn gpu(&self) -> &Arc<Gpu> {
        self.device.gpu()
    }

    fn lock(&self) -> MutexGuard<'_, StreamState> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// CUDA graphs captured so far (a graph computed again unchanged adds none).
    pub fn captured_graphs(&self) -> usize {
        self.lock().graphs.captured_count()
    }

    /// Runs `launches` on the stream, kernel by kernel.
    fn run(&self, launches: &[Launch]) -> Result<()> {
        let gpu = self.gpu();
        let stream = self.stream.cu_stream();
        for launch in launches {
            match launch {
                Launch::Kernel(k) => {
                    let f = gpu.function(k.kernel)?;
                    if k.shared > DEFAULT_SHARED_LIMIT {
                        let attr = sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES;
                        // SAFETY: a loaded function of the current context.
                        unsafe { sys::cuFuncSetAttribute(f.cu_function(), attr, k.shared as i32) }
                            .result()
                            .map_err(|e| gpu.error(&format!("shared memory for {}", k.kernel.name), e))?;
                    }
                    let mut args = k.args;
                    let mut params = [(&mut args as *mut super::launch::Args).cast::<c_void>()];
                    let [gx, gy, gz] = k.grid;
                    let [bx, by, bz] = k.block;
                    // SAFETY: the kernel takes exactly one `Args` by value (the
                    // prelude's static_assert checks the layout); its addresses
                    // are device memory planned for these shapes. The driver
                    // copies the parameters before returning.
                    unsafe {
                        result::launch_kernel(
                            f.cu_function(),
                            (gx, gy, gz),
                            (bx, by, bz),
                            k.shared,
                            stream,
                            &mut params,
                        )
                    }
                    .map_err(|e| gpu.error(&format!("launching {}", k.kernel.name), e))?;
                }
                Launch::Gemm(g) => self.blas.gemm(g)?,
                Launch::CopyBytes { dst, src, bytes } => {
                    // SAFETY: both ranges were planned inside their tensors' buffers.
                    unsafe { result::memcpy_dtod_async(*dst, *src, *bytes as usize, stream) }
                        .map_err(|e| gpu.error("cuMemcpyDtoDAsync", e))?;
                }
            }
        }
        Ok(())
    }

    /// Captures `launches` into a graph (nothing runs while capturing).
    fn capture(&self, launches: &[Launch]) -> Result<GraphExec> {
        let gpu = self.gpu();
        let stream = self.stream.cu_stream();
        let mode = sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
        // SAFETY: the stream is live and not capturing.
        unsafe { result::stream::begin_capture(stream, mode) }.map_err(|e| gpu.error("cuStreamBeginCapture", e))?;
        let recorded = self.run(launches);
        // SAFETY: ends the capture begun above, whatever happened in between.
        let graph = unsafe { result::stream::end_capture(stream) };
        recorded?;
        let graph = graph.map_err(|e| gpu.error("cuStreamEndCapture", e))?;
        // SAFETY: `graph` was just captured; it is destroyed once, after instantiation.
        let exec = unsafe { result::graph::instantiate(graph, sys::CUgraphInstantiate_flags(0)) };
        // SAFETY: as above.
        let _ = unsafe { result::graph::destroy(graph) };
        let exec = exec.map_err(|e| gpu.error("cuGraphInstantiate", e))?;
        Ok(GraphExec { exec, gpu: gpu.clone() })
    }

    fn launch_graph(&self, exec: &GraphExec) -> Result<()> {
        // SAFETY: a live exec of this context, launched on its stream.
        unsafe { result::graph::launch(exec.exec, self.stream.cu_stream()) }
            .map_err(|e| self.gpu().error("cuGraphLaunch", e))
    }

    fn unsupported(&self, ctx: &Context, node: TensorId, reason: &str) -> Error {
        let op = ctx.get(node).map_or("?", |d| d.op.name());
        Error::Unsupported(format!("{}: {op} {}: {reason}", self.name(), ctx.describe(node)))
    }

    /// Makes the stream's scratch at least `need` bytes and returns its
    /// address (0 when none is needed yet).
    fn ensure_scratch(&self, st: &mut StreamState, need: usize) -> Result<u64> {
        let gpu = self.gpu();
        if st.scratch.as_ref().is_none_or(|s| s.size_bytes() < need) {
            // The old scratch may still be read by queued work.
            self.stream.synchronize().map_err(|e| gpu.error("cuStreamSynchronize", e))?;
            st.graphs.clear();
            st.scratch = None;
            st.scratch = Some(CudaBuffer::alloc(gpu, need.next_power_of_two())?);
            st.scratch_generation += 1;
        }
        Ok(st.scratch.as_ref().map_or(0, CudaBuffer::device_ptr))
    }

    /// Plans `plan`'s nodes into launches against the stream's scratch.
    fn plan_launches(&self, ctx: &Context, st: &mut StreamState, plan: &mut CudaPlan) -> Result<()> {
        let gpu = self.gpu().clone();
        plan.exec = None;
        plan.uncapturable = false;
        plan.launches.clear();
        let mut planner = Planner::recording(ctx, &gpu, &mut plan.launches, self.err.device);
        for &node in plan.nodes.nodes() {
            planner.plan(node).map_err(|reason| self.unsupported(ctx, node, &reason))?;
        }
        let need = planner.max_scratch;
        let base = self.ensure_scratch(st, need)?;
        resolve_scratch(&mut plan.launches, base);
        plan.scratch_generation = st.scratch_generation;
        plan.nodes.stamp(ctx);
        Ok(())
    }

    /// Runs `plan`: its CUDA graph (captured at the first compute), or its
    /// launches where graphs are off or the capture failed.
    fn compute_plan(&self, ctx: &Context, plan: GraphPlan, wait: bool) -> Result<()> {
        self.gpu().context()?;
        self.plans.with(self.name(), plan, |plan| {
            let mut guard = self.lock();
            let st = &mut *guard;
            if !plan.nodes.is_current(ctx) || plan.scratch_generation != st.scratch_generation {
                self.plan_launches(ctx, st, plan)?;
            }
            if plan.exec.is_none() && !plan.uncapturable && self.graphs_on && !plan.launches.is_empty() {
                match self.capture(&plan.launches) {
                    Ok(exec) => plan.exec = Some(exec),
                    Err(_) => plan.uncapturable = true,
                }
            }
            match &plan.exec {
                Some(exec) => self.launch_graph(exec),
                None => self.run(&plan.launches),
            }
        })??;
        if wait { self.synchronize() } else { Ok(()) }
    }

    fn compute(&self, ctx: &Context, graph: Graph<'_>, wait: bool) -> Result<()> {
        let gpu = self.gpu().clone();
        gpu.context()?;
        let mut guard = self.lock();
        let st = &mut *guard;
        st.launches.clear();
        let mut planner = Planner::recording(ctx, &gpu, &mut st.launches, self.err.device);
        for &node in graph.nodes() {
            planner.plan(node).map_err(|reason| self.unsupported(ctx, node, &reason))?;
        }
        let need = planner.max_scratch;
        let base = self.ensure_scratch(st, need)?;
        resolve_scratch(&mut st.launches, base);
        match st.graphs.action(&st.launches) {
            GraphAction::Direct => self.run(&st.launches)?,
            GraphAction::Capture(i) => match self.capture(&st.launches) {
                Ok(exec) => {
                    self.launch_graph(&exec)?;
                    st.graphs.captured(i, Some(exec));
                }
                Err(_) => {
                    st.graphs.captured(i, None);
                    self.run(&st.launches)?;
                }
            },
            GraphAction::Replay(i) => match st.graphs.exec(i) {
                Some(exec) => self.launch_graph(exec)?,
                None => self.run(&st.launches)?,
            },
        }
        drop(guard);
        if wait { self.synchronize() } else { Ok(()) }
    }

    /// `t`'s device address when it is in this GPU's memory, with its size.
    fn device_range(&self, ctx: &Context, t: TensorId) -> Result<Option<(Arc<Gpu>, u64, usize)>> {
        let (entry, placement) = ctx.tensor_buffer(t)?;
        let Some(buffer) = entry.buffer.as_any().downcast_ref::<CudaBuffer>() else { return Ok(None) };
        let n = ctx.desc(t)?.nbytes();
        gantry_engine::check_range(&buffer.gpu().name, buffer.size_bytes(), placement.offset, n)?;
        Ok(Some((buffer.gpu().clone(), buffer.device_ptr() + placement.offset as u64, n)))
    }

    /// `len` bytes of `t` at `offset`, in this GPU's memory, or `None`.
    fn own_range(&self, ctx: &Context, t: TensorId, offset: usize, len: usize) -> Result<Option<u64>> {
        match self.device_range(ctx, t)? {
            Some((gpu, ptr, n)) if Arc::ptr_eq(&gpu, self.gpu()) => {
                gantry_engine::check_range(&ctx.describe(t), n, offset, len)?;
                Ok(Some(ptr + offset as u64))
            }
            _ => Ok(None),
        }
    }
}

impl Backend for CudaBackend {
    fn name(&self) -> &str {
        self.device.name()
    }

    fn device(&self) -> &dyn Device {
        &self.device
    }

    fn graph_compute(&self, ctx: &Context, graph: Graph<'_>) -> ComputeStatus {
        match self.compute(ctx, graph, true) {
            Ok(()) => ComputeStatus::Success,
            Err(e) => ComputeStatus::Failed(e),
        }
    }

    fn graph_compute_async(&self, ctx: &Context, graph: Graph<'_>) -> ComputeStatus {
        match self.compute(ctx, graph, false) {
            Ok(()) => ComputeStatus::Success,
            Err(e) => ComputeStatus::Failed(e),
        }
    }

    fn supports_graph_plans(&self) -> bool {
        true
    }

    fn graph_plan_create(&self, ctx: &Context, graph: Graph<'_>) -> Result<GraphPlan> {
        self.gpu().context()?;
        let mut plan = CudaPlan::new(ctx, graph);
        self.plan_launches(ctx, &mut self.lock(), &mut plan)?;
        Ok(self.plans.insert(plan))
    }

    fn graph_plan_update(&self, ctx: &Context, plan: GraphPlan, graph: Graph<'_>) -> Result<()> {
        self.gpu().context()?;
        self.plans.with(self.name(), plan, |plan| {
            plan.nodes.set(ctx, graph);
            self.plan_launches(ctx, &mut self.lock(), plan)
        })?
    }

    fn graph_plan_compute(&self, ctx: &Context, plan: GraphPlan) -> ComputeStatus {
        match self.compute_plan(ctx, plan, true) {
            Ok(()) => ComputeStatus::Success,
            Err(e) => ComputeStatus::Failed(e),
        }
    }

    fn graph_plan_compute_async(&self, ctx: &Context, plan: GraphPlan) -> ComputeStatus {
        match self.compute_plan(ctx, plan, false) {
            Ok(()) => ComputeStatus::Success,
            Err(e) => ComputeStatus::Failed(e),
        }
    }

    fn graph_plan_free(&self, plan: GraphPlan) -> Result<()> {
        self.plans.remove(self.name(), plan).map(drop)
    }

    /// Waits for the stream, then reports what its kernels flagged.
    fn synchronize(&self) -> Result<()> {
        self.gpu().context()?;
        self.stream.synchronize().map_err(|e| self.gpu().error("cuStreamSynchronize", e))?;
        match self.err.take() {
            0 => Ok(()),
            bits if bits & ERR_ROW_INDEX != 0 => Err(Error::OutOfBounds(format!(
                "{}: a GET_ROWS or SET_ROWS row index was outside the rows; those rows were not written",
                self.name()
            ))),
            bits if bits & ERR_EXPERT_ID != 0 => Err(Error::OutOfBounds(format!(
                "{}: a MUL_MAT_ID or ADD_ID id was outside the experts; those slots hold NaN",
                self.name()
            ))),
            bits if bits & ERR_STATE_ID != 0 => Err(Error::OutOfBounds(format!(
                "{}: an SSM_SCAN state id was outside the states; those sequences hold NaN",
                self.name()
            ))),
            bits => Err(self.gpu().error_of(BackendErrorKind::Other, format!("a kernel reported {bits}"))),
        }
    }

    /// Asks the stream (`cuStreamQuery`) without waiting; once it is idle,
    /// collects what its kernels flagged as [`Backend::synchronize`] does.
    fn is_done(&self) -> Result<bool> {
        self.gpu().context()?;
        // SAFETY: the stream is this backend's own, alive as long as it is.
        match unsafe { sys::cuStreamQuery(self.stream.cu_stream()) } {
            sys::CUresult::CUDA_SUCCESS => self.synchronize().map(|()| true),
            sys::CUresult::CUDA_ERROR_NOT_READY => Ok(false),
            code => Err(self.gpu().error("cuStreamQuery", result::DriverError(code))),
        }
    }

    /// Asynchronous: `data` must stay unchanged until [`Backend::synchronize`]
    /// (from pageable memory the driver copies it before returning anyway).
    fn set_tensor_async(&self, ctx: &Context, tensor: TensorId, offset: usize, data: &[u8]) -> Result<()> {
        let Some(ptr) = self.own_range(ctx, tensor, offset, data.len())? else {
            return ctx.write_tensor_bytes(tensor, offset, data);
        };
        self.gpu().context()?;
        // SAFETY: the range is inside the tensor's device buffer (checked).
        unsafe { result::memcpy_htod_async(ptr, data, self.stream.cu_stream()) }
            .map_err(|e| self.gpu().error("cuMemcpyHtoDAsync", e))
    }

    fn get_tensor_async(&self, ctx: &Context, tensor: TensorId, offset: usize, out: &mut [u8]) -> Result<()> {
        let Some(ptr) = self.own_range(ctx, tensor, offset, out.len())? else {
            return ctx.read_tensor_bytes(tensor, offset, out);
        };
        self.gpu().context()?;
        // SAFETY: as above; `out` is written by the time the stream is synchronized.
        unsafe { result::memcpy_dtoh_async(out, ptr, self.stream.cu_stream()) }
            .map_err(|e| self.gpu().error("cuMemcpyDtoHAsync", e))
    }

    /// Device-to-device on one GPU and peer copies between GPUs, on this
    /// stream after the source stream's work (an event). Host sources are
    /// left to the caller (`Ok(false)`).
    fn cpy_tensor_async(&self, src_backend: &dyn Backend, ctx: &Context, src: TensorId, dst: TensorId) -> Result<bool> {
        let (Some(src_cuda), Some(dst_ptr)) =
            (src_backend.as_any().downcast_ref::<CudaBackend>(), self.own_range(ctx, dst, 0, ctx.desc(dst)?.nbytes())?)
        else {
            return Ok(false);
        };
        let (s, d) = (ctx.desc(src)?, ctx.desc(dst)?);
        if s.dtype != d.dtype || s.ne != d.ne || s.nb != d.nb {
            return Ok(false);
        }
        let Some((src_gpu, src_ptr, n)) = self.device_range(ctx, src)? else { return Ok(false) };
        if !std::ptr::eq(src_cuda, self) {
            src_gpu.context()?;
            src_cuda.copy_event.record(&src_cuda.stream).map_err(|e| src_gpu.error("cuEventRecord", e))?;
            self.gpu().context()?;
            self.stream.wait(&src_cuda.copy_event).map_err(|e| self.gpu().error("cuStreamWaitEvent", e))?;
        }
        let stream = self.stream.cu_stream();
        if Arc::ptr_eq(&src_gpu, self.gpu()) {
            // SAFETY: both ranges are inside their device buffers (checked).
            unsafe { result::memcpy_dtod_async(dst_ptr, src_ptr, n, stream) }
                .map_err(|e| self.gpu().error("cuMemcpyDtoDAsync", e))?;
        } else {
            let dst_ctx = self.gpu().context()?.cu_ctx();
            let src_ctx = src_gpu.context()?.cu_ctx();
            self.gpu().context()?;
            // SAFETY: as above, across the two devices' contexts.
            unsafe { result::memcpy_peer_async(dst_ctx, dst_ptr, src_ctx, src_ptr, n, stream) }
                .map_err(|e| self.gpu().error(&format!("cuMemcpyPeerAsync from {}", src_gpu.name), e))?;
        }
        Ok(true)
    }

    fn event_record(&self, event: EventId) -> Result<()> {
        let ev = self.gpu().event(event)?;
        self.gpu().context()?;
        ev.record(&self.stream).map_err(|e| self.gpu().error("cuEventRecord", e))
    }

    /// Later work on this stream waits for the event's latest record on the
    /// device (`cuStreamWaitEvent`); the host does not wait.
    fn event_wait(&self, event: EventId) -> Result<()> {
        let ev = self.gpu().event(event)?;
        self.gpu().context()?;
        self.stream.wait(&ev).map_err(|e| self.gpu().error("cuStreamWaitEvent", e))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
