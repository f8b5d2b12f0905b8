//! Tensors and graphs on the wire: what a client says about the tensors of
//! a split, in a form the server can check before it builds anything.
//!
//! A graph is a list of tensors in topological order: every source index
//! names an earlier tensor. A tensor is either *computed* (a node of the
//! split, with its op and sources) or *external* (memory the nodes read:
//! weights, inputs copied in, results of earlier splits), described only by
//! its layout. The server rebuilds every computed tensor with the engine's
//! own op builders from the tensors it already built, and refuses the graph
//! when the result differs from what the client claimed (see
//! `server::graph_build`), so a node never reaches a kernel with a shape,
//! stride or type the op rules do not allow.

use gantry_engine::{
    BinaryOp, ConvParams, DType, GluOp, MAX_DIMS, MAX_SRC, Op, PoolOp, RopeMode, RopeParams, ScaleMode, SortOrder,
    TriType, UnaryOp,
};

use super::codec::{Reader, WireError, Writer, wire_err};

/// Where a tensor's first byte is on the server: a buffer handle and a byte offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WireLocation {
    /// The buffer's handle (from an alloc reply).
    pub buffer: u64,
    /// Bytes from the start of the buffer.
    pub offset: u64,
}

/// One tensor of a [`WireGraph`].
#[derive(Debug, Clone, PartialEq)]
pub struct WireTensor<'a> {
    /// A node to compute (else an external the nodes read).
    pub computed: bool,
    /// On the client, the tensor reads another's memory (an in-place op's result).
    pub view: bool,
    /// Element type.
    pub dtype: DType,
    /// Elements per dimension.
    pub ne: [usize; MAX_DIMS],
    /// Byte strides.
    pub nb: [usize; MAX_DIMS],
    /// The op ([`Op::None`] for externals).
    pub op: Op,
    /// Sources, as indices of earlier tensors of the graph.
    pub srcs: [Option<u32>; MAX_SRC],
    /// Where the tensor's bytes are (absent when only asking whether an op is supported).
    pub location: Option<WireLocation>,
    /// The client's name of the tensor, for messages.
    pub name: &'a str,
}

/// A split's tensors, externals and nodes, in topological order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct WireGraph<'a> {
    /// The tensors.
    pub tensors: Vec<WireTensor<'a>>,
}

/// Fewest bytes one encoded tensor takes (flags, dtype, shape, strides, op
/// tag, sources, name length), for bounding a list's length by the message.
pub const MIN_TENSOR_BYTES: usize = 1 + 1 + 8 * MAX_DIMS * 2 + 1 + 4 * MAX_SRC + 4;

const NO_SRC: u32 = u32::MAX;
const FLAG_COMPUTED: u8 = 1;
const FLAG_VIEW: u8 = 2;
const FLAG_LOCATION: u8 = 4;

/// The wire code of a dtype: its position in [`DType::ALL`].
pub fn dtype_code(dtype: DType) -> u8 {
    DType::ALL.iter().position(|&d| d == dtype).unwrap_or(0) as u8
}

/// The dtype of a wire code.
pub fn dtype_of(code: u8) -> Result<DType, WireError> {
    DType::ALL.get(code as usize).copied().ok_or_else(|| wire_err!("unknown dtype code {code}"))
}

fn write_op(w: &mut Writer, op: &Op) {
    // Every op of the engine has a code; an op added to the engine without
    // one fails to compile here, so the protocol cannot silently drop it.
    match *op {
        Op::None => w.u8(0),
        Op::View => w.u8(1),
        Op::Reshape => w.u8(2),
        Op::Permute { axes } => {
            w.u8(3);
            w.raw(&axes);
        }
        Op::Transpose => w.u8(4),
        Op::Cpy => w.u8(5),
        Op::Cont => w.u8(6),
        Op::Dup => w.u8(7),
        Op::GetRows => w.u8(8),
        Op::SetRows => w.u8(9),
        Op::Binary(b) => {
            w.u8(10);
            w.u8(BinaryOp::ALL.iter().position(|&x| x == b).unwrap_or(0) as u8);
        }
        Op::Scale { scale, bias } => {
            w.u8(11);
            w.f32(scale);
            w.f32(bias);
        }
        Op::Clamp { min, max } => {
            w.u8(12);
            w.f32(min);
            w.f32(max);
        }
        Op::Unary(u) => {
            w.u8(13);
            w.u8(UnaryOp::ALL.iter().position(|&x| x == u).unwrap_or(0) as u8);
        }
        Op::Glu { op, swapped } => {
            w.u8(14);
            w.u8(GluOp::ALL.iter().position(|&x| x == op).unwrap_or(0) as u8);
            w.u8(u8::from(swapped));
        }
        Op::Sum => w.u8(15),
        Op::SumRows => w.u8(16),
        Op::Mean => w.u8(17),
        Op::Argmax => w.u8(18),
        Op::Norm { eps } => {
            w.u8(19);
            w.f32(eps);
        }
        Op::RmsNorm { eps } => {
            w.u8(20);
            w.f32(eps);
        }
        Op::SoftMax { scale, max_bias } => {
            w.u8(21);
            w.f32(scale);
            w.f32(max_bias);
        }
        Op::DiagMaskInf { n_past } => {
            w.u8(22);
            w.usize(n_past);
        }
        Op::Rope(p) => {
            w.u8(23);
            w.usize(p.n_dims);
            w.u8(match p.mode {
                RopeMode::Normal => 0,
                RopeMode::Neox => 1,
            });
            w.usize(p.n_ctx_orig);
            for v in [p.freq_base, p.freq_scale, p.ext_factor, p.attn_factor, p.beta_fast, p.beta_slow] {
                w.f32(v);
            }
        }
        Op::MulMat => w.u8(24),
        Op::Concat { dim } => {
            w.u8(25);
            w.u8(dim);
        }
        Op::Repeat => w.u8(26),
        Op::FlashAttnExt { scale, max_bias, softcap } => {
            w.u8(27);
            w.f32(scale);
            w.f32(max_bias);
            w.f32(softcap);
        }
        Op::LeakyRelu { negative_slope } => {
            w.u8(28);
            w.f32(negative_slope);
        }
        Op::MulMatId => w.u8(29),
        Op::AddId => w.u8(30),
        Op::Argsort { order } => {
            w.u8(31);
            w.u8(match order {
                SortOrder::Asc => 0,
                SortOrder::Desc => 1,
            });
        }
        Op::TopK => w.u8(32),
        Op::Cumsum => w.u8(33),
        Op::SwigluOai { alpha, limit, swapped } => {
            w.u8(34);
            w.f32(alpha);
            w.f32(limit);
            w.u8(u8::from(swapped));
        }
        Op::Im2col { conv, is_2d } => {
            w.u8(35);
            write_conv(w, &conv);
            w.u8(u8::from(is_2d));
        }
        Op::Conv2d(conv) => {
            w.u8(36);
            write_conv(w, &conv);
        }
        Op::Conv2dDw(conv) => {
            w.u8(37);
            write_conv(w, &conv);
        }
        Op::ConvTranspose1d { stride } => {
            w.u8(38);
            w.u32(stride);
        }
        Op::ConvTranspose2d { stride } => {
            w.u8(39);
            w.u32(stride);
        }
        Op::Pool1d { op, k, s, p } => {
            w.u8(40);
            w.u8(op.ggml_code() as u8);
            for v in [k, s, p] {
                w.u32(v);
            }
        }
        Op::Pool2d { op, k, s, p } => {
            w.u8(41);
            w.u8(op.ggml_code() as u8);
            for v in [k, s, p].concat() {
                w.u32(v);
            }
        }
        Op::Upscale { mode, align_corners } => {
            w.u8(42);
            w.u8(mode.ggml_code() as u8);
            w.u8(u8::from(align_corners));
        }
        Op::Pad { lp, rp, circular } => {
            w.u8(43);
            for v in [lp, rp].concat() {
                w.u32(v);
            }
            w.u8(u8::from(circular));
        }
        Op::PadReflect1d { p0, p1 } => {
            w.u8(44);
            w.u32(p0);
            w.u32(p1);
        }
        Op::Roll { shift } => {
            w.u8(45);
            for v in shift {
                w.u32(v as u32);
            }
        }
        Op::GroupNorm { n_groups, eps } => {
            w.u8(46);
            w.u32(n_groups);
            w.f32(eps);
        }
        Op::L2Norm { eps } => {
            w.u8(47);
            w.f32(eps);
        }
        Op::Arange { start, stop, step } => {
            w.u8(48);
            w.f32(start);
            w.f32(stop);
            w.f32(step);
        }
        Op::TimestepEmbedding { dim, max_period } => {
            w.u8(49);
            w.u32(dim);
            w.u32(max_period as u32);
        }
        Op::Xielu { alpha_n, alpha_p, beta, eps } => {
            w.u8(50);
            for v in [alpha_n, alpha_p, beta, eps] {
                w.f32(v);
            }
        }
        Op::Fill { c } => {
            w.u8(51);
            w.f32(c);
        }
        Op::Tri(kind) => {
            w.u8(52);
            w.u8(TriType::ALL.iter().position(|&k| k == kind).unwrap_or(0) as u8);
        }
        Op::Diag => w.u8(53),
        Op::DiagMaskZero { n_past } => {
            w.u8(54);
            w.usize(n_past);
        }
        Op::Set { nb, offset } | Op::Acc { nb, offset } => {
            w.u8(if matches!(op, Op::Set { .. }) { 55 } else { 56 });
            for v in nb {
                w.usize(v);
            }
            w.usize(offset);
        }
        Op::Add1 => w.u8(57),
        Op::CountEqual => w.u8(58),
        Op::SsmConv => w.u8(59),
        Op::SolveTri => w.u8(61),
        Op::SsmScan { states } => {
            w.u8(60);
            w.u32(states);
        }
        Op::RwkvWkv6 => w.u8(62),
        Op::GatedLinearAttn { scale } => {
            w.u8(63);
            w.f32(scale);
        }
        Op::RwkvWkv7 => w.u8(64),
        Op::GatedDeltaNet { states } => {
            w.u8(65);
            w.u32(states);
        }
        Op::WinPart { npx, npy, w: side } => {
            w.u8(66);
            w.u32(npx);
            w.u32(npy);
            w.u32(side);
        }
        Op::WinUnpart { w: side } => {
            w.u8(67);
            w.u32(side);
        }
        Op::GetRelPos => w.u8(68),
        Op::AddRelPos => w.u8(69),
    }
}

fn write_conv(w: &mut Writer, c: &ConvParams) {
    for v in [c.stride, c.pad, c.dilation].concat() {
        w.u32(v);
    }
}

fn read_conv(r: &mut Reader<'_>, op: &str) -> Result<ConvParams, WireError> {
    let mut v = [0u32; 6];
    for x in &mut v {
        *x = r.u32(op)?;
    }
    Ok(ConvParams { stride: [v[0], v[1]], pad: [v[2], v[3]], dilation: [v[4], v[5]] })
}

fn read_pool_op(r: &mut Reader<'_>) -> Result<PoolOp, WireError> {
    match r.u8("pool op")? {
        0 => Ok(PoolOp::Max),
        1 => Ok(PoolOp::Avg),
        code => Err(wire_err!("unknown pool op {code}")),
    }
}

fn read_u32s<const N: usize>(r: &mut Reader<'_>, what: &str) -> Result<[u32; N], WireError> {
    let mut v = [0u32; N];
    for x in &mut v {
        *x = r.u32(what)?;
    }
    Ok(v)
}

fn read_op(r: &mut Reader<'_>) -> Result<Op, WireError> {
    let tag = r.u8("op")?;
    Ok(match tag {
        0 => Op::None,
        1 => Op::View,
        2 => Op::Reshape,
        3 => {
            let a = r.take(4, "PERMUTE axes")?;
            Op::Permute { axes: [a[0], a[1], a[2], a[3]] }
        }
        4 => Op::Transpose,
        5 => Op::Cpy,
        6 => Op::Cont,
        7 => Op::Dup,
        8 => Op::GetRows,
        9 => Op::SetRows,
        10 => {
            let code = r.u8("binary op")?;
            Op::Binary(*BinaryOp::ALL.get(code as usize).ok_or_else(|| wire_err!("unknown binary op {code}"))?)
        }
        11 => Op::Scale { scale: r.f32("SCALE scale")?, bias: r.f32("SCALE bias")? },
        12 => Op::Clamp { min: r.f32("CLAMP min")?, max: r.f32("CLAMP max")? },
        13 => {
            let code = r.u8("unary op")?;
            Op::Unary(*UnaryOp::ALL.get(code as usize).ok_or_else(|| wire_err!("unknown unary op {code}"))?)
        }
        14 => {
            let code = r.u8("GLU op")?;
            let op = *GluOp::ALL.get(code as usize).ok_or_else(|| wire_err!("unknown GLU op {code}"))?;
            Op::Glu { op, swapped: r.bool("GLU swapped")? }
        }
        15 => Op::Sum,
        16 => Op::SumRows,
        17 => Op::Mean,
        18 => Op::Argmax,
        19 => Op::Norm { eps: r.f32("NORM eps")? },
        20 => Op::RmsNorm { eps: r.f32("RMS_NORM eps")? },
        21 => Op::SoftMax { scale: r.f32("SOFT_MAX scale")?, max_bias: r.f32("SOFT_MAX max_bias")? },
        22 => Op::DiagMaskInf { n_past: r.usize("DIAG_MASK_INF n_past")? },
        23 => {
            let n_dims = r.usize("ROPE n_dims")?;
            let mode = match r.u8("ROPE mode")? {
                0 => RopeMode::Normal,
                1 => RopeMode::Neox,
                code => return Err(wire_err!("unknown ROPE mode {code}")),
            };
            let n_ctx_orig = r.usize("ROPE n_ctx_orig")?;
            let mut f = [0f32; 6];
            for v in &mut f {
                *v = r.f32("ROPE parameter")?;
            }
            Op::Rope(RopeParams {
                n_dims,
                mode,
                n_ctx_orig,
                freq_base: f[0],
                freq_scale: f[1],
                ext_factor: f[2],
                attn_factor: f[3],
                beta_fast: f[4],
                beta_slow: f[5],
            })
        }
        24 => Op::MulMat,
        25 => Op::Concat { dim: r.u8("CONCAT dim")? },
        26 => Op::Repeat,
        27 => Op::FlashAttnExt {
            scale: r.f32("FLASH_ATTN_EXT scale")?,
            max_bias: r.f32("FLASH_ATTN_EXT max_bias")?,
            softcap: r.f32("FLASH_ATTN_EXT softcap")?,
        },
        28 => Op::LeakyRelu { negative_slope: r.f32("LEAKY_RELU negative_slope")? },
        29 => Op::MulMatId,
        30 => Op::AddId,
        31 => Op::Argsort {
            order: match r.u8("ARGSORT order")? {
                0 => SortOrder::Asc,
                1 => SortOrder::Desc,
                code => return Err(wire_err!("unknown ARGSORT order {code}")),
            },
        },
        32 => Op::TopK,
        33 => Op::Cumsum,
        34 => Op::SwigluOai {
            alpha: r.f32("SWIGLU_OAI alpha")?,
            limit: r.f32("SWIGLU_OAI limit")?,
            swapped: r.bool("SWIGLU_OAI swapped")?,
        },
        35 => Op::Im2col { conv: read_conv(r, "IM2COL parameters")?, is_2d: r.bool("IM2COL is_2d")? },
        36 => Op::Conv2d(read_conv(r, "CONV_2D parameters")?),
        37 => Op::Conv2dDw(read_conv(r, "CONV_2D_DW parameters")?),
        38 => Op::ConvTranspose1d { stride: r.u32("CONV_TRANSPOSE_1D stride")? },
        39 => Op::ConvTranspose2d { stride: r.u32("CONV_TRANSPOSE_2D stride")? },
        40 => {
            let op = read_pool_op(r)?;
            let [k, s, p] = read_u32s(r, "POOL_1D parameters")?;
            Op::Pool1d { op, k, s, p }
        }
        41 => {
            let op = read_pool_op(r)?;
            let v: [u32; 6] = read_u32s(r, "POOL_2D parameters")?;
            Op::Pool2d { op, k: [v[0], v[1]], s: [v[2], v[3]], p: [v[4], v[5]] }
        }
        42 => Op::Upscale {
            mode: match r.u8("UPSCALE mode")? {
                0 => ScaleMode::Nearest,
                1 => ScaleMode::Bilinear,
                code => return Err(wire_err!("unknown UPSCALE mode {code}")),
            },
            align_corners: r.bool("UPSCALE align_corners")?,
        },
        43 => {
            let v: [u32; 8] = read_u32s(r, "PAD padding")?;
            Op::Pad { lp: [v[0], v[1], v[2], v[3]], rp: [v[4], v[5], v[6], v[7]], circular: r.bool("PAD circular")? }
        }
        44 => Op::PadReflect1d { p0: r.u32("PAD_REFLECT_1D p0")?, p1: r.u32("PAD_REFLECT_1D p1")? },
        45 => Op::Roll { shift: read_u32s::<4>(r, "ROLL shift")?.map(|v| v as i32) },
        46 => Op::GroupNorm { n_groups: r.u32("GROUP_NORM n_groups")?, eps: r.f32("GROUP_NORM eps")? },
        47 => Op::L2Norm { eps: r.f32("L2_NORM eps")? },
        48 => Op::Arange { start: r.f32("ARANGE start")?, stop: r.f32("ARANGE stop")?, step: r.f32("ARANGE step")? },
        49 => Op::TimestepEmbedding {
            dim: r.u32("TIMESTEP_EMBEDDING dim")?,
            max_period: r.u32("TIMESTEP_EMBEDDING max_period")? as i32,
        },
        50 => Op::Xielu {
            alpha_n: r.f32("XIELU alpha_n")?,
            alpha_p: r.f32("XIELU alpha_p")?,
            beta: r.f32("XIELU beta")?,
            eps: r.f32("XIELU eps")?,
        },
        51 => Op::Fill { c: r.f32("FILL value")? },
        52 => {
            let code = r.u8("TRI type")?;
            Op::Tri(*TriType::ALL.get(code as usize).ok_or_else(|| wire_err!("unknown TRI type {code}"))?)
        }
        53 => Op::Diag,
        54 => Op::DiagMaskZero { n_past: r.usize("DIAG_MASK_ZERO n_past")? },
        55 | 56 => {
            let nb = [r.usize("view stride")?, r.usize("view stride")?, r.usize("view stride")?];
            let offset = r.usize("view offset")?;
            if tag == 55 { Op::Set { nb, offset } } else { Op::Acc { nb, offset } }
        }
        57 => Op::Add1,
        58 => Op::CountEqual,
        59 => Op::SsmConv,
        61 => Op::SolveTri,
        60 => Op::SsmScan { states: r.u32("SSM_SCAN states")? },
        62 => Op::RwkvWkv6,
        63 => Op::GatedLinearAttn { scale: r.f32("GATED_LINEAR_ATTN scale")? },
        64 => Op::RwkvWkv7,
        65 => Op::GatedDeltaNet { states: r.u32("GATED_DELTA_NET states")? },
        66 => Op::WinPart { npx: r.u32("WIN_PART npx")?, npy: r.u32("WIN_PART npy")?, w: r.u32("WIN_PART w")? },
        67 => Op::WinUnpart { w: r.u32("WIN_UNPART w")? },
        68 => Op::GetRelPos,
        69 => Op::AddRelPos,
        // There is no way to name code to run: an unknown tag is refused.
        other => return Err(wire_err!("unknown op code {other} (custom ops are not accepted)")),
    })
}

impl WireTensor<'_> {
    /// Appends the tensor to a message.
    pub fn write(&self, w: &mut Writer) {
        let flags = if self.computed { FLAG_COMPUTED } else { 0 }
            | if self.view { FLAG_VIEW } else { 0 }
            | if self.location.is_some() { FLAG_LOCATION } else { 0 };
        w.u8(flags);
        w.u8(dtype_code(self.dtype));
        for &n in &self.ne {
            w.usize(n);
        }
        for &n in &self.nb {
            w.usize(n);
        }
        write_op(w, &self.op);
        for s in &self.srcs {
            w.u32(s.unwrap_or(NO_SRC));
        }
        if let Some(l) = self.location {
            w.u64(l.buffer);
            w.u64(l.offset);
        }
        w.str(self.name);
    }
}

impl<'a> WireTensor<'a> {
    /// Reads tensor number `index` of a graph: its sources must be earlier tensors.
    pub fn read(r: &mut Reader<'a>, index: usize) -> Result<Self, WireError> {
        let flags = r.u8("tensor flags")?;
        if flags & !(FLAG_COMPUTED | FLAG_VIEW | FLAG_LOCATION) != 0 {
            return Err(wire_err!("tensor {index}: unknown flags {flags:#x}"));
        }
        let dtype = dtype_of(r.u8("tensor dtype")?)?;
        let mut ne = [0; MAX_DIMS];
        for n in &mut ne {
            *n = r.usize("tensor shape")?;
        }
        let mut nb = [0; MAX_DIMS];
        for n in &mut nb {
            *n = r.usize("tensor strides")?;
        }
        let op = read_op(r)?;
        let mut srcs = [None; MAX_SRC];
        for s in &mut srcs {
            let v = r.u32("tensor source")?;
            if v != NO_SRC {
                if v as usize >= index {
                    return Err(wire_err!(
                        "tensor {index}: source {v} is not an earlier tensor (graphs are in topological order)"
                    ));
                }
                *s = Some(v);
            }
        }
        let location = if flags & FLAG_LOCATION != 0 {
            Some(WireLocation { buffer: r.u64("tensor buffer")?, offset: r.u64("tensor offset")? })
        } else {
            None
        };
        let name = r.str(gantry_engine::tensor::MAX_NAME, "tensor name")?;
        Ok(Self {
            computed: flags & FLAG_COMPUTED != 0,
            view: flags & FLAG_VIEW != 0,
            dtype,
            ne,
            nb,
            op,
            srcs,
            location,
            name,
        })
    }
}

impl WireGraph<'_> {
    /// Appends the graph to a message.
    pub fn write(&self, w: &mut Writer) {
        w.u32(self.tensors.len() as u32);
        for t in &self.tensors {
            t.write(w);
        }
    }
}

impl<'a> WireGraph<'a> {
    /// Reads a graph of at most `max_tensors` tensors.
    pub fn read(r: &mut Reader<'a>, max_tensors: usize) -> Result<Self, WireError> {
        let n = r.count(max_tensors, MIN_TENSOR_BYTES, "graph tensors")?;
        let mut tensors = Vec::with_capacity(n);
        for i in 0..n {
            tensors.push(WireTensor::read(r, i)?);
        }
        Ok(Self { tensors })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample_ops() -> Vec<Op> {
        let mut ops = vec![
            Op::None,
            Op::View,
            Op::Reshape,
            Op::Permute { axes: [0, 2, 1, 3] },
            Op::Transpose,
            Op::Cpy,
            Op::Cont,
            Op::Dup,
            Op::GetRows,
            Op::SetRows,
            Op::Scale { scale: 0.5, bias: -1.0 },
            Op::Clamp { min: -2.0, max: 3.0 },
            Op::LeakyRelu { negative_slope: 0.01 },
            Op::Glu { op: GluOp::Geglu, swapped: true },
            Op::Sum,
            Op::SumRows,
            Op::Mean,
            Op::Argmax,
            Op::Norm { eps: 1e-5 },
            Op::RmsNorm { eps: 1e-6 },
            Op::SoftMax { scale: 0.125, max_bias: 0.0 },
            Op::DiagMaskInf { n_past: 17 },
            Op::Rope(RopeParams { n_ctx_orig: 4096, ..RopeParams::new(64, RopeMode::Neox, 10000.0) }),
            Op::MulMat,
            Op::Concat { dim: 2 },
            Op::Repeat,
            Op::FlashAttnExt { scale: 0.1, max_bias: 0.0, softcap: 30.0 },
            Op::MulMatId,
            Op::AddId,
            Op::Argsort { order: SortOrder::Asc },
            Op::Argsort { order: SortOrder::Desc },
            Op::TopK,
            Op::Cumsum,
            Op::SwigluOai { alpha: 1.702, limit: 7.0, swapped: true },
            Op::Im2col { conv: ConvParams { stride: [2, 1], pad: [1, 3], dilation: [1, 2] }, is_2d: true },
            Op::Im2col { conv: ConvParams::UNIT, is_2d: false },
            Op::Conv2d(ConvParams::square(2, 1, 3)),
            Op::Conv2dDw(ConvParams { stride: [1, 4], pad: [0, 2], dilation: [5, 1] }),
            Op::ConvTranspose1d { stride: 3 },
            Op::ConvTranspose2d { stride: 2 },
            Op::Pool1d { op: PoolOp::Avg, k: 3, s: 2, p: 1 },
            Op::Pool2d { op: PoolOp::Max, k: [2, 3], s: [1, 2], p: [0, 1] },
            Op::Upscale { mode: ScaleMode::Bilinear, align_corners: true },
            Op::Upscale { mode: ScaleMode::Nearest, align_corners: false },
            Op::Pad { lp: [1, 2, 3, 4], rp: [5, 6, 7, 8], circular: true },
            Op::PadReflect1d { p0: 3, p1: 1 },
            Op::Roll { shift: [-3, 2, 0, -1] },
            Op::GroupNorm { n_groups: 32, eps: 1e-6 },
            Op::L2Norm { eps: 1e-12 },
            Op::Arange { start: -1.5, stop: 7.0, step: 0.25 },
            Op::TimestepEmbedding { dim: 320, max_period: 10000 },
            Op::Xielu { alpha_n: 1.3, alpha_p: 0.9, beta: 0.5, eps: -1e-6 },
            Op::Fill { c: -2.5 },
            Op::Tri(TriType::LowerDiag),
            Op::Tri(TriType::Upper),
            Op::Diag,
            Op::DiagMaskZero { n_past: 3 },
            Op::Set { nb: [40, 200, 800], offset: 12 },
            Op::Acc { nb: [16, 64, 1024], offset: 4 },
            Op::Add1,
            Op::CountEqual,
            Op::SsmConv,
            Op::SsmScan { states: 4 },
            Op::SolveTri,
            Op::RwkvWkv6,
            Op::GatedLinearAttn { scale: 0.125 },
            Op::RwkvWkv7,
            Op::GatedDeltaNet { states: 3 },
            Op::WinPart { npx: 2, npy: 3, w: 14 },
            Op::WinUnpart { w: 14 },
            Op::GetRelPos,
            Op::AddRelPos,
        ];
        ops.extend(BinaryOp::ALL.map(Op::Binary));
        ops.extend(UnaryOp::ALL.map(Op::Unary));
        ops.extend(GluOp::ALL.map(|op| Op::Glu { op, swapped: false }));
        ops
    }

    #[test]
    fn every_op_and_dtype_round_trips() {
        let ops = sample_ops();
        let graph = WireGraph {
            tensors: ops
                .iter()
                .enumerate()
                .map(|(i, &op)| WireTensor {
                    computed: i % 2 == 1,
                    view: i % 3 == 0,
                    dtype: DType::ALL[i % DType::ALL.len()],
                    ne: [i, 2, 3, 4],
                    nb: [4, 8 * i, 16, 32],
                    op,
                    srcs: std::array::from_fn(|k| if k == 0 { i.checked_sub(1).map(|s| s as u32) } else { None }),
                    location: (i % 2 == 0).then_some(WireLocation { buffer: i as u64, offset: 64 }),
                    name: "blk.0.attn_q",
                })
                .collect(),
        };
        let mut w = Writer::new();
        graph.write(&mut w);
        let bytes = w.into_bytes();
        let mut r = Reader::new(&bytes);
        let back = WireGraph::read(&mut r, 1000).unwrap();
        r.finish("graph").unwrap();
        assert_eq!(back, graph);
    }

    #[test]
    fn forward_sources_and_unknown_codes_are_refused() {
        let t = WireTensor {
            computed: true,
            view: false,
            dtype: DType::F32,
            ne: [1; 4],
            nb: [4; 4],
            op: Op::MulMat,
            srcs: std::array::from_fn(|k| (k == 0).then_some(0)),
            location: None,
            name: "",
        };
        let mut w = Writer::new();
        WireGraph { tensors: vec![t] }.write(&mut w);
        let err = WireGraph::read(&mut Reader::new(w.as_bytes()), 10).unwrap_err();
        assert!(err.0.contains("not an earlier tensor"), "{err}");

        let mut bytes = Writer::new();
        bytes.u32(1);
        bytes.u8(FLAG_COMPUTED);
        bytes.u8(0);
        bytes.raw(&[0; 64]);
        bytes.u8(200); // no op has this code
        bytes.raw(&[0; 4 * MAX_SRC + 12]); // room for the sources and what follows
        let err = WireGraph::read(&mut Reader::new(bytes.as_bytes()), 10).unwrap_err();
        assert!(err.0.contains("custom ops are not accepted"), "{err}");
        assert!(dtype_of(DType::ALL.len() as u8).is_err());
    }

    #[test]
    fn tensor_counts_are_bounded_by_the_limit_and_the_message() {
        let mut w = Writer::new();
        w.u32(5);
        let err = WireGraph::read(&mut Reader::new(w.as_bytes()), 4).unwrap_err();
        assert!(err.0.contains("limit of 4"), "{err}");
        let err = WireGraph::read(&mut Reader::new(w.as_bytes()), 100).unwrap_err();
        assert!(err.0.contains("cannot fit"), "{err}");
    }
}
