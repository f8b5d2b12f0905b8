//! Shared helpers for the wgpu tests: the device (or a clean skip), a
//! harness that places a graph's tensors in one device buffer, computes it
//! and reads results back, data generators and comparisons.

use std::sync::{Arc, OnceLock};

use gantry_arenas::GraphArena;
use gantry_engine::{Backend, BufferUsage, Context, DType, Device, Result, TensorId, convert};
use gantry_wgpu::{WgpuDevice, WgpuPlatform};

/// The first wgpu device, or `None` (after saying why) when this machine has none.
pub fn device() -> Option<&'static WgpuDevice> {
    static DEVICE: OnceLock<Option<WgpuDevice>> = OnceLock::new();
    DEVICE
        .get_or_init(|| {
            let platform = WgpuPlatform::new();
            let d = platform.wgpu_devices().first().cloned();
            match &d {
                Some(d) => eprintln!(
                    "wgpu tests run on {} ({}): shader-f16 {}, memory {:?}, limits {:?}",
                    d.name(),
                    d.description(),
                    d.facts().shader_f16,
                    d.facts().device_memory,
                    d.facts().limits
                ),
                None => eprintln!(
                    "no wgpu adapter found (install mesa-vulkan-drivers for lavapipe); skipped adapters: {:?}",
                    platform.skipped()
                ),
            }
            d
        })
        .as_ref()
}

/// The device, or return from the test after printing why it is skipped.
macro_rules! device_or_skip {
    () => {
        match $crate::support::device() {
            Some(d) => d,
            None => {
                eprintln!("skipped: no wgpu adapter on this machine");
                return;
            }
        }
    };
}

/// Deterministic values in `[lo, hi)`.
pub fn values(n: usize, seed: u64, lo: f32, hi: f32) -> Vec<f32> {
    gantry_engine::SplitMix64::new(seed).values(n, lo, hi)
}

/// F16 rounding of `v` (what an F16 tensor holds).
pub fn f16_round(v: &[f32]) -> Vec<f32> {
    v.iter().map(|&x| half::f16::from_f32(x).to_f32()).collect()
}

/// Asserts `got` matches `want` within `atol + rtol * |want|` element-wise
/// (NaN matches NaN, infinities must match exactly).
pub fn assert_close(what: &str, got: &[f32], want: &[f32], atol: f32, rtol: f32) {
    assert_eq!(got.len(), want.len(), "{what}: lengths differ");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let ok = if w.is_nan() {
            g.is_nan()
        } else if w.is_infinite() {
            g == w
        } else {
            (g - w).abs() <= atol + rtol * w.abs()
        };
        assert!(ok, "{what}: element {i}: got {g}, want {w} (atol {atol}, rtol {rtol})");
    }
}

/// A graph under construction in its own context, computed on one device.
pub struct Harness {
    pub ctx: Context,
    pub device: WgpuDevice,
    pub backend: Arc<dyn Backend>,
    inputs: Vec<(TensorId, Vec<u8>)>,
}

impl Harness {
    pub fn new(device: &WgpuDevice) -> Self {
        let backend = device.init_backend(None).expect("backend");
        Self { ctx: Context::new(), device: device.clone(), backend, inputs: Vec::new() }
    }

    /// A new input of `dtype` holding `values` (converted: F32, F16, BF16, I32).
    pub fn input(&mut self, dtype: DType, shape: &[usize], values: &[f32]) -> TensorId {
        let t = self.ctx.tensor(dtype, shape).expect("tensor");
        let bytes = convert::f32_to_bytes(dtype, values).expect("convertible dtype");
        assert_eq!(bytes.len(), self.ctx.desc(t).unwrap().nbytes(), "input size");
        self.inputs.push((t, bytes));
        t
    }

    /// A new I32 input.
    pub fn input_i32(&mut self, shape: &[usize], values: &[i32]) -> TensorId {
        let t = self.ctx.tensor(DType::I32, shape).expect("tensor");
        self.inputs.push((t, bytemuck::cast_slice(values).to_vec()));
        t
    }

    /// A new input holding raw bytes (quantized blocks).
    pub fn input_bytes(&mut self, dtype: DType, shape: &[usize], bytes: Vec<u8>) -> TensorId {
        let t = self.ctx.tensor(dtype, shape).expect("tensor");
        assert_eq!(bytes.len(), self.ctx.desc(t).unwrap().nbytes(), "input size");
        self.inputs.push((t, bytes));
        t
    }

    /// The values input `t` was given, as its dtype holds them.
    pub fn input_values(&self, t: TensorId) -> Vec<f32> {
        let d = self.ctx.desc(t).expect("input");
        let (_, bytes) = self.inputs.iter().find(|(i, _)| *i == t).expect("an input");
        let size = d.dtype.bytes_per_block();
        bytes.chunks_exact(size).map(|c| convert::element_to_f32(d.dtype, c).expect("plain dtype")).collect()
    }

    /// Places every tensor that owns memory in one device buffer and writes the inputs.
    pub fn allocate(&mut self) {
        let buft = self.device.buffer_type();
        let align = buft.alignment();
        let owners: Vec<(TensorId, usize)> = self
            .ctx
            .tensors()
            .filter(|(_, d)| d.view_src.is_none())
            .map(|(t, d)| (t, buft.alloc_size(&d.layout())))
            .collect();
        let mut offsets = Vec::with_capacity(owners.len());
        let mut end = 0usize;
        for &(t, size) in &owners {
            offsets.push((t, end));
            end = (end + size).div_ceil(align) * align;
        }
        let buffer = self.ctx.alloc_buffer(&buft, end.max(align), BufferUsage::Compute).expect("buffer");
        for (t, off) in offsets {
            self.ctx.place(t, buffer, off).expect("place");
        }
        for (t, bytes) in &self.inputs {
            self.ctx.write_tensor_bytes(*t, 0, bytes).expect("write input");
        }
    }

    /// Computes the graph of `outputs` (allocating first when needed).
    pub fn try_compute(&mut self, outputs: &[TensorId]) -> Result<()> {
        if !self.ctx.is_allocated(outputs[0]) {
            self.allocate();
        }
        let arena = GraphArena::new();
        let graph = self.ctx.build_graph(&arena, outputs)?;
        self.backend.graph_compute(&self.ctx, graph).into_result()
    }

    /// Computes, panicking with the error.
    pub fn compute(&mut self, outputs: &[TensorId]) {
        for &t in outputs {
            if let Some(reason) = self.device.unsupported_reason(&self.ctx, t) {
                panic!("{} is not supported: {reason}", self.ctx.describe(t));
            }
        }
        self.try_compute(outputs).expect("compute");
    }

    /// `t` as f32 values in logical order.
    pub fn read(&self, t: TensorId) -> Vec<f32> {
        self.ctx.read_f32(t).expect("read")
    }
}

pub use gantry_engine::testing::reference_dir;

/// Little-endian f32s from a file.
pub fn read_f32_file(path: &std::path::Path) -> Vec<f32> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

/// What a graph computed under the scheduler: its output, the number of
/// splits, and the backend each watched node ran on.
pub struct ScheduledRun {
    pub out: Vec<f32>,
    pub splits: usize,
    pub placed: Vec<String>,
}

/// Schedules the graph of `out` in `ctx` over `backends` (first = highest
/// priority), lets `set_inputs` fill the allocated inputs, computes it and
/// reads `out` back, noting where each of `watched` ran.
pub fn scheduled_run(
    backends: &[Arc<dyn Backend>],
    ctx: &mut Context,
    out: TensorId,
    watched: &[TensorId],
    set_inputs: impl FnOnce(&mut Context),
) -> ScheduledRun {
    use gantry_engine::sched::{Scheduler, SchedulerParams};
    let mut sched = Scheduler::new(backends, SchedulerParams::default()).unwrap();
    let arena = GraphArena::new();
    let graph = ctx.build_graph(&arena, &[out]).unwrap();
    sched.alloc_graph(ctx, graph).unwrap();
    set_inputs(ctx);
    sched.graph_compute(ctx, graph).unwrap();
    let values = ctx.read_f32(out).unwrap();
    let placed =
        watched.iter().map(|&t| sched.tensor_backend(t).map_or("?".into(), |be| be.name().to_string())).collect();
    let splits = sched.n_splits();
    sched.release(ctx).unwrap();
    ScheduledRun { out: values, splits, placed }
}
