//! A fused group of MUL_MATs reading one activation
//! (`gantry_engine::sched::FusionKind::SharedActivation`): quantized
//! weights of one type times the same few F32 columns, bound to the shared
//! driver ([`crate::quant::quant_mul_mat_shared`]: the columns
//! quantized once, every product in one dispatch), or, when every member's
//! weights are repacked, to the repacked driver with all the matrices. The
//! drivers' arithmetic is the single product's, so each result is
//! bit-identical to computing the products one by one.

use gantry_engine::{Context, DType, Op, Result, TensorId};

use super::bound::Bound;
use super::mul_mat_quant::supports_weights;
use super::repacked::{self, is_repacked};
use super::{grow_scratch, supports_op};
use crate::parallel::Par;
use crate::quant::repack::{RepackedMatrix, repacked_mul_mat, repacked_scratch_size};
use crate::quant::{
    Columns, ColumnsMut, MAX_SHARED, QuantMatrix, quant_mul_mat_scratch_size, quant_mul_mat_shared, shared_takes,
};

/// Whether MUL_MAT `t` can join a shared group reading `src1`: one 2-d
/// matrix of quantized weights with dense rows times `src1`, dense F32
/// rows, one batch, and few columns — any number when the weights are
/// repacked: the repacked driver takes every batch size, so a batch of
/// decoding sequences (or a prompt) quantizes its activation once for
/// Q/K/V and once for gate/up too.
pub fn joins(ctx: &Context, t: TensorId, src1: TensorId) -> bool {
    let Some(d) = ctx.get(t) else { return false };
    let (Some(a), Some(b)) = (d.srcs[0].and_then(|s| ctx.get(s)), ctx.get(src1)) else { return false };
    let columns_taken = shared_takes(b.ne[1]) || d.srcs[0].is_some_and(|w| is_repacked(ctx, w));
    d.op == Op::MulMat
        && d.srcs[1] == Some(src1)
        && supports_weights(a.dtype)
        && a.ne[0].is_multiple_of(a.dtype.block_size())
        && a.ne[0] > 0
        && a.ne[2..] == [1, 1]
        && b.ne[2..] == [1, 1]
        && b.dtype == DType::F32
        && a.ne[0] == b.ne[0]
        && columns_taken
        && d.dtype == DType::F32
        && d.ne == [a.ne[1], b.ne[1], 1, 1]
        && supports_op(ctx, t)
}

/// Computes every product of `members` (MUL_MATs of one src1) at once.
/// `Ok(false)` (nothing done) when they do not all [`joins`] with weights of
/// one type and dense memory: the caller then computes them one by one.
pub fn compute(ctx: &Context, members: &[TensorId], par: &Par<'_>, shared: &mut Vec<f32>) -> Result<bool> {
    let Some(src1) = members.first().and_then(|&m| ctx.get(m)).and_then(|d| d.srcs[1]) else { return Ok(false) };
    if members.len() > MAX_SHARED || !members.iter().all(|&m| joins(ctx, m, src1)) {
        return Ok(false);
    }
    let b = Bound::src(ctx, src1)?;
    let repacked = members.iter().filter(|&&m| ctx.get(m).and_then(|d| d.srcs[0]).is_some_and(|a| is_repacked(ctx, a)));
    match repacked.count() {
        0 => {}
        r if r == members.len() => return compute_repacked(ctx, members, &b, par, shared),
        // Some repacked, some not: one by one.
        _ => return Ok(false),
    }
    let mut bound = [None; MAX_SHARED];
    for (slot, &m) in bound.iter_mut().zip(members) {
        let d = ctx.desc(m)?;
        let a = Bound::src(ctx, d.srcs[0].unwrap_or(m))?;
        let dst = Bound::dst(ctx, m)?;
        if !a.rows_are_dense() || !dst.rows_are_dense() || !b.rows_are_dense() {
            return Ok(false);
        }
        *slot = Some((a, dst));
    }
    let Some((a0, _)) = bound[0] else { return Ok(false) };
    if bound[..members.len()].iter().flatten().any(|(a, _)| a.dtype != a0.dtype) {
        return Ok(false);
    }
    let (k, n) = (b.ne[0], b.ne[1]);
    let f = size_of::<f32>();
    let Some(row_bytes) = a0.dtype.row_size(k) else { return Ok(false) };
    let span = |rows: usize, stride: usize, row: usize| (rows - 1) * stride + row;
    let mut ws = [QuantMatrix { dtype: a0.dtype, data: &[], row_stride: row_bytes, k, m: 0 }; MAX_SHARED];
    let mut dsts: [ColumnsMut<'_>; MAX_SHARED] = std::array::from_fn(|_| ColumnsMut { data: &mut [], stride: 0 });
    for ((w, dst), (a, out)) in ws.iter_mut().zip(dsts.iter_mut()).zip(bound.iter().flatten()) {
        let m = a.ne[1];
        // SAFETY: the weights, m dense rows of `row_bytes` bytes `nb[1]` apart,
        // and the result, n dense rows of m floats, lie inside their tensors'
        // memory (checked at binding); the results are distinct tensors that
        // overlap neither the weights nor src1 (the allocator keeps every
        // source of the group alive until its last product).
        unsafe {
            w.data = std::slice::from_raw_parts(a.base as *const u8, span(m, a.nb[1], row_bytes));
            w.row_stride = a.nb[1];
            w.m = m;
            *dst = ColumnsMut {
                data: std::slice::from_raw_parts_mut(out.base as *mut f32, span(n, out.nb[1] / f, m)),
                stride: out.nb[1] / f,
            };
        }
    }
    // SAFETY: src1's n dense rows of k floats `nb[1]` apart lie inside its memory.
    let src1_data = unsafe { std::slice::from_raw_parts(b.base as *const f32, span(n, b.nb[1] / f, k)) };
    let columns = Columns { data: src1_data, stride: b.nb[1] / f, n };
    let bytes = quant_mul_mat_scratch_size(a0.dtype, k, n, par.n_threads())?;
    grow_scratch(shared, bytes.div_ceil(f))?;
    let scratch: &mut [u8] = bytemuck::cast_slice_mut(&mut shared[..bytes.div_ceil(f)]);
    let count = members.len();
    quant_mul_mat_shared(&ws[..count], columns, &mut dsts[..count], scratch, par.jobs())?;
    Ok(true)
}

/// [`compute`] for members whose weights are all repacked: one call of the
/// repacked driver with every matrix.
fn compute_repacked(
    ctx: &Context,
    members: &[TensorId],
    b: &Bound,
    par: &Par<'_>,
    shared: &mut Vec<f32>,
) -> Result<bool> {
    let f = size_of::<f32>();
    let (k, n) = (b.ne[0], b.ne[1]);
    let mut ws: [Option<RepackedMatrix<'_>>; MAX_SHARED] = [None; MAX_SHARED];
    let mut outs = [None; MAX_SHARED];
    for ((w, out), &m) in ws.iter_mut().zip(outs.iter_mut()).zip(members) {
        let a = ctx.desc(m)?.srcs[0].unwrap_or(m);
        let Some(matrix) = repacked::matrix(ctx, a)? else { return Ok(false) };
        let dst = Bound::dst(ctx, m)?;
        if matrix.dtype != members_dtype(ctx, members) || !dst.rows_are_dense() || !b.rows_are_dense() {
            return Ok(false);
        }
        *w = Some(matrix);
        *out = Some(dst);
    }
    let Some(first) = ws[0] else { return Ok(false) };
    let span = |rows: usize, stride: usize, row: usize| (rows - 1) * stride + row;
    let count = members.len();
    let mut matrices = [first; MAX_SHARED];
    let mut dsts: [ColumnsMut<'_>; MAX_SHARED] = std::array::from_fn(|_| ColumnsMut { data: &mut [], stride: 0 });
    for ((slot, dst), (w, out)) in matrices.iter_mut().zip(dsts.iter_mut()).zip(ws.iter().zip(&outs)) {
        let (Some(w), Some(out)) = (w, out) else { continue };
        *slot = *w;
        *dst = ColumnsMut {
            // SAFETY: the result, n dense rows of m floats `nb[1]` apart, lies
            // inside its tensor's memory (checked at binding); the results are
            // distinct tensors that overlap neither the weights nor src1.
            data: unsafe { std::slice::from_raw_parts_mut(out.base as *mut f32, span(n, out.nb[1] / f, w.m)) },
            stride: out.nb[1] / f,
        };
    }
    // SAFETY: src1's n dense rows of k floats `nb[1]` apart lie inside its memory.
    let src1_data = unsafe { std::slice::from_raw_parts(b.base as *const f32, span(n, b.nb[1] / f, k)) };
    let columns = Columns { data: src1_data, stride: b.nb[1] / f, n };
    let bytes = repacked_scratch_size(first.dtype, k, n)?;
    grow_scratch(shared, bytes.div_ceil(f))?;
    let scratch: &mut [u8] = bytemuck::cast_slice_mut(&mut shared[..bytes.div_ceil(f)]);
    repacked_mul_mat(&matrices[..count], columns, &mut dsts[..count], scratch, par.jobs())?;
    Ok(true)
}

/// The weights' dtype of the first member.
fn members_dtype(ctx: &Context, members: &[TensorId]) -> DType {
    members
        .first()
        .and_then(|&m| ctx.get(m))
        .and_then(|d| d.srcs[0])
        .and_then(|a| ctx.get(a))
        .map_or(DType::F32, |a| a.dtype)
}
