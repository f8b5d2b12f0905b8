//! Planning nodes into launches: one file per op family, each deciding from
//! the tensors' descriptions alone whether it can compute a node (so
//! `supports_op` is the planner run without memory: exactly what the
//! backend would do) and, with memory, the launches that compute it.

mod attention;
mod conv;
mod copy;
mod elementwise;
mod experts;
mod misc;
mod mul_mat;
mod norm;
mod reduce;
mod rope;
mod routing;
mod ssm;
mod vision;

use gantry_engine::{Context, DType, Op, TensorDesc, TensorId};

use super::buffer::CudaBuffer;
use super::gpu::Gpu;
use super::kernels::Kernel;
use super::launch::{Args, KernelLaunch, Launch, SCRATCH_TAG, TensorArg};

/// Why a node cannot be planned (becomes `supports_op == false`, or an
/// error naming the node when computing).
pub type Refusal = String;

/// Threads per block of the element-wise kernels.
pub const BLOCK: u32 = 256;
/// Most blocks of a grid-stride launch (the kernels loop over the rest).
const MAX_BLOCKS: u64 = 1 << 20;
/// Scratch regions are aligned to this.
const SCRATCH_ALIGN: usize = 256;

/// Collects the launches of a graph. Without a device it only checks
/// (`supports_op`): addresses are zero and nothing is kept.
pub struct Planner<'a> {
    ctx: &'a Context,
    gpu: Option<&'a Gpu>,
    launches: Option<&'a mut Vec<Launch>>,
    /// Scratch bytes of the node being planned.
    node_scratch: usize,
    /// Most scratch bytes any node needs.
    pub max_scratch: usize,
    /// Device address of the error word.
    err: u64,
    /// Largest grid along y and z.
    max_grid_yz: u32,
}

impl<'a> Planner<'a> {
    /// A planner that only checks whether nodes can be computed.
    pub fn check_only(ctx: &'a Context, max_grid_yz: u32) -> Self {
        Self { ctx, gpu: None, launches: None, node_scratch: 0, max_scratch: 0, err: 0, max_grid_yz }
    }

    /// A planner that records launches for `gpu` into `launches`.
    pub fn recording(ctx: &'a Context, gpu: &'a Gpu, launches: &'a mut Vec<Launch>, err: u64) -> Self {
        let max_grid_yz = gpu.facts.max_grid_yz;
        Self { ctx, gpu: Some(gpu), launches: Some(launches), node_scratch: 0, max_scratch: 0, err, max_grid_yz }
    }

    /// The description of `t`.
    pub fn desc(&self, t: TensorId) -> Result<TensorDesc, Refusal> {
        self.ctx.desc(t).copied().map_err(|e| e.to_string())
    }

    /// `t` as a kernel parameter: its device address when recording (an
    /// error unless it is in this GPU's memory), checked for alignment.
    pub fn tensor(&self, t: TensorId) -> Result<TensorArg, Refusal> {
        let d = self.desc(t)?;
        let data = match self.gpu {
            None => 0,
            Some(gpu) => {
                let (entry, placement) = self.ctx.tensor_buffer(t).map_err(|e| e.to_string())?;
                let buffer = entry.buffer.as_any().downcast_ref::<CudaBuffer>().ok_or_else(|| {
                    format!(
                        "tensor {} is in {} memory; the CUDA backend reads only its device's buffers",
                        self.ctx.describe(t),
                        entry.buffer_type.name()
                    )
                })?;
                if !std::ptr::eq(buffer.gpu().as_ref(), gpu) {
                    return Err(format!("tensor {} is on {}", self.ctx.describe(t), buffer.gpu().name));
                }
                let data = buffer.device_ptr() + placement.offset as u64;
                let size = d.dtype.bytes_per_block() as u64;
                if !d.dtype.is_quantized() && !data.is_multiple_of(size) {
                    return Err(format!("tensor {} is not {size}-byte aligned", self.ctx.describe(t)));
                }
                data
            }
        };
        Ok(arg(&d, data))
    }

    /// A scratch region of `bytes` for the node being planned (regions of
    /// one node do not overlap; the next node reuses them: launches run in
    /// order on one stream).
    pub fn scratch(&mut self, bytes: usize) -> u64 {
        let offset = self.node_scratch;
        self.node_scratch += bytes.div_ceil(SCRATCH_ALIGN) * SCRATCH_ALIGN;
        self.max_scratch = self.max_scratch.max(self.node_scratch);
        SCRATCH_TAG | offset as u64
    }

    /// Whether a grid with `y` x `z` blocks fits.
    pub fn check_grid_yz(&self, y: usize, z: usize) -> Result<(), Refusal> {
        let max = self.max_grid_yz as usize;
        if y > max || z > max {
            return Err(format!("a grid of {y} x {z} blocks exceeds the device's {max}"));
        }
        Ok(())
    }

    /// Parameters with `dst` and the error word filled in.
    pub fn args(&self, dst: TensorArg, src: &[TensorArg]) -> Args {
        let mut args: Args = bytemuck::Zeroable::zeroed();
        args.dst = dst;
        for (slot, s) in args.src.iter_mut().zip(src) {
            *slot = *s;
        }
        args.err = self.err;
        args
    }

    /// Records a kernel launch.
    pub fn launch(&mut self, kernel: Kernel, grid: [u32; 3], block: [u32; 3], shared: u32, args: Args) {
        if let Some(l) = self.launches.as_deref_mut() {
            l.push(Launch::Kernel(KernelLaunch { kernel, grid, block, shared, args }));
        }
    }

    /// Records a grid-stride launch over `n` items, 256 threads a block.
    pub fn launch_over(&mut self, kernel: Kernel, n: usize, args: Args) {
        let blocks = (n as u64).div_ceil(u64::from(BLOCK)).clamp(1, MAX_BLOCKS) as u32;
        self.launch(kernel, [blocks, 1, 1], [BLOCK, 1, 1], 0, args);
    }

    /// Records any other step.
    pub fn push(&mut self, launch: Launch) {
        if let Some(l) = self.launches.as_deref_mut() {
            l.push(launch);
        }
    }

    /// Plans `node`: its launches, or why it cannot run here.
    pub fn plan(&mut self, node: TensorId) -> Result<(), Refusal> {
        let d = self.desc(node)?;
        self.node_scratch = 0;
        match d.op {
            Op::None | Op::View | Op::Reshape | Op::Permute { .. } | Op::Transpose => Ok(()),
            _ if d.nelements() == 0 => Ok(()),
            Op::Cpy | Op::Cont | Op::Dup => copy::plan_copy(self, node, &d),
            Op::Concat { .. } | Op::Repeat => copy::plan_tile(self, node, &d),
            Op::GetRows => copy::plan_get_rows(self, node, &d),
            Op::SetRows => copy::plan_set_rows(self, node, &d),
            Op::Binary(_)
            | Op::Scale { .. }
            | Op::Clamp { .. }
            | Op::LeakyRelu { .. }
            | Op::Unary(_)
            | Op::Glu { .. }
            | Op::SwigluOai { .. }
            | Op::DiagMaskInf { .. } => elementwise::plan(self, node, &d),
            Op::Sum | Op::SumRows | Op::Mean | Op::Argmax => reduce::plan(self, node, &d),
            Op::Norm { .. } | Op::RmsNorm { .. } | Op::SoftMax { .. } => norm::plan(self, node, &d),
            Op::Rope(p) => rope::plan(self, node, &d, &p),
            Op::MulMat => mul_mat::plan(self, node, &d),
            Op::FlashAttnExt { scale, max_bias, softcap } => {
                attention::plan(self, node, &d, [scale, max_bias, softcap])
            }
            Op::MulMatId => experts::plan_mul_mat_id(self, node, &d),
            Op::AddId => experts::plan_add_id(self, node, &d),
            Op::Argsort { .. } | Op::TopK | Op::Cumsum => routing::plan(self, node, &d),
            Op::Im2col { .. } | Op::Pool2d { .. } | Op::Upscale { .. } | Op::Pad { .. } | Op::GroupNorm { .. } => {
                vision::plan(self, node, &d)
            }
            Op::L2Norm { .. } => norm::plan(self, node, &d),
            Op::SsmConv | Op::SsmScan { .. } => ssm::plan(self, node, &d),
            Op::Conv2d(_)
            | Op::Conv2dDw(_)
            | Op::ConvTranspose1d { .. }
            | Op::ConvTranspose2d { .. }
            | Op::Pool1d { .. }
            | Op::PadReflect1d { .. }
            | Op::Roll { .. } => conv::plan(self, node, &d),
            Op::Xielu { .. } | Op::DiagMaskZero { .. } => elementwise::plan(self, node, &d),
            Op::Arange { .. }
            | Op::TimestepEmbedding { .. }
            | Op::Fill { .. }
            | Op::Tri(_)
            | Op::Diag
            | Op::Set { .. }
            | Op::Acc { .. }
            | Op::Add1
            | Op::CountEqual => misc::plan(self, node, &d),
            Op::SolveTri
            | Op::RwkvWkv6
            | Op::GatedLinearAttn { .. }
            | Op::RwkvWkv7
            | Op::GatedDeltaNet { .. }
            | Op::WinPart { .. }
            | Op::WinUnpart { .. }
            | Op::GetRelPos
            | Op::AddRelPos => Err(format!("{} has no CUDA kernel", d.op.name())),
        }
    }
}

/// A kernel parameter for a tensor described by `d` at address `data`.
pub fn arg(d: &TensorDesc, data: u64) -> TensorArg {
    TensorArg { data, ne: d.ne.map(|v| v as i64), nb: d.nb.map(|v| v as i64), dtype: d.dtype.ggml_id() as i32, pad: 0 }
}

/// A packed tensor of `dtype` with shape `ne` at `data` (scratch operands).
pub fn packed_arg(dtype: DType, ne: [usize; 4], data: u64) -> TensorArg {
    let mut nb = [dtype.bytes_per_block(); 4];
    for i in 1..4 {
        nb[i] = nb[i - 1] * if i == 1 { ne[0] / dtype.block_size() } else { ne[i - 1] };
    }
    TensorArg { data, ne: ne.map(|v| v as i64), nb: nb.map(|v| v as i64), dtype: dtype.ggml_id() as i32, pad: 0 }
}

/// The description of source `i`, or why it is missing.
pub fn src(p: &Planner<'_>, d: &TensorDesc, i: usize) -> Result<(TensorId, TensorDesc), Refusal> {
    let t = d.srcs[i].ok_or_else(|| format!("{} has no source {i}", d.op.name()))?;
    Ok((t, p.desc(t)?))
}

/// F32, F16 or BF16.
pub fn is_float(t: DType) -> bool {
    t.is_float()
}

/// A weight type the quantized kernels decode: ggml's block types
/// (`QUANTIZED_WEIGHTS`) and the lookup-table types (IQ4_NL, IQ4_XS, MXFP4).
pub fn is_quantized_weight(t: DType) -> bool {
    DType::QUANTIZED_WEIGHTS.contains(&t) || DType::LOOKUP_WEIGHTS.contains(&t)
}

/// F32, F16, BF16 or I32.
pub fn is_plain(t: DType) -> bool {
    matches!(t, DType::F32 | DType::F16 | DType::BF16 | DType::I32)
}

/// Whether the elements of every dim are whole elements apart (the kernels
/// load plain elements with aligned loads).
pub fn strides_aligned(d: &TensorDesc) -> bool {
    let size = d.dtype.bytes_per_block();
    d.dtype.is_quantized() || (0..4).all(|i| d.ne[i] <= 1 || d.nb[i].is_multiple_of(size))
}

/// Whether the rows are whole blocks stored densely.
pub fn dense_blocks(d: &TensorDesc) -> bool {
    d.ne[0] <= d.dtype.block_size() || d.nb[0] == d.dtype.bytes_per_block()
}

/// An error unless `ok`.
pub fn require(ok: bool, why: impl FnOnce() -> String) -> Result<(), Refusal> {
    if ok { Ok(()) } else { Err(why()) }
}

#[cfg(test)]
mod tests {
    use gantry_engine::{DType, GraphArena};

    use super::*;
    use gantry_conformance as conformance;

    /// What the CUDA backend leaves to others on purpose: quantizing on the
    /// GPU, attention over a quantized (Q8_0) KV cache, SOLVE_TRI (no kernel
    /// yet), and PAD of an empty source (nothing to bind; zeros on the CPU).
    fn refused_on_purpose(ctx: &Context, d: &TensorDesc) -> bool {
        let src_dtype = |i: usize| d.srcs[i].and_then(|s| ctx.get(s)).map(|s| s.dtype);
        let quantizing = matches!(d.op, Op::Cpy | Op::SetRows)
            && DType::QUANTIZE_TARGETS.contains(&d.dtype)
            && src_dtype(0) == Some(DType::F32);
        let quantized_kv = matches!(d.op, Op::FlashAttnExt { .. })
            && [1, 2].iter().any(|&i| src_dtype(i).is_some_and(|t| !t.is_float()));
        let cpu_only = matches!(
            d.op,
            Op::SolveTri
                | Op::RwkvWkv6
                | Op::GatedLinearAttn { .. }
                | Op::RwkvWkv7
                | Op::GatedDeltaNet { .. }
                | Op::WinPart { .. }
                | Op::WinUnpart { .. }
                | Op::GetRelPos
                | Op::AddRelPos
        );
        let empty_pad =
            matches!(d.op, Op::Pad { .. }) && d.srcs[0].and_then(|s| ctx.get(s)).is_some_and(|s| s.nelements() == 0);
        quantizing || quantized_kv || cpu_only || empty_pad
    }

    #[test]
    fn every_conformance_node_the_cpu_takes_is_planned_except_gpu_quantizing() {
        let (mut planned, mut refused) = (0, 0);
        let mut unexpected = Vec::new();
        for case in conformance::cases().into_iter().filter(|c| !c.perf_only) {
            let mut ctx = Context::new();
            let built = (case.build)(&mut ctx).unwrap();
            let arena = GraphArena::new();
            let graph = ctx.build_graph(&arena, &[built.output]).unwrap();
            for &node in graph.nodes() {
                let d = *ctx.desc(node).unwrap();
                if !gantry_cpu::supports_op(&ctx, node) {
                    continue;
                }
                match Planner::check_only(&ctx, 65535).plan(node) {
                    Ok(()) => planned += 1,
                    Err(_) if refused_on_purpose(&ctx, &d) => refused += 1,
                    Err(why) => unexpected.push(format!("{}: {why}", case.name)),
                }
            }
        }
        assert!(unexpected.is_empty(), "{} nodes refused:\n{}", unexpected.len(), unexpected.join("\n"));
        assert!(planned > 1000 && refused > 0, "{planned} planned, {refused} refused");
    }

    #[test]
    fn scratch_regions_of_a_node_do_not_overlap_and_the_next_node_reuses_them() {
        let ctx = Context::new();
        let mut p = Planner::check_only(&ctx, 65535);
        let a = p.scratch(100);
        let b = p.scratch(10);
        assert_eq!((a, b), (SCRATCH_TAG, SCRATCH_TAG | 256));
        p.node_scratch = 0;
        assert_eq!(p.scratch(1000), SCRATCH_TAG);
        assert_eq!(p.max_scratch, 1024);
    }
}
