//! The kernels: which WGSL runs each op, with which dtypes, and the plan
//! (parameters, bound tensors, workgroup grid) for one node.
//!
//! [`plan`] is the single source of truth for what the backend supports:
//! `supports_op` asks it, and compute runs what it returns. A node it cannot
//! plan gets a reason, and the scheduler leaves the node to another backend.

mod attention;
mod conv;
mod delta_net;
mod elementwise;
mod experts;
mod layout;
mod linear_attn;
mod matmul;
mod norm;
pub mod params;
mod reduce;
mod rope;
mod routing;
mod rows;
mod sam;
mod set_acc;
pub mod shader;
mod shared_constants;
mod small;
mod solve_tri;
mod ssm;
mod vision;

use std::sync::Arc;

use gantry_arenas::TensorId;
use gantry_engine::{BinaryOp, Context, DType, GluOp, Op, Result, SortOrder, TensorDesc, UnaryOp};

pub use self::conv::ConvOp;
pub use self::linear_attn::LinearAttn;
use self::params::{Params, TensorParams};
use self::shader::{SLOT_NAMES, Store, compose};
use self::shared_constants::{ELEMENT_WORKGROUP, QUANTIZE_WORKGROUP, shared_constants};
pub use self::small::IndexOp;
use crate::gpu::{Gpu, Pipeline, STORAGE_SLOTS};
use gantry_engine::device_state::LazyCache;

/// What the kernels need to know about the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caps {
    /// `f16` in shaders: F16 tensors can be written.
    pub shader_f16: bool,
    /// Workgroups per grid dimension.
    pub max_groups: u32,
}

/// The element-wise functions of the `map` kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MapOp {
    /// A unary op.
    Unary(UnaryOp),
    /// SCALE.
    Scale,
    /// CLAMP.
    Clamp,
    /// LEAKY_RELU.
    LeakyRelu,
}

/// A kernel, before its dtypes are chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kernel {
    /// Unary functions, SCALE, CLAMP, LEAKY_RELU.
    Map(MapOp),
    /// ADD, SUB, MUL, DIV.
    Binary(BinaryOp),
    /// SWIGLU, GEGLU, REGLU, GEGLU_ERF, GEGLU_QUICK.
    Glu {
        /// Activation.
        op: GluOp,
        /// Gate in src1 rather than in src0's second half.
        split: bool,
    },
    /// CPY, CONT, DUP.
    Copy,
    /// CONCAT.
    Concat,
    /// REPEAT.
    Repeat,
    /// GET_ROWS from plain dtypes.
    GetRows,
    /// GET_ROWS from quantized dtypes.
    GetRowsQuant,
    /// SET_ROWS.
    SetRows,
    /// SUM_ROWS and MEAN.
    SumRows,
    /// SUM.
    Sum,
    /// ARGMAX.
    Argmax,
    /// NORM and RMS_NORM.
    Norm {
        /// RMS_NORM.
        rms: bool,
    },
    /// SOFT_MAX.
    SoftMax,
    /// DIAG_MASK_INF.
    DiagMaskInf,
    /// ROPE.
    Rope,
    /// CPY or SET_ROWS from F32 into a quantized dtype.
    Quantize {
        /// SET_ROWS (rows by index) rather than CPY (rows in order).
        set_rows: bool,
    },
    /// MUL_MAT for few columns.
    MulMatVec,
    /// MUL_MAT, tiled.
    MulMat,
    /// FLASH_ATTN_EXT.
    FlashAttn,
    /// SWIGLU_OAI (`glu.wgsl` with gpt-oss's activation).
    SwigluOai {
        /// Gate in src1 rather than in src0's second half.
        split: bool,
    },
    /// MUL_MAT_ID.
    MulMatId,
    /// ADD_ID.
    AddId,
    /// ARGSORT and TOP_K.
    Sort,
    /// CUMSUM.
    Cumsum,
    /// IM2COL.
    Im2col {
        /// 2-D (else 1-D).
        is_2d: bool,
    },
    /// POOL_2D and POOL_1D.
    Pool2d,
    /// UPSCALE.
    Upscale,
    /// PAD.
    Pad,
    /// GROUP_NORM.
    GroupNorm,
    /// L2_NORM (`norm.wgsl`).
    L2Norm,
    /// FILL, TRI, DIAG, DIAG_MASK_ZERO, ADD1, ROLL, PAD_REFLECT_1D, ARANGE, XIELU,
    /// TIMESTEP_EMBEDDING.
    IndexOp(IndexOp),
    /// CONV_2D, CONV_2D_DW, CONV_TRANSPOSE_1D, CONV_TRANSPOSE_2D.
    Conv(ConvOp),
    /// SET and ACC.
    SetAcc {
        /// ACC (else SET).
        add: bool,
    },
    /// COUNT_EQUAL.
    CountEqual,
    /// SSM_CONV.
    SsmConv,
    /// SSM_SCAN.
    SsmScan,
    /// SOLVE_TRI.
    SolveTri,
    /// RWKV_WKV6, GATED_LINEAR_ATTN, RWKV_WKV7 (a shader each).
    LinearAttn(LinearAttn),
    /// GATED_DELTA_NET.
    DeltaNet,
    /// WIN_PART and WIN_UNPART.
    Window {
        /// WIN_UNPART (else WIN_PART).
        unpart: bool,
    },
    /// GET_REL_POS.
    GetRelPos,
    /// ADD_REL_POS.
    AddRelPos,
}

/// One compiled kernel instance: kernel, binding stores, and the src0 dtype
/// where it picks the dequantizer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct KernelKey {
    /// The kernel.
    pub kernel: Kernel,
    /// How each slot is typed.
    pub stores: [Store; STORAGE_SLOTS],
    /// src0's dtype for kernels that dequantize (else F32).
    pub dtype: DType,
}

/// Everything needed to run one node.
#[derive(Debug, Clone, Copy)]
pub struct Launch {
    /// Which kernel instance.
    pub key: KernelKey,
    /// Its parameters (buffer offsets are filled in at compute time).
    pub params: Params,
    /// The tensors in the slots: destination, then sources.
    pub slots: [Option<TensorId>; STORAGE_SLOTS],
    /// Workgroups.
    pub groups: [u32; 3],
}

/// Why a node cannot run here.
pub type Refusal = String;

/// Plans `node`: `Ok(None)` for ops that compute nothing (views), `Err`
/// with a reason for what the kernels do not cover.
pub fn plan(ctx: &Context, node: TensorId, caps: &Caps) -> std::result::Result<Option<Launch>, Refusal> {
    let d = ctx.desc(node).map_err(|e| e.to_string())?;
    // Views compute nothing, and neither does an empty node (the engine's
    // op builders make every node over an empty source empty itself).
    if d.op.is_empty() || d.nelements() == 0 {
        return Ok(None);
    }
    let mut b = Builder {
        ctx,
        node,
        d,
        caps,
        stores: [Store::Unused; STORAGE_SLOTS],
        slots: [None; STORAGE_SLOTS],
        params: Params::default(),
    };
    match d.op {
        Op::Unary(u) => elementwise::map(&mut b, MapOp::Unary(u)),
        Op::Scale { scale, bias } => {
            b.params.f[0] = scale;
            b.params.f[1] = bias;
            elementwise::map(&mut b, MapOp::Scale)
        }
        Op::Clamp { min, max } => {
            b.params.f[0] = min;
            b.params.f[1] = max;
            elementwise::map(&mut b, MapOp::Clamp)
        }
        Op::LeakyRelu { negative_slope } => {
            b.params.f[0] = negative_slope;
            elementwise::map(&mut b, MapOp::LeakyRelu)
        }
        Op::Binary(op) => elementwise::binary(&mut b, op),
        Op::Glu { op, swapped } => elementwise::glu(&mut b, op, swapped),
        Op::Cpy | Op::Cont | Op::Dup => layout::copy(&mut b),
        Op::Concat { dim } => layout::concat(&mut b, dim),
        Op::Repeat => layout::repeat(&mut b),
        Op::GetRows => rows::get_rows(&mut b),
        Op::SetRows => rows::set_rows(&mut b),
        Op::Sum => reduce::sum(&mut b),
        Op::SumRows => reduce::sum_rows(&mut b, false),
        Op::Mean => reduce::sum_rows(&mut b, true),
        Op::Argmax => reduce::argmax(&mut b),
        Op::Norm { eps } => norm::norm(&mut b, false, eps),
        Op::RmsNorm { eps } => norm::norm(&mut b, true, eps),
        Op::SoftMax { scale, max_bias } => norm::soft_max(&mut b, scale, max_bias),
        Op::DiagMaskInf { n_past } => norm::diag_mask_inf(&mut b, n_past),
        Op::Rope(rp) => rope::rope(&mut b, &rp),
        Op::MulMat => matmul::mul_mat(&mut b),
        Op::FlashAttnExt { scale, max_bias, softcap } => attention::flash_attn(&mut b, scale, max_bias, softcap),
        Op::MulMatId => experts::mul_mat_id(&mut b),
        Op::AddId => experts::add_id(&mut b),
        Op::Argsort { order } => routing::sort(&mut b, order),
        Op::TopK => routing::sort(&mut b, SortOrder::Desc),
        Op::Cumsum => routing::cumsum(&mut b),
        Op::SwigluOai { alpha, limit, swapped } => elementwise::swiglu_oai(&mut b, alpha, limit, swapped),
        Op::None | Op::View | Op::Reshape | Op::Permute { .. } | Op::Transpose => Ok(None),
        Op::Im2col { conv, is_2d } => vision::im2col(&mut b, conv, is_2d),
        Op::Pool2d { op, k, s, p } => vision::pool(&mut b, op, k, s, p, true),
        Op::Upscale { mode, align_corners } => vision::upscale(&mut b, mode, align_corners),
        Op::Pad { .. } => vision::pad(&mut b),
        Op::GroupNorm { n_groups, eps } => vision::group_norm(&mut b, n_groups, eps),
        Op::L2Norm { eps } => norm::l2_norm(&mut b, eps),
        Op::Fill { .. }
        | Op::Tri(_)
        | Op::Diag
        | Op::DiagMaskZero { .. }
        | Op::Add1
        | Op::Roll { .. }
        | Op::PadReflect1d { .. }
        | Op::Arange { .. }
        | Op::TimestepEmbedding { .. }
        | Op::Xielu { .. } => small::index_op(&mut b),
        Op::SsmConv => ssm::ssm_conv(&mut b),
        Op::SsmScan { .. } => ssm::ssm_scan(&mut b),
        Op::Conv2d(_) | Op::Conv2dDw(_) | Op::ConvTranspose1d { .. } | Op::ConvTranspose2d { .. } => conv::conv(&mut b),
        Op::Pool1d { op, k, s, p } => vision::pool(&mut b, op, [k, 1], [s, 1], [p, 0], false),
        Op::Set { .. } | Op::Acc { .. } => set_acc::set_acc(&mut b),
        Op::CountEqual => reduce::count_equal(&mut b),
        Op::SolveTri => solve_tri::solve_tri(&mut b),
        Op::RwkvWkv6 | Op::GatedLinearAttn { .. } | Op::RwkvWkv7 => linear_attn::linear_attn(&mut b),
        Op::GatedDeltaNet { .. } => delta_net::gated_delta_net(&mut b),
        Op::WinPart { .. } | Op::WinUnpart { .. } => sam::window(&mut b),
        Op::GetRelPos => sam::get_rel_pos(&mut b),
        Op::AddRelPos => sam::add_rel_pos(&mut b),
    }
}

/// Collects one node's plan.
pub(crate) struct Builder<'a> {
    ctx: &'a Context,
    node: TensorId,
    d: &'a TensorDesc,
    caps: &'a Caps,
    stores: [Store; STORAGE_SLOTS],
    slots: [Option<TensorId>; STORAGE_SLOTS],
    params: Params,
}

/// Stores the kernels can read `dtype` from.
fn load_store(dtype: DType, caps: &Caps) -> Option<Store> {
    Some(match dtype {
        DType::F32 => Store::F32,
        DType::F16 if caps.shader_f16 => Store::F16,
        DType::F16 => Store::F16Packed,
        DType::BF16 => Store::Bf16,
        DType::I32 => Store::I32,
        _ => return None,
    })
}

/// The store kernels write `dtype` through.
fn write_store(dtype: DType, caps: &Caps) -> Option<Store> {
    Some(match dtype {
        DType::F32 => Store::F32,
        DType::F16 if caps.shader_f16 => Store::F16,
        DType::F16 => Store::F16Atomic,
        DType::BF16 => Store::Bf16Atomic,
        DType::I32 => Store::I32,
        _ => return None,
    })
}

/// The quantized dtypes CPY and SET_ROWS write from F32, in `QTYPE` order
/// of `quantize.wgsl` (the engine's set).
pub const QUANT_TARGETS: [DType; 5] = DType::QUANTIZE_TARGETS;

/// The quantized dtypes with a WGSL dequantizer (MUL_MAT, MUL_MAT_ID and
/// GET_ROWS): the engine's quantized weights and the lookup-table types.
pub const QUANTIZED: [DType; 13] = {
    let mut all = [DType::MXFP4; 13];
    let mut i = 0;
    while i < DType::QUANTIZED_WEIGHTS.len() {
        all[i] = DType::QUANTIZED_WEIGHTS[i];
        i += 1;
    }
    all[10] = DType::IQ4_NL;
    all[11] = DType::IQ4_XS;
    all
};

impl<'a> Builder<'a> {
    fn src(&self, i: usize) -> std::result::Result<(TensorId, &'a TensorDesc), Refusal> {
        let t = self.d.srcs[i].ok_or_else(|| format!("{} has no source {i}", self.d.op.name()))?;
        let d = self.ctx.desc(t).map_err(|e| e.to_string())?;
        Ok((t, d))
    }

    /// Binds tensor `t` (description `d`) to `slot` as `store`.
    fn bind(&mut self, slot: usize, t: TensorId, d: &TensorDesc, store: Store) -> std::result::Result<(), Refusal> {
        let unit = store.unit();
        let mut tp = TensorParams::default();
        for i in 0..4 {
            tp.ne[i] = u32::try_from(d.ne[i]).map_err(|_| format!("{:?} does not fit 32-bit indices", d.ne))?;
            if !d.nb[i].is_multiple_of(unit) {
                return Err(format!("stride {} of {} is not a multiple of {unit} bytes", d.nb[i], SLOT_NAMES[slot]));
            }
            tp.nb[i] = u32::try_from(d.nb[i] / unit).map_err(|_| "stride does not fit 32 bits".to_string())?;
        }
        if !d.view_offset.is_multiple_of(unit) {
            return Err(format!("view offset {} is not a multiple of {unit} bytes", d.view_offset));
        }
        // Quantized blocks are read and written 16 bits at a time: blocks start at even bytes
        // (but MXFP4's 17-byte blocks, which its dequantizer reads a byte at a time).
        let bytes = matches!(store, Store::Bytes | Store::BytesAtomic) && d.dtype != DType::MXFP4;
        if bytes && (!d.view_offset.is_multiple_of(2) || d.nb.iter().any(|nb| !nb.is_multiple_of(2))) {
            return Err(format!("quantized {} at an odd byte offset or stride", SLOT_NAMES[slot]));
        }
        if d.nelements() > u32::MAX as usize {
            return Err(format!("{} elements do not fit 32-bit indices", d.nelements()));
        }
        self.params.t[slot] = tp;
        self.stores[slot] = store;
        self.slots[slot] = Some(t);
        Ok(())
    }

    /// Binds the node as a quantized destination of `QUANT_TARGETS`, for a
    /// quantizing copy of the F32 source `src` (32 values per block).
    fn bind_quantized_dst(&mut self, src: &TensorDesc) -> std::result::Result<(), Refusal> {
        if !QUANT_TARGETS.contains(&self.d.dtype) || src.dtype != DType::F32 {
            return Err(format!("no kernel quantizes {} into {}", src.dtype, self.d.dtype));
        }
        if src.ne[0] != self.d.ne[0] || !src.ne[0].is_multiple_of(32) || !self.d.is_contiguous_rows() {
            return Err("quantizing needs whole rows of 32-element blocks".into());
        }
        self.bind(0, self.node, self.d, Store::BytesAtomic)
    }

    /// Binds the node itself as the destination, written as a float (or i32).
    fn bind_dst(&mut self) -> std::result::Result<(), Refusal> {
        let store =
            write_store(self.d.dtype, self.caps).ok_or_else(|| format!("cannot write {} here", self.d.dtype))?;
        self.bind(0, self.node, self.d, store)
    }

    /// Binds source `i` to slot `1 + i`, read as a plain dtype.
    fn bind_src(&mut self, i: usize) -> std::result::Result<&'a TensorDesc, Refusal> {
        let (t, d) = self.src(i)?;
        let store = load_store(d.dtype, self.caps).ok_or_else(|| format!("cannot read {} here", d.dtype))?;
        self.bind(1 + i, t, d, store)?;
        Ok(d)
    }

    /// The launch over `groups` (a count, laid out over the grid).
    fn finish(&self, kernel: Kernel, dtype: DType, groups: u64) -> std::result::Result<Option<Launch>, Refusal> {
        let groups = grid(groups, self.caps.max_groups)?;
        Ok(Some(Launch {
            key: KernelKey { kernel, stores: self.stores, dtype },
            params: self.params,
            slots: self.slots,
            groups,
        }))
    }
}

/// Lays `n` workgroups over up to three grid dimensions of at most `max`
/// each; kernels recover the flat index and skip the excess.
pub fn grid(n: u64, max: u32) -> std::result::Result<[u32; 3], Refusal> {
    let max = u64::from(max.max(1));
    if n <= max {
        return Ok([n as u32, 1, 1]);
    }
    let rest = n.div_ceil(max);
    if rest <= max {
        return Ok([max as u32, rest as u32, 1]);
    }
    let z = rest.div_ceil(max);
    if z > max {
        return Err(format!("{n} workgroups do not fit a dispatch"));
    }
    Ok([max as u32, max as u32, z as u32])
}

/// Workgroups of [`ELEMENT_WORKGROUP`] invocations covering `n` invocations.
fn groups_for(n: usize) -> u64 {
    (n as u64).div_ceil(ELEMENT_WORKGROUP)
}

/// Workgroups of the quantizing copies covering `blocks` blocks, one invocation each.
fn quantize_groups(blocks: usize) -> u64 {
    (blocks as u64).div_ceil(QUANTIZE_WORKGROUP)
}

// ---- sources ---------------------------------------------------------------

fn body(kernel: Kernel) -> &'static str {
    match kernel {
        Kernel::Map(_) => include_str!("../shaders/map.wgsl"),
        Kernel::Binary(_) => include_str!("../shaders/binary.wgsl"),
        Kernel::Glu { .. } => include_str!("../shaders/glu.wgsl"),
        Kernel::Copy => include_str!("../shaders/copy.wgsl"),
        Kernel::Concat => include_str!("../shaders/concat.wgsl"),
        Kernel::Repeat => include_str!("../shaders/repeat.wgsl"),
        Kernel::GetRows => include_str!("../shaders/get_rows.wgsl"),
        Kernel::GetRowsQuant => include_str!("../shaders/get_rows_q.wgsl"),
        Kernel::SetRows => include_str!("../shaders/set_rows.wgsl"),
        Kernel::SumRows => include_str!("../shaders/sum_rows.wgsl"),
        Kernel::Sum => include_str!("../shaders/sum.wgsl"),
        Kernel::Argmax => include_str!("../shaders/argmax.wgsl"),
        Kernel::Norm { .. } => include_str!("../shaders/norm.wgsl"),
        Kernel::SoftMax => include_str!("../shaders/soft_max.wgsl"),
        Kernel::DiagMaskInf => include_str!("../shaders/diag_mask_inf.wgsl"),
        Kernel::Rope => include_str!("../shaders/rope.wgsl"),
        Kernel::Quantize { .. } => include_str!("../shaders/quantize.wgsl"),
        Kernel::MulMatVec => include_str!("../shaders/mul_mat_vec.wgsl"),
        Kernel::MulMat => include_str!("../shaders/mul_mat.wgsl"),
        Kernel::FlashAttn => include_str!("../shaders/flash_attn.wgsl"),
        Kernel::SwigluOai { .. } => include_str!("../shaders/glu.wgsl"),
        Kernel::MulMatId => include_str!("../shaders/mul_mat_id.wgsl"),
        Kernel::AddId => include_str!("../shaders/add_id.wgsl"),
        Kernel::Sort => include_str!("../shaders/sort.wgsl"),
        Kernel::Cumsum => include_str!("../shaders/cumsum.wgsl"),
        Kernel::Im2col { .. } => include_str!("../shaders/im2col.wgsl"),
        Kernel::Pool2d => include_str!("../shaders/pool_2d.wgsl"),
        Kernel::Upscale => include_str!("../shaders/upscale.wgsl"),
        Kernel::Pad => include_str!("../shaders/pad.wgsl"),
        Kernel::GroupNorm => include_str!("../shaders/group_norm.wgsl"),
        Kernel::L2Norm => include_str!("../shaders/norm.wgsl"),
        Kernel::IndexOp(_) => include_str!("../shaders/index_ops.wgsl"),
        Kernel::Conv(_) => include_str!("../shaders/conv.wgsl"),
        Kernel::SetAcc { .. } => include_str!("../shaders/set_acc.wgsl"),
        Kernel::CountEqual => include_str!("../shaders/count_equal.wgsl"),
        Kernel::SsmConv => include_str!("../shaders/ssm_conv.wgsl"),
        Kernel::SsmScan => include_str!("../shaders/ssm_scan.wgsl"),
        Kernel::SolveTri => include_str!("../shaders/solve_tri.wgsl"),
        Kernel::LinearAttn(LinearAttn::Wkv6) => include_str!("../shaders/wkv6.wgsl"),
        Kernel::LinearAttn(LinearAttn::Gla) => include_str!("../shaders/gla.wgsl"),
        Kernel::LinearAttn(LinearAttn::Wkv7) => include_str!("../shaders/wkv7.wgsl"),
        Kernel::DeltaNet => include_str!("../shaders/delta_net.wgsl"),
        Kernel::Window { .. } => include_str!("../shaders/window.wgsl"),
        Kernel::GetRelPos => include_str!("../shaders/get_rel_pos.wgsl"),
        Kernel::AddRelPos => include_str!("../shaders/add_rel_pos.wgsl"),
    }
}

/// `scale_min_k4`: the six-bit scale and min of one sub-block of a Q4_K or
/// Q5_K block (they pack them alike).
const SCALE_MIN_K4: &str = include_str!("../shaders/scale_min_k4.wgsl");

/// `KVALUES_IQ4NL`: IQ4_NL's and IQ4_XS's table of nibble values.
const KVALUES_IQ4NL: &str = include_str!("../shaders/kvalues_iq4nl.wgsl");

/// The libraries that define `deq8` for src0 of `dtype`: its dequantizer,
/// after the helpers it calls.
fn dequantizer(dtype: DType) -> &'static [&'static str] {
    match dtype {
        DType::Q4_0 => &[include_str!("../shaders/deq_q4_0.wgsl")],
        DType::Q4_1 => &[include_str!("../shaders/deq_q4_1.wgsl")],
        DType::Q5_0 => &[include_str!("../shaders/deq_q5_0.wgsl")],
        DType::Q5_1 => &[include_str!("../shaders/deq_q5_1.wgsl")],
        DType::Q8_0 => &[include_str!("../shaders/deq_q8_0.wgsl")],
        DType::Q2_K => &[include_str!("../shaders/deq_q2_k.wgsl")],
        DType::Q3_K => &[include_str!("../shaders/deq_q3_k.wgsl")],
        DType::Q5_K => &[SCALE_MIN_K4, include_str!("../shaders/deq_q5_k.wgsl")],
        DType::Q4_K => &[SCALE_MIN_K4, include_str!("../shaders/deq_q4_k.wgsl")],
        DType::Q6_K => &[include_str!("../shaders/deq_q6_k.wgsl")],
        DType::IQ4_NL => &[KVALUES_IQ4NL, include_str!("../shaders/deq_iq4_nl.wgsl")],
        DType::IQ4_XS => &[KVALUES_IQ4NL, include_str!("../shaders/deq_iq4_xs.wgsl")],
        DType::MXFP4 => &[include_str!("../shaders/deq_mxfp4.wgsl")],
        _ => &[include_str!("../shaders/deq_float.wgsl")],
    }
}

/// `map.wgsl`'s `MAP_OP`: a unary op's position in [`UnaryOp::ALL`], then
/// SCALE, CLAMP and LEAKY_RELU.
fn map_op_index(op: MapOp) -> u32 {
    let unary = UnaryOp::ALL.len();
    (match op {
        MapOp::Unary(u) => UnaryOp::ALL.iter().position(|&x| x == u).unwrap_or(usize::MAX),
        MapOp::Scale => unary,
        MapOp::Clamp => unary + 1,
        MapOp::LeakyRelu => unary + 2,
    }) as u32
}

/// `glu.wgsl`'s `GLU_OP` for SWIGLU_OAI: after every [`GluOp`].
const SWIGLU_OAI_INDEX: u32 = GluOp::ALL.len() as u32;

/// `glu.wgsl`'s `GLU_OP`: the activation's position in [`GluOp::ALL`].
fn glu_op_index(op: GluOp) -> u32 {
    GluOp::ALL.iter().position(|&x| x == op).unwrap_or(usize::MAX) as u32
}

/// The activations `map.wgsl` and `glu.wgsl` share.
const ACTIVATIONS: &str = include_str!("../shaders/activations.wgsl");

/// `movN(d, s)`: moves one element from slot N to dst, as an integer when both are I32.
fn mover(stores: &[Store; STORAGE_SLOTS], slot: usize) -> String {
    let n = SLOT_NAMES[slot];
    if stores[slot] == Store::I32 && stores[0] == Store::I32 {
        format!("fn mov{}(d: u32, s: u32) {{ dst_sti(d, {n}_ldi(s)); }}\n", slot - 1)
    } else {
        format!("fn mov{}(d: u32, s: u32) {{ dst_st(d, {n}_ld(s)); }}\n", slot - 1)
    }
}

fn zeroer(stores: &[Store; STORAGE_SLOTS]) -> &'static str {
    if stores[0] == Store::I32 {
        "fn zero0(d: u32) { dst_sti(d, 0); }\n"
    } else {
        "fn zero0(d: u32) { dst_st(d, 0.0); }\n"
    }
}

/// `mask_at(c)`: the mask value for logits position `c` (0 without a mask),
/// repeating the mask over dims 2 and 3.
fn mask_reader(stores: &[Store; STORAGE_SLOTS], slot: usize) -> String {
    let n = SLOT_NAMES[slot];
    if stores[slot] == Store::Unused {
        "fn mask_at(c: vec4<u32>) -> f32 { return 0.0; }\n".to_string()
    } else {
        format!(
            "fn mask_at(c: vec4<u32>) -> f32 {{ return {n}_ld({n}_at(vec4<u32>(c.x, c.y, c.z % p.{n}.ne.z, c.w % p.{n}.ne.w))); }}\n"
        )
    }
}

/// `set_acc.wgsl`'s element functions: from src0, and inside the view
/// (src1's element, or for ACC the sum), moved as integers for I32.
fn set_acc_movers(stores: &[Store; STORAGE_SLOTS], add: bool) -> &'static str {
    if add {
        "fn elem_from_src0(d: u32, a: u32) { dst_st(d, src0_ld(a)); }
fn elem_from_view(d: u32, a: u32, b: u32) { dst_st(d, src0_ld(a) + src1_ld(b)); }"
    } else if stores[0] == Store::I32 {
        "fn elem_from_src0(d: u32, a: u32) { dst_sti(d, src0_ldi(a)); }
fn elem_from_view(d: u32, a: u32, b: u32) { dst_sti(d, src1_ldi(b)); }"
    } else {
        "fn elem_from_src0(d: u32, a: u32) { dst_st(d, src0_ld(a)); }
fn elem_from_view(d: u32, a: u32, b: u32) { dst_st(d, src1_ld(b)); }"
    }
}

/// `sink_at(h)`: head `h`'s attention sink from `slot`, or -inf without
/// sinks (a logit that adds nothing to a softmax).
fn sink_reader(stores: &[Store; STORAGE_SLOTS], slot: usize) -> String {
    let n = SLOT_NAMES[slot];
    if stores[slot] == Store::Unused {
        "fn sink_at(h: u32) -> f32 { return bitcast<f32>(0xff800000u); }\n".to_string()
    } else {
        format!("fn sink_at(h: u32) -> f32 {{ return {n}_ld({n}_at(vec4<u32>(h, 0u, 0u, 0u))); }}\n")
    }
}

/// The WGSL source of a kernel instance.
pub fn source(key: &KernelKey) -> String {
    let st = &key.stores;
    let mut consts = shared_constants(key);
    let mut libs: Vec<&str> = Vec::new();
    match key.kernel {
        Kernel::Map(op) => {
            consts += &format!("const MAP_OP: u32 = {}u;", map_op_index(op));
            libs.push(ACTIVATIONS);
        }
        Kernel::Binary(op) => {
            let i = BinaryOp::ALL.iter().position(|&x| x == op).unwrap_or(3);
            consts += &format!("const BIN_OP: u32 = {i}u;");
        }
        Kernel::Glu { op: _, split } | Kernel::SwigluOai { split } => {
            let index = match key.kernel {
                Kernel::Glu { op, .. } => glu_op_index(op),
                _ => SWIGLU_OAI_INDEX,
            };
            consts += &format!("const GLU_OP: u32 = {index}u;\n");
            libs.push(ACTIVATIONS);
            consts.push_str(if split {
                "fn glu_pair(c: vec4<u32>) -> vec2<f32> { return vec2<f32>(src0_ld(src0_at(c)), src1_ld(src1_at(c))); }"
            } else {
                "fn glu_pair(c: vec4<u32>) -> vec2<f32> {
    let half = vec4<u32>(p.dst.ne.x, 0u, 0u, 0u);
    let a = src0_ld(src0_at(c));
    let b = src0_ld(src0_at(c + half));
    return select(vec2<f32>(a, b), vec2<f32>(b, a), p.u.x != 0u);
}"
            });
        }
        Kernel::Copy | Kernel::Repeat => consts += &mover(st, 1),
        Kernel::Concat => {
            consts += &mover(st, 1);
            consts += &mover(st, 2);
        }
        Kernel::GetRows => {
            consts += &mover(st, 1);
            consts += zeroer(st);
        }
        Kernel::GetRowsQuant | Kernel::MulMatVec | Kernel::MulMat | Kernel::MulMatId => {
            libs.extend(dequantizer(key.dtype))
        }
        Kernel::Norm { rms } => consts += &format!("const NORM_RMS: bool = {rms};\nconst NORM_L2: bool = false;"),
        Kernel::L2Norm => consts += "const NORM_RMS: bool = true;\nconst NORM_L2: bool = true;",
        Kernel::Im2col { is_2d } => consts += &format!("const IS_2D: bool = {is_2d};"),
        Kernel::Quantize { set_rows } => {
            let qtype = QUANT_TARGETS.iter().position(|&t| t == key.dtype).unwrap_or(usize::MAX);
            consts += &format!("const QTYPE: u32 = {qtype}u;\n");
            consts.push_str(if set_rows {
                "fn dst_row(c: vec4<u32>) -> u32 {
    let r = src1_ldi(src1_at(vec4<u32>(c.y, c.z % p.src1.ne.y, c.w % p.src1.ne.z, 0u)));
    if (r < 0 || u32(r) >= p.dst.ne.y) { return 0xffffffffu; }
    return dst_at(vec4<u32>(0u, u32(r), c.z, c.w));
}"
            } else {
                "fn dst_row(c: vec4<u32>) -> u32 {
    let r = c.y + p.src0.ne.y * (c.z + p.src0.ne.z * c.w);
    let d = unravel(r, vec4<u32>(p.dst.ne.y, p.dst.ne.z, p.dst.ne.w, 1u));
    return dst_at(vec4<u32>(0u, d.x, d.y, d.z));
}"
            });
        }
        Kernel::SoftMax => {
            consts += &mask_reader(st, 2);
            consts += &sink_reader(st, 3);
        }
        Kernel::FlashAttn => {
            consts += &mask_reader(st, 4);
            consts += &sink_reader(st, 5);
        }
        Kernel::SetRows
        | Kernel::SumRows
        | Kernel::Sum
        | Kernel::Argmax
        | Kernel::DiagMaskInf
        | Kernel::Rope
        | Kernel::AddId
        | Kernel::Sort
        | Kernel::Cumsum
        | Kernel::Pool2d
        | Kernel::Upscale
        | Kernel::Pad
        | Kernel::GroupNorm
        | Kernel::SsmConv => {}
        Kernel::SsmScan => libs.push(ACTIVATIONS),
        Kernel::Conv(op) => consts += &format!("const CONV_OP: u32 = {}u;", op.index()),
        Kernel::SetAcc { add } => consts += set_acc_movers(st, add),
        Kernel::CountEqual
        | Kernel::SolveTri
        | Kernel::LinearAttn(_)
        | Kernel::DeltaNet
        | Kernel::GetRelPos
        | Kernel::AddRelPos => {}
        Kernel::Window { unpart } => consts += &format!("const WIN_UNPART: bool = {unpart};"),
        Kernel::IndexOp(op) => {
            consts += &format!("const INDEX_OP: u32 = {}u;\n", op.index());
            consts.push_str(if st[1] == Store::Unused {
                "fn src0_value(c: vec4<u32>) -> f32 { return 0.0; }\n"
            } else {
                "fn src0_value(c: vec4<u32>) -> f32 { return src0_ld(src0_at(c)); }\n"
            });
            consts.push_str(if st[2] == Store::Unused {
                "fn src1_first() -> f32 { return 0.0; }"
            } else {
                "fn src1_first() -> f32 { return src1_ld(src1_at(vec4<u32>(0u))); }"
            });
            libs.push(ACTIVATIONS);
        }
    }
    if key.kernel == Kernel::Rope {
        consts.push_str(if st[3] == Store::Unused {
            "fn freq_factor(j: u32) -> f32 { return 1.0; }"
        } else {
            "fn freq_factor(j: u32) -> f32 { return src2_ld(src2_at(vec4<u32>(j, 0u, 0u, 0u))); }"
        });
    }
    compose(st, &consts, &libs, body(key.kernel))
}

/// Compiled kernels of one device, each compiled on first use.
pub struct Kernels {
    gpu: Arc<Gpu>,
    cache: LazyCache<KernelKey, Pipeline>,
}

impl Kernels {
    /// An empty cache for `gpu`.
    pub fn new(gpu: &Arc<Gpu>) -> Self {
        Self { gpu: gpu.clone(), cache: LazyCache::default() }
    }

    /// The pipeline for `key`, compiled now if it is new.
    pub fn pipeline(&self, key: &KernelKey) -> Result<Pipeline> {
        self.cache.get_or_try_insert_with(key, || {
            let label = format!("{:?} {:?} {}", key.kernel, key.stores, key.dtype);
            self.gpu.compile(&label, &source(key))
        })
    }

    /// Number of compiled kernels.
    pub fn compiled(&self) -> usize {
        self.cache.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grid_covers_counts() {
        assert_eq!(grid(10, 65535).unwrap(), [10, 1, 1]);
        assert_eq!(grid(65536, 65535).unwrap(), [65535, 2, 1]);
        let g = grid(5_000_000_000, 65535).unwrap();
        assert!(u64::from(g[0]) * u64::from(g[1]) * u64::from(g[2]) >= 5_000_000_000);
        assert!(grid(u64::MAX, 65535).is_err());
    }

    /// Each `case N:` of `map.wgsl` and `glu.wgsl` is commented with the op
    /// whose index is N, so a reordered enum cannot silently swap functions.
    #[test]
    fn shader_cases_match_op_indices() {
        let map = include_str!("../shaders/map.wgsl");
        let named = UnaryOp::ALL.iter().map(|&u| (MapOp::Unary(u), u.name())).chain([
            (MapOp::Scale, "SCALE"),
            (MapOp::Clamp, "CLAMP"),
            (MapOp::LeakyRelu, "LEAKY_RELU"),
        ]);
        for (op, name) in named {
            let line = map.lines().find(|l| l.trim_start().starts_with(&format!("case {}u:", map_op_index(op))));
            assert!(line.is_some_and(|l| l.ends_with(&format!("// {name}"))), "{name}: {line:?}");
        }
        let glu = include_str!("../shaders/glu.wgsl");
        for op in GluOp::ALL {
            let line = glu.lines().find(|l| l.trim_start().starts_with(&format!("case {}u:", glu_op_index(op))));
            assert!(line.is_some_and(|l| l.ends_with(&format!("// {}", op.name()))), "{}: {line:?}", op.name());
        }
        let line = glu.lines().find(|l| l.trim_start().starts_with(&format!("case {SWIGLU_OAI_INDEX}u:")));
        assert!(line.is_some_and(|l| l.ends_with("// SWIGLU_OAI")), "SWIGLU_OAI: {line:?}");
        // The cases of `index_value` (helpers above it have switches of their own).
        let index_ops = include_str!("../shaders/index_ops.wgsl");
        let index_ops = &index_ops[index_ops.find("fn index_value").unwrap_or(0)..];
        let names = [
            "FILL",
            "TRI",
            "DIAG",
            "DIAG_MASK_ZERO",
            "ADD1",
            "ROLL",
            "PAD_REFLECT_1D",
            "ARANGE",
            "XIELU",
            "TIMESTEP_EMBEDDING",
        ];
        for (op, name) in IndexOp::ALL.into_iter().zip(names) {
            let case = format!("case {}u", op.index());
            let line = index_ops.lines().find(|l| l.trim_start().starts_with(&case));
            assert!(line.is_some_and(|l| l.ends_with(&format!("// {name}"))), "{name}: {line:?}");
        }
    }
}
