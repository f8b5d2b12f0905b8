//! MUL_MAT with quantized src0 (Q4_0 … Q6_K, IQ4_NL, IQ4_XS, MXFP4 weights) and F32 src1 (or src1
//! already in the weights' dot partner, unpacked first), through
//! the quantized driver [`quant_mul_mat`]: the activations are quantized
//! once per compute to the weights' dot partner and multiplied with integer
//! dot products.
//!
//! The driver multiplies one weight matrix by columns that lie at a constant
//! stride. The result batches that read the same src0 batch (ggml's
//! broadcast) are handed over together whenever their columns continue one
//! another in src1 and in dst, so the common case (one weight matrix, any
//! number of tokens and batches) is a single call. src1 whose rows are not
//! dense, or whose batches do not continue one another, is first copied into
//! a packed F32 block of the backend's retained scratch, which also holds the
//! driver's scratch: a steady-state compute allocates nothing.
//!
//! Weights in a `CPU_REPACK` buffer take the same route to the repacked
//! driver ([`repacked_mul_mat`]), whose kernels read their layout: one 2-d
//! matrix, broadcast over every batch of src1.

use gantry_engine::{Context, DType, Result, TensorDesc, TensorId};

use super::bound::Bound;
use super::mul_mat::Dims;
use super::shape_err;
use crate::parallel::{Par, SendPtr};
use crate::quant::repack::{RepackedMatrix, repacked_mul_mat, repacked_scratch_size};
use crate::quant::{self, QuantMatrix, dot_partner, quant_mul_mat, quant_mul_mat_scratch_size};

/// Whether the driver multiplies weights of this dtype.
pub fn supports_weights(dtype: DType) -> bool {
    dot_partner(dtype).is_some()
}

/// A run of result columns handed to the driver in one call: `cols` columns
/// of one src0 batch, starting at column 0 of result batch `first`.
#[derive(Clone, Copy)]
struct Run {
    a_batch: [usize; 2],
    first: [usize; 2],
    cols: usize,
}

/// Where src1's columns are read from: in place, or packed in scratch.
#[derive(Clone, Copy)]
enum Columns {
    /// Rows of src1 as they lie, `stride` floats apart within a batch.
    InPlace { stride: usize },
    /// Packed: column `j` of result batch `g` at `(g · n + j) · k` floats.
    Packed,
}

/// Whether a tensor's batches continue one another: batch `(i2, i3)` starts
/// where `i2 + ne2 · i3` whole batches of `ne1` rows would.
fn batches_continue(t: &Bound) -> bool {
    (t.ne[2] <= 1 || t.nb[2] == t.ne[1] * t.nb[1]) && (t.ne[3] <= 1 || t.nb[3] == t.ne[2] * t.nb[2])
}

/// The weights of a product: plain rows in host memory, or a repacked matrix.
#[derive(Clone, Copy)]
pub enum Weights<'a> {
    /// Rows of `row_bytes` bytes, `a.nb[1]` apart, batched as `a` says.
    Plain { a: &'a Bound, row_bytes: usize },
    /// One repacked matrix (2-d: every batch reads it).
    Repacked(RepackedMatrix<'a>),
}

impl Weights<'_> {
    fn dtype(&self) -> DType {
        match self {
            Weights::Plain { a, .. } => a.dtype,
            Weights::Repacked(w) => w.dtype,
        }
    }

    /// The weights' batches along dims 2 and 3.
    fn batches(&self) -> [usize; 2] {
        match self {
            Weights::Plain { a, .. } => [a.ne[2], a.ne[3]],
            Weights::Repacked(_) => [1, 1],
        }
    }
}

/// Bytes of the driver's scratch for `total_cols` columns.
fn driver_scratch(dtype: DType, k: usize, total_cols: usize, threads: usize, repacked: bool) -> Result<usize> {
    if repacked {
        repacked_scratch_size(dtype, k, total_cols)
    } else {
        quant_mul_mat_scratch_size(dtype, k, total_cols, threads)
    }
}

/// Floats of shared scratch a product of `total_cols` columns of `k`
/// values needs at most (packed columns and the driver's scratch), for
/// plain or repacked weights.
pub fn work_floats(dtype: DType, k: usize, total_cols: usize, threads: usize, repacked: bool) -> Result<usize> {
    let scratch_bytes = driver_scratch(dtype, k, total_cols, threads, repacked)?;
    Ok(total_cols * k + scratch_bytes.div_ceil(size_of::<f32>()))
}

/// MUL_MAT node `t` with the repacked weights `w` (2-d) times `b`.
pub fn compute_repacked(
    ctx: &Context,
    t: TensorId,
    d: &TensorDesc,
    w: RepackedMatrix<'_>,
    (b, dst): (&Bound, &Bound),
    par: &Par<'_>,
    shared: &mut Vec<f32>,
) -> Result<()> {
    if w.k != b.ne[0] || dst.ne != [w.m, b.ne[1], b.ne[2], b.ne[3]] || !dst.rows_are_dense() {
        return Err(shape_err(ctx, t, d, format!("[{}, {}] x {:?} does not give {:?}", w.k, w.m, b.ne, dst.ne)));
    }
    let dims = Dims { k: w.k, m: w.m, n: b.ne[1], ne2: b.ne[2], ne3: b.ne[3], r2: b.ne[2], r3: b.ne[3] };
    compute(ctx, t, d, Weights::Repacked(w), (b, dst), dims, par, shared)
}

/// MUL_MAT node `t` with the plain quantized weights `a` times `b`.
pub fn compute_plain(
    ctx: &Context,
    t: TensorId,
    d: &TensorDesc,
    (a, b, dst): (&Bound, &Bound, &Bound),
    dims: Dims,
    par: &Par<'_>,
    shared: &mut Vec<f32>,
) -> Result<()> {
    let row_bytes = a.dtype.row_size(dims.k).filter(|_| dims.k.is_multiple_of(a.dtype.block_size()));
    let Some(row_bytes) = row_bytes.filter(|_| a.rows_are_dense()) else {
        return Err(shape_err(ctx, t, d, format!("{} weights need dense rows of whole blocks", a.dtype)));
    };
    compute(ctx, t, d, Weights::Plain { a, row_bytes }, (b, dst), dims, par, shared)
}

#[expect(
    clippy::too_many_arguments,
    reason = "one node: its id and description for messages, the weights, the bound columns and result, dims, pool and scratch"
)]
fn compute(
    ctx: &Context,
    t: TensorId,
    d: &TensorDesc,
    w: Weights<'_>,
    (b, dst): (&Bound, &Bound),
    dims: Dims,
    par: &Par<'_>,
    shared: &mut Vec<f32>,
) -> Result<()> {
    let Dims { k, m, n, .. } = dims;
    let f = size_of::<f32>();
    if k == 0 {
        // Empty dot products.
        for g in 0..dims.batches() {
            for j in 0..n {
                // SAFETY: the indices are within dst's shape; its rows are dense.
                unsafe {
                    std::slice::from_raw_parts_mut(dst.row(j, g % dims.ne2, g / dims.ne2) as *mut f32, m).fill(0.0)
                };
            }
        }
        return Ok(());
    }
    let _ = (ctx, t, d);
    // Activations already in the dot partner are unpacked to F32 columns
    // (the driver quantizes them again, to the same blocks).
    let columns = if b.dtype == DType::F32 && b.rows_are_dense() && batches_continue(b) {
        Columns::InPlace { stride: b.nb[1] / f }
    } else {
        Columns::Packed
    };
    let dst_stride = dst.nb[1] / f;
    let total_cols = n * dims.batches();
    let packed_len = if matches!(columns, Columns::Packed) { total_cols * k } else { 0 };
    let threads = par.n_threads();
    let scratch_bytes = driver_scratch(w.dtype(), k, total_cols, threads, matches!(w, Weights::Repacked(_)))?;
    // The packed columns first (f32), then the driver's scratch (bytes).
    let need = packed_len + scratch_bytes.div_ceil(f);
    super::grow_scratch(shared, need)?;
    let (packed, driver_scratch) = shared.split_at_mut(packed_len);
    let driver_scratch: &mut [u8] = bytemuck::cast_slice_mut(driver_scratch);
    if let Columns::Packed = columns {
        pack_columns(b, dims, packed, par);
    }

    // The address (in floats) of column 0 of result batch `g` in src1 and dst.
    let src1_col0 = |bi: [usize; 2]| -> *const f32 {
        match columns {
            // SAFETY: the batch indices are within src1's shape.
            Columns::InPlace { .. } => unsafe { b.row(0, bi[0], bi[1]) as *const f32 },
            Columns::Packed => packed[(bi[0] + dims.ne2 * bi[1]) * n * k..].as_ptr(),
        }
    };
    let src1_stride = match columns {
        Columns::InPlace { stride } => stride,
        Columns::Packed => k,
    };
    let dst_col0 = |bi: [usize; 2]| {
        // SAFETY: the batch indices are within dst's shape (dst has src1's batches).
        unsafe { dst.row(0, bi[0], bi[1]) as *mut f32 }
    };

    let mut run: Option<Run> = None;
    let [a_ne2, a_ne3] = w.batches();
    for a3 in 0..a_ne3 {
        for a2 in 0..a_ne2 {
            for i3 in a3 * dims.r3..(a3 + 1) * dims.r3 {
                for i2 in a2 * dims.r2..(a2 + 1) * dims.r2 {
                    let bi = [i2, i3];
                    if let Some(r) = run.as_mut() {
                        // The next batch extends the run when its columns follow the run's in src1 and in dst.
                        let follows = r.a_batch == [a2, a3]
                            && src1_col0(bi) == src1_col0(r.first).wrapping_add(r.cols * src1_stride)
                            && dst_col0(bi) == dst_col0(r.first).wrapping_add(r.cols * dst_stride);
                        if follows {
                            r.cols += n;
                            continue;
                        }
                        multiply(
                            w,
                            *r,
                            dims,
                            (src1_col0(r.first), src1_stride),
                            (dst_col0(r.first), dst_stride),
                            driver_scratch,
                            par,
                        )?;
                    }
                    run = Some(Run { a_batch: [a2, a3], first: bi, cols: n });
                }
            }
        }
    }
    if let Some(r) = run {
        multiply(w, r, dims, (src1_col0(r.first), src1_stride), (dst_col0(r.first), dst_stride), driver_scratch, par)?;
    }
    Ok(())
}

/// One driver call: src0 batch `run.a_batch` times `run.cols` columns.
fn multiply(
    w: Weights<'_>,
    run: Run,
    dims: Dims,
    (src1, src1_stride): (*const f32, usize),
    (dst, dst_stride): (*mut f32, usize),
    scratch: &mut [u8],
    par: &Par<'_>,
) -> Result<()> {
    let Dims { k, m, .. } = dims;
    let span = |rows: usize, stride: usize, row: usize| (rows - 1) * stride + row;
    // SAFETY: the run's columns lie inside src1 (or the packed scratch) and
    // dst, `stride` floats apart, because they continue one another batch
    // after batch (checked by the caller); dst is a different tensor than
    // the sources.
    let (src1, dst) = unsafe {
        (
            std::slice::from_raw_parts(src1, span(run.cols, src1_stride, k)),
            std::slice::from_raw_parts_mut(dst, span(run.cols, dst_stride, m)),
        )
    };
    let columns = quant::Columns { data: src1, stride: src1_stride, n: run.cols };
    let result = quant::ColumnsMut { data: dst, stride: dst_stride };
    match w {
        Weights::Plain { a, row_bytes } => {
            // SAFETY: the weights of one src0 batch, m rows of `row_bytes`
            // bytes `nb[1]` apart, lie inside src0's memory (checked at binding).
            let weights = unsafe {
                std::slice::from_raw_parts(a.row(0, run.a_batch[0], run.a_batch[1]), span(m, a.nb[1], row_bytes))
            };
            let w = QuantMatrix { dtype: a.dtype, data: weights, row_stride: a.nb[1], k, m };
            quant_mul_mat(&w, columns, result, scratch, par.jobs())
        }
        Weights::Repacked(w) => repacked_mul_mat(&[w], columns, &mut [result], scratch, par.jobs()),
    }
}

/// Copies src1 into `out` as packed F32 columns, batch after batch.
fn pack_columns(b: &Bound, dims: Dims, out: &mut [f32], par: &Par<'_>) {
    let Dims { k, n, .. } = dims;
    let out = SendPtr(out.as_mut_ptr());
    par.for_each(n * dims.batches(), k, 0, |cols, _| {
        for c in cols {
            let (j, g) = (c % n, c / n);
            let (i2, i3) = (g % dims.ne2, g / dims.ne2);
            // SAFETY: column c of the packed block is `k` floats inside `out`
            // (sized for every column), written by this thread only; the
            // source row is within src1's shape.
            unsafe {
                let column = std::slice::from_raw_parts_mut(out.get().add(c * k), k);
                if b.dtype == DType::F32 {
                    b.load_row(j, i2, i3, column);
                } else {
                    // A row of whole blocks (checked by `supports`).
                    let bytes = b.dtype.row_size(k).unwrap_or(0);
                    let row = std::slice::from_raw_parts(b.row(j, i2, i3) as *const u8, bytes);
                    if gantry_engine::quant::dequantize_row(b.dtype, row, column).is_err() {
                        column.fill(f32::NAN);
                    }
                }
            }
        }
    });
}
