//! The reference the CPU backend is checked against: every op as a plain
//! f64 scalar loop over logical indices, written for clarity, not speed.
//!
//! It evaluates a graph over its own model of memory: one array of f64
//! cells per root tensor (a tensor that is not a view), addressed by byte
//! offset / element size, so views, permutes, in-place ops, CPY and SET_ROWS
//! see and change memory exactly as on a device. Leafs start with the bytes
//! the context holds; computed roots start as NaN, so an element the graph
//! never writes shows up. Values written to a tensor are rounded to its
//! dtype (f32, f16, bf16, or truncated i32), as storing them on a device would.
//!
//! Quantized tensors hold one cell per value too: a quantized leaf starts as
//! its blocks dequantized by the engine's `dequantize_row` (ggml's values,
//! bit for bit), and a row written into a quantized tensor is rounded as a
//! whole: quantized by the engine's reference quantizer (ggml's bytes) and
//! dequantized again. A MUL_MAT over quantized weights is thus the f64
//! product of the dequantized weights and the activations.

mod attention;
mod conv;
mod elementwise;
mod experts;
mod generate;
mod layout;
mod linear_attn;
mod masks;
mod matmul;
mod norm;
mod reduce;
mod resample;
mod rope;
mod sam;
mod solve_tri;
mod sort;
mod ssm;

use std::collections::HashMap;

use gantry_engine::quant::{dequantize_row, quantize_row};
use gantry_engine::{Context, DType, Error, Graph, Op, Result, TensorId};
use half::{bf16, f16};

/// A tensor's values in logical order (dim 0 fastest), with its shape.
#[derive(Debug, Clone)]
pub struct Array {
    /// Elements per dimension.
    pub ne: [usize; 4],
    /// The values.
    pub data: Vec<f64>,
}

impl Array {
    /// An array of `ne` filled with `v`.
    pub fn filled(ne: [usize; 4], v: f64) -> Self {
        Self { ne, data: vec![v; ne.iter().product()] }
    }

    /// The flat position of `[i0, i1, i2, i3]`.
    pub fn index(&self, i: [usize; 4]) -> usize {
        i[0] + self.ne[0] * (i[1] + self.ne[1] * (i[2] + self.ne[2] * i[3]))
    }

    /// The value at `[i0, i1, i2, i3]`.
    pub fn at(&self, i: [usize; 4]) -> f64 {
        self.data[self.index(i)]
    }

    /// Sets the value at `[i0, i1, i2, i3]`.
    pub fn set(&mut self, i: [usize; 4], v: f64) {
        let k = self.index(i);
        self.data[k] = v;
    }

    /// Every index tuple in logical order.
    pub fn indices(ne: [usize; 4]) -> impl Iterator<Item = [usize; 4]> {
        (0..ne[3]).flat_map(move |i3| {
            (0..ne[2]).flat_map(move |i2| (0..ne[1]).flat_map(move |i1| (0..ne[0]).map(move |i0| [i0, i1, i2, i3])))
        })
    }
}

/// `v` rounded to what a tensor of `dtype` stores.
pub fn round_to(dtype: DType, v: f64) -> f64 {
    match dtype {
        DType::F32 => v as f32 as f64,
        DType::F16 => f16::from_f64(v).to_f64(),
        DType::BF16 => bf16::from_f64(v).to_f64(),
        DType::I32 => (v as i32) as f64,
        _ => f64::NAN,
    }
}

fn decode(dtype: DType, bytes: &[u8]) -> f64 {
    match dtype {
        DType::F32 => f32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) as f64,
        DType::F16 => f16::from_le_bytes([bytes[0], bytes[1]]).to_f64(),
        DType::BF16 => bf16::from_le_bytes([bytes[0], bytes[1]]).to_f64(),
        DType::I32 => i32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) as f64,
        _ => f64::NAN,
    }
}

/// The f64 memory of a graph's root tensors.
struct Memory<'c> {
    ctx: &'c Context,
    cells: HashMap<TensorId, Vec<f64>>,
}

impl Memory<'_> {
    fn unsupported(&self, t: TensorId, what: &str) -> Error {
        Error::Unsupported(format!("f64 reference: {what} ({})", self.ctx.describe(t)))
    }

    /// The root of `t` and `t`'s byte offset in it.
    fn root(&self, t: TensorId) -> Result<(TensorId, usize)> {
        let d = self.ctx.desc(t)?;
        Ok(d.view_src.map_or((t, 0), |r| (r, d.view_offset)))
    }

    /// The cells of `root`, created on first use: one per value, block `b`
    /// of a quantized root holding cells `b · block_size ..`.
    fn cells(&mut self, root: TensorId) -> Result<&mut Vec<f64>> {
        if !self.cells.contains_key(&root) {
            let d = *self.ctx.desc(root)?;
            let size = d.dtype.bytes_per_block();
            let n_cells = d.nbytes() / size * d.dtype.block_size();
            let init = if d.op != Op::None {
                vec![f64::NAN; n_cells]
            } else if d.dtype.is_quantized() {
                let bytes = self.ctx.get_bytes(root)?;
                let mut values = vec![0f32; n_cells];
                dequantize_row(d.dtype, &bytes, &mut values)?;
                values.into_iter().map(f64::from).collect()
            } else {
                let bytes = self.ctx.get_bytes(root)?;
                bytes.chunks_exact(size).map(|c| decode(d.dtype, c)).collect()
            };
            self.cells.insert(root, init);
        }
        Ok(self.cells.get_mut(&root).expect("inserted above"))
    }

    /// The cell index of every element of `t`, in logical order.
    fn cell_indices(&self, t: TensorId) -> Result<Vec<usize>> {
        let d = *self.ctx.desc(t)?;
        let (_, offset) = self.root(t)?;
        let (size, bs) = (d.dtype.bytes_per_block(), d.dtype.block_size());
        Array::indices(d.ne)
            .map(|i| {
                let byte = offset + (i[0] / bs) * d.nb[0] + (1..4).map(|k| i[k] * d.nb[k]).sum::<usize>();
                if byte % size == 0 {
                    Ok(byte / size * bs + i[0] % bs)
                } else {
                    Err(self.unsupported(t, "misaligned element"))
                }
            })
            .collect()
    }

    /// `t`'s values in logical order.
    fn read(&mut self, t: TensorId) -> Result<Array> {
        let ne = self.ctx.desc(t)?.ne;
        let idx = self.cell_indices(t)?;
        let (root, _) = self.root(t)?;
        let cells = self.cells(root)?;
        let data = idx.iter().map(|&c| cells.get(c).copied().unwrap_or(f64::NAN)).collect();
        Ok(Array { ne, data })
    }

    /// Stores `values` (logical order) into `t`: every row, or the rows
    /// marked in `only` (rows counted in logical order). Values are rounded
    /// to `t`'s dtype unless they already are its values (`stored`: a copy
    /// within one dtype, which moves quantized blocks as they are — rounding
    /// them again would not give them back).
    fn write(&mut self, t: TensorId, values: &Array, only: Option<&[bool]>, stored: bool) -> Result<()> {
        let dtype = self.ctx.desc(t)?.dtype;
        let idx = self.cell_indices(t)?;
        let (root, _) = self.root(t)?;
        let n0 = values.ne[0].max(1);
        let requantize = dtype.is_quantized() && !stored;
        let rounded = if requantize { round_rows_quantized(dtype, values)? } else { Vec::new() };
        let cells = self.cells(root)?;
        for (i, (&c, &v)) in idx.iter().zip(&values.data).enumerate() {
            if only.is_some_and(|rows| !rows.get(i / n0).copied().unwrap_or(false)) {
                continue;
            }
            if let Some(cell) = cells.get_mut(c) {
                *cell = if stored {
                    v
                } else if requantize {
                    rounded[i]
                } else {
                    round_to(dtype, v)
                };
            }
        }
        Ok(())
    }
}

/// `values` rounded row by row to what a `dtype` tensor stores: each row
/// quantized with the engine's reference quantizer, then dequantized.
fn round_rows_quantized(dtype: DType, values: &Array) -> Result<Vec<f64>> {
    let n0 = values.ne[0];
    let mut bytes = vec![0u8; dtype.row_size(n0).unwrap_or(0)];
    let (mut row, mut out) = (vec![0f32; n0], Vec::with_capacity(values.data.len()));
    for chunk in values.data.chunks(n0.max(1)) {
        for (r, &v) in row.iter_mut().zip(chunk) {
            *r = v as f32;
        }
        quantize_row(dtype, &row, &mut bytes)?;
        dequantize_row(dtype, &bytes, &mut row)?;
        out.extend(row.iter().map(|&v| f64::from(v)));
    }
    Ok(out)
}

/// Evaluates `graph` in f64 and returns `output`'s values in logical order.
/// The context supplies the leafs' bytes (in host-readable buffers).
pub fn evaluate(ctx: &Context, graph: &Graph<'_>, output: TensorId) -> Result<Vec<f64>> {
    let mut mem = Memory { ctx, cells: HashMap::new() };
    for &t in graph.nodes() {
        let d = *ctx.desc(t)?;
        if d.op.is_empty() {
            continue;
        }
        let mut srcs = Vec::new();
        for s in d.sources() {
            srcs.push(mem.read(s)?);
        }
        // Sources by slot, for ops whose optional sources leave gaps (a
        // SOFT_MAX with sinks in slot 2 and no mask in slot 1).
        let mut slots: [Option<Array>; 5] = [None, None, None, None, None];
        if matches!(d.op, Op::SoftMax { .. } | Op::FlashAttnExt { .. }) {
            for (slot, s) in slots.iter_mut().zip(d.srcs) {
                if let Some(s) = s {
                    *slot = Some(mem.read(s)?);
                }
            }
        }
        // SET_ROWS leaves the other rows of its destination as they are.
        let mut written_rows = None;
        let out = match d.op {
            Op::Cpy | Op::Cont | Op::Dup => layout::copy(&srcs[0], d.ne),
            Op::GetRows => layout::get_rows(&srcs[0], &srcs[1], d.ne),
            Op::SetRows => layout::set_rows(mem.read(t)?, &srcs[0], &srcs[1]).map(|(out, written)| {
                written_rows = Some(written);
                out
            }),
            Op::Concat { dim } => layout::concat(&srcs[0], &srcs[1], dim as usize),
            Op::Repeat => layout::repeat(&srcs[0], d.ne),
            Op::Binary(op) => elementwise::binary(op, &srcs[0], &srcs[1]),
            Op::Scale { scale, bias } => elementwise::map(&srcs[0], |x| x * scale as f64 + bias as f64),
            Op::Clamp { min, max } => elementwise::map(&srcs[0], |x| x.max(min as f64).min(max as f64)),
            Op::LeakyRelu { negative_slope } => {
                elementwise::map(&srcs[0], |x| elementwise::leaky_relu(x, negative_slope as f64))
            }
            Op::Unary(u) => elementwise::map(&srcs[0], |x| elementwise::unary(u, x)),
            Op::Glu { op, swapped } => elementwise::glu(op, swapped, &srcs[0], srcs.get(1)),
            Op::Sum => reduce::sum(&srcs[0]),
            Op::SumRows => reduce::sum_rows(&srcs[0]),
            Op::Mean => reduce::mean(&srcs[0]),
            Op::Argmax => reduce::argmax(&srcs[0]),
            Op::Norm { eps } => norm::norm(&srcs[0], eps as f64),
            Op::RmsNorm { eps } => norm::rms_norm(&srcs[0], eps as f64),
            Op::SoftMax { scale, max_bias } => {
                norm::soft_max(&srcs[0], slots[1].as_ref(), slots[2].as_ref(), scale as f64, max_bias as f64)
            }
            Op::DiagMaskInf { n_past } => norm::diag_mask_inf(&srcs[0], n_past),
            Op::Rope(p) => rope::rope(&srcs[0], &srcs[1], srcs.get(2), &p),
            Op::MulMat => matmul::mul_mat(&srcs[0], &srcs[1]),
            Op::MulMatId => experts::mul_mat_id(&srcs[0], &srcs[1], &srcs[2]),
            Op::AddId => experts::add_id(&srcs[0], &srcs[1], &srcs[2]),
            Op::Argsort { order } => sort::argsort(&srcs[0], order),
            Op::TopK => sort::top_k(&srcs[0], d.ne[0]),
            Op::Cumsum => sort::cumsum(&srcs[0]),
            Op::SwigluOai { alpha, limit, swapped } => {
                elementwise::swiglu_oai(&srcs[0], srcs.get(1), swapped, alpha as f64, limit as f64)
            }
            Op::FlashAttnExt { scale, max_bias, softcap } => attention::flash_attn_ext(
                &srcs[0],
                &srcs[1],
                &srcs[2],
                slots[3].as_ref(),
                slots[4].as_ref(),
                scale as f64,
                max_bias as f64,
                softcap as f64,
            ),
            Op::Im2col { conv, is_2d } => conv::im2col(&srcs[0], &srcs[1], &conv, is_2d, d.ne),
            Op::Conv2d(conv) => conv::conv_2d(&srcs[0], &srcs[1], &conv, false, d.ne),
            Op::Conv2dDw(conv) => conv::conv_2d(&srcs[0], &srcs[1], &conv, true, d.ne),
            Op::ConvTranspose1d { stride } => conv::conv_transpose_1d(&srcs[0], &srcs[1], stride as usize, d.ne),
            Op::ConvTranspose2d { stride } => conv::conv_transpose_2d(&srcs[0], &srcs[1], stride as usize, d.ne),
            Op::Pool1d { op, k, s, p } => resample::pool(&srcs[0], op, [k, 1], [s, 1], [p, 0], false, d.ne),
            Op::Pool2d { op, k, s, p } => resample::pool(&srcs[0], op, k, s, p, true, d.ne),
            Op::Upscale { mode, align_corners } => resample::upscale(&srcs[0], mode, align_corners, d.ne),
            Op::Pad { lp, circular, .. } => resample::pad(&srcs[0], lp, circular, d.ne),
            Op::PadReflect1d { p0, .. } => resample::pad_reflect_1d(&srcs[0], p0, d.ne),
            Op::Roll { shift } => resample::roll(&srcs[0], shift),
            Op::GroupNorm { n_groups, eps } => norm::group_norm(&srcs[0], n_groups as usize, eps as f64),
            Op::L2Norm { eps } => norm::l2_norm(&srcs[0], eps as f64),
            Op::Arange { start, step, .. } => generate::arange(start as f64, step as f64, d.ne[0]),
            Op::TimestepEmbedding { dim, max_period } => {
                generate::timestep_embedding(&srcs[0], dim as usize, max_period as f64)
            }
            Op::Xielu { alpha_n, alpha_p, beta, eps } => {
                masks::xielu(&srcs[0], alpha_n as f64, alpha_p as f64, beta as f64, eps as f64)
            }
            Op::Fill { c } => masks::fill(d.ne, c as f64),
            Op::Tri(kind) => masks::tri(&srcs[0], kind),
            Op::Diag => masks::diag(&srcs[0]),
            Op::DiagMaskZero { n_past } => masks::diag_mask_zero(&srcs[0], n_past),
            Op::Set { nb, offset } => masks::set_acc(&srcs[0], &srcs[1], nb, offset, d.dtype.bytes_per_block(), false),
            Op::Acc { nb, offset } => masks::set_acc(&srcs[0], &srcs[1], nb, offset, d.dtype.bytes_per_block(), true),
            Op::Add1 => masks::add1(&srcs[0], &srcs[1]),
            Op::CountEqual => masks::count_equal(&srcs[0], &srcs[1]),
            Op::SsmConv => ssm::ssm_conv(&srcs[0], &srcs[1], d.ne),
            Op::SsmScan { states } => ssm::ssm_scan(&srcs, states as usize, d.ne[0]),
            Op::SolveTri => solve_tri::solve_tri(&srcs[0], &srcs[1]),
            Op::RwkvWkv6 => linear_attn::linear_attn(linear_attn::Rule::Wkv6, &srcs),
            Op::GatedLinearAttn { scale } => linear_attn::linear_attn(linear_attn::Rule::Gla(scale.into()), &srcs),
            Op::RwkvWkv7 => linear_attn::linear_attn(linear_attn::Rule::Wkv7, &srcs),
            Op::GatedDeltaNet { states } => linear_attn::gated_delta_net(&srcs, states as usize),
            Op::WinPart { npx, w, .. } => Ok(sam::win_part(&srcs[0], npx as usize, w as usize, d.ne)),
            Op::WinUnpart { w } => Ok(sam::win_unpart(&srcs[0], w as usize, d.ne)),
            Op::GetRelPos => Ok(sam::get_rel_pos(&srcs[0], d.ne)),
            Op::AddRelPos => Ok(sam::add_rel_pos(&srcs[0], &srcs[1], &srcs[2])),
            Op::None | Op::View | Op::Reshape | Op::Permute { .. } | Op::Transpose => continue,
        };
        let out = out.map_err(|reason| Error::InvalidOp { op: d.op.name(), reason })?;
        if out.ne != d.ne {
            return Err(mem.unsupported(t, &format!("computed shape {:?} differs", out.ne)));
        }
        let same_dtype_copy = matches!(d.op, Op::Cpy | Op::Cont | Op::Dup)
            && d.srcs[0].and_then(|s| ctx.get(s)).map(|s| s.dtype) == Some(d.dtype);
        mem.write(t, &out, written_rows.as_deref(), same_dtype_copy)?;
    }
    Ok(mem.read(output)?.data)
}

/// The ALiBi slope of head `h` of `n_head` (1 when `max_bias` is 0):
/// `m0^(h+1)` for the first `2^floor(log2 n_head)` heads, odd powers of
/// `m1` after them.
pub fn alibi_slope(max_bias: f64, h: usize, n_head: usize) -> f64 {
    if max_bias <= 0.0 {
        return 1.0;
    }
    let mut n_head_log2 = 1usize;
    while n_head_log2 * 2 <= n_head {
        n_head_log2 *= 2;
    }
    let m0 = 2f64.powf(-max_bias / n_head_log2 as f64);
    let m1 = 2f64.powf(-max_bias / 2.0 / n_head_log2 as f64);
    if h < n_head_log2 { m0.powi(h as i32 + 1) } else { m1.powi(2 * (h - n_head_log2) as i32 + 1) }
}

#[cfg(test)]
mod tests {
    use gantry_engine::{BufferUsage, GraphArena, RopeMode, RopeParams};

    use super::*;
    use gantry_cpu as cpu;

    /// Evaluates `out` after writing `inputs` (f32 values) into fresh CPU memory.
    fn eval(ctx: &mut Context, inputs: &[(TensorId, &[f32])], out: TensorId) -> Vec<f64> {
        let arena = GraphArena::new();
        let graph = ctx.build_graph(&arena, &[out]).unwrap();
        ctx.alloc_tensors(graph.leafs(), &cpu::buffer_type(), BufferUsage::Any).unwrap();
        for (t, v) in inputs {
            ctx.set_f32(*t, v).unwrap();
        }
        evaluate(ctx, &graph, out).unwrap()
    }

    #[test]
    fn hand_computed_values() {
        let mut ctx = Context::new();
        let a = ctx.tensor(DType::F32, [2, 2]).unwrap();
        let b = ctx.tensor(DType::F32, [2, 1]).unwrap();
        let y = ctx.mul_mat(a, b).unwrap();
        assert_eq!(eval(&mut ctx, &[(a, &[1.0, 2.0, 3.0, 4.0]), (b, &[5.0, 6.0])], y), vec![17.0, 39.0]);

        let mut ctx = Context::new();
        let x = ctx.tensor(DType::F32, [2]).unwrap();
        let y = ctx.soft_max(x).unwrap();
        let got = eval(&mut ctx, &[(x, &[0.0, 3f32.ln()])], y);
        assert!((got[0] - 0.25).abs() < 1e-7 && (got[1] - 0.75).abs() < 1e-7, "{got:?}");

        // One pair at position 1 turns by 1 radian.
        let mut ctx = Context::new();
        let x = ctx.tensor(DType::F32, [2, 1, 1]).unwrap();
        let pos = ctx.tensor(DType::I32, [1]).unwrap();
        let y = ctx.rope(x, pos, None, RopeParams::new(2, RopeMode::Normal, 10000.0)).unwrap();
        let got = eval(&mut ctx, &[(x, &[1.0, 0.0]), (pos, &[1.0])], y);
        assert!((got[0] - 1f64.cos()).abs() < 1e-7 && (got[1] - 1f64.sin()).abs() < 1e-7, "{got:?}");

        // Results are stored in their dtype: 1/3 in f16.
        let mut ctx = Context::new();
        let x = ctx.tensor(DType::F32, [1]).unwrap();
        let h = ctx.tensor(DType::F16, [1]).unwrap();
        let y = ctx.cpy(x, h).unwrap();
        assert_eq!(eval(&mut ctx, &[(x, &[1.0 / 3.0])], y), vec![f16::from_f64(1.0 / 3.0).to_f64()]);
    }

    #[test]
    fn views_share_memory_with_their_source() {
        // Scale the second row of a matrix in place, then read the whole matrix
        // through another view, computed after it.
        let mut ctx = Context::new();
        let m = ctx.tensor(DType::F32, [2, 2]).unwrap();
        let row = ctx.view_1d(m, 2, 8).unwrap();
        let scaled = ctx.scale_inplace(row, 10.0, 0.0).unwrap();
        let all = ctx.view_1d(m, 4, 0).unwrap();
        let dep = ctx.add(all, all).unwrap();
        let arena = GraphArena::new();
        let graph = ctx.build_graph(&arena, &[scaled, dep]).unwrap();
        ctx.alloc_tensors(graph.leafs(), &cpu::buffer_type(), BufferUsage::Any).unwrap();
        ctx.set_f32(m, &[1.0, 2.0, 3.0, 4.0]).unwrap();
        assert_eq!(evaluate(&ctx, &graph, dep).unwrap(), vec![2.0, 4.0, 60.0, 80.0]);
        assert_eq!(evaluate(&ctx, &graph, scaled).unwrap(), vec![30.0, 40.0]);
    }

    #[test]
    fn unwritten_results_read_as_nan() {
        let mut ctx = Context::new();
        let x = ctx.tensor(DType::F32, [3]).unwrap();
        let y = ctx.neg(x).unwrap();
        // A graph without y's node: y is never computed.
        let graph = Graph::from_parts(&[], &[], &[]);
        ctx.alloc_tensors(&[x, y], &cpu::buffer_type(), BufferUsage::Any).unwrap();
        assert!(evaluate(&ctx, &graph, y).unwrap().iter().all(|v| v.is_nan()));
    }
}
