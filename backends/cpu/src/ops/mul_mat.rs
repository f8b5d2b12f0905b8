//! MUL_MAT: `dst[i, j] = dot(row i of src0, row j of src1)`, batched over
//! dims 2 and 3 with src0's batch broadcast (ggml's `r2 = ne12 / ne02`).
//!
//! Four paths:
//! - **quantized** src0 (Q4_0 … Q6_K, IQ4_NL, IQ4_XS, MXFP4) goes to the quantized driver (see
//!   [`super::mul_mat_quant`]): activations quantized once, integer dots.
//! - **mat-vec** for one F16 / F32 matrix times one column (token
//!   generation): the streaming kernels of `cpu::float_matvec`.
//! - **dots** for few columns (`n <= DOT_MAX_COLS`, the matrix-vector case
//!   of token generation): each src0 row is read once and dotted with every
//!   column while it is in L1; F16 and BF16 rows are converted in registers.
//!   Rows are spread over the pool.
//! - **sgemm** otherwise: Gantry's own GEMM (`cpu::sgemm`), reading src0
//!   with its strides and widening F16 / BF16 while it packs. Many small
//!   batches run one product per task on one thread each; few large ones
//!   run one after the other, each over all threads.
//!
//! Every src0 dtype goes through one dispatch point, [`src0_path`]: the
//! quantized driver, or a plain dtype's dot product against F32 columns
//! (dots path) and its element type for the GEMM; `supports` follows from
//! it.

use gantry_engine::{Context, DType, Result, TensorDesc, TensorId};
use half::{bf16, f16};

use super::bound::Bound;
use super::{mul_mat_quant, repacked, shape_err, src, src_desc};
use crate::Isa;
use crate::float_matvec::Rows;
use crate::parallel::Par;
use crate::sgemm::{self, Kernels, Lhs, LhsType, Out, Rhs, Shape};
use crate::simd;

/// Up to this many columns, dot products instead of the GEMM. From 2 to 16
/// columns the two took the same time within noise on Zen 4 (2 threads;
/// 4096 x n x 4096 in F32 and F16, where both stream the weights from
/// memory, and 576 x n x 576, where they fit in cache), so the boundary is
/// the GEMM's own panel width: below it the GEMM computes padding.
const DOT_MAX_COLS: usize = 8;
/// Below this many multiply-adds per batch, a batch is not worth splitting
/// over the threads (two jobs of a microsecond or two each), so batches are
/// spread over them instead.
const SPLIT_BATCH_WORK: usize = 48 * 48 * 256;

pub fn supports(ctx: &Context, d: &TensorDesc) -> bool {
    let (Some(a), Some(b)) = (src_desc(ctx, d, 0), src_desc(ctx, d, 1)) else { return false };
    let weights_ok = match src0_path(a.dtype) {
        Some(Src0Path::Plain(_)) => true,
        // The driver reads whole blocks of dense rows.
        Some(Src0Path::Quantized) => a.ne[0] <= a.dtype.block_size() || a.nb[0] == a.dtype.bytes_per_block(),
        None => false,
    };
    // The activations in F32, or already in the weights' dot partner
    // (Q8_0 / Q8_1 / Q8_K, as ggml's CPU backend takes them): whole blocks.
    let acts_ok = b.dtype == DType::F32
        || matches!(src0_path(a.dtype), Some(Src0Path::Quantized))
            && crate::quant::dot_partner(a.dtype) == Some(b.dtype)
            && b.ne[0].is_multiple_of(b.dtype.block_size())
            && b.nb[0] == b.dtype.bytes_per_block();
    weights_ok && acts_ok && d.dtype == DType::F32
}

/// How a src0 dtype is multiplied.
#[derive(Clone, Copy)]
enum Src0Path {
    /// Row by row against the F32 columns, or through the GEMM.
    Plain(Src0Kernels),
    /// Through the quantized driver (activations quantized to the dot partner).
    Quantized,
}

/// The path of a src0 dtype, or `None` when it cannot be multiplied: the one
/// place where src0 dtypes are told apart.
fn src0_path(dtype: DType) -> Option<Src0Path> {
    match src0_kernels(dtype) {
        Some(kernels) => Some(Src0Path::Plain(kernels)),
        None => mul_mat_quant::supports_weights(dtype).then_some(Src0Path::Quantized),
    }
}

/// What the product needs from a src0 dtype.
#[derive(Clone, Copy)]
struct Src0Kernels {
    /// The dot product of one densely stored src0 row (`col.len()`
    /// elements from the pointer) with F32 values.
    dot: unsafe fn(row: *const u8, col: &[f32]) -> f32,
    /// The dot products of one densely stored src0 row with four columns,
    /// reading the row once.
    dot4: unsafe fn(row: *const u8, cols: [&[f32]; 4]) -> [f32; 4],
    /// The element type as the GEMM reads it (widened to F32 as it packs).
    lhs: LhsType,
}

/// `n` elements of `T` at `p`.
///
/// # Safety
/// `p` holds `n` aligned elements of `T` (alignment is checked at binding).
unsafe fn elems<'a, T>(p: *const u8, n: usize) -> &'a [T] {
    // SAFETY: the caller's guarantee.
    unsafe { std::slice::from_raw_parts(p as *const T, n) }
}

/// Defines the row dot products of a plain dtype.
macro_rules! plain_row_kernels {
    ($elem:ty, $dot:ident, $dot4:ident, $simd_dot:path, $simd_dot4:path) => {
        /// # Safety
        /// `p` holds `col.len()` elements.
        unsafe fn $dot(p: *const u8, col: &[f32]) -> f32 {
            // SAFETY: the caller's guarantee.
            $simd_dot(unsafe { elems::<$elem>(p, col.len()) }, col)
        }
        /// # Safety
        /// `p` holds as many elements as the shortest column.
        unsafe fn $dot4(p: *const u8, cols: [&[f32]; 4]) -> [f32; 4] {
            let n = cols.iter().map(|c| c.len()).min().unwrap_or(0);
            // SAFETY: the caller's guarantee.
            $simd_dot4(unsafe { elems::<$elem>(p, n) }, cols)
        }
    };
}

plain_row_kernels!(f32, dot_f32_row, dot4_f32_row, simd::dot_f32, simd::dot4_f32);
plain_row_kernels!(f16, dot_f16_row, dot4_f16_row, simd::dot_f16, simd::dot4_f16);
plain_row_kernels!(bf16, dot_bf16_row, dot4_bf16_row, simd::dot_bf16, simd::dot4_bf16);

/// The kernels of a plain src0 dtype, or `None` when it has none.
fn src0_kernels(dtype: DType) -> Option<Src0Kernels> {
    Some(match dtype {
        DType::F32 => Src0Kernels { dot: dot_f32_row, dot4: dot4_f32_row, lhs: LhsType::F32 },
        DType::F16 => Src0Kernels { dot: dot_f16_row, dot4: dot4_f16_row, lhs: LhsType::F16 },
        DType::BF16 => Src0Kernels { dot: dot_bf16_row, dot4: dot4_bf16_row, lhs: LhsType::BF16 },
        _ => return None,
    })
}

/// The shapes of one product, from the bound tensors.
#[derive(Clone, Copy)]
pub(super) struct Dims {
    /// Values per row of src0 and src1.
    pub k: usize,
    /// Rows of src0 (result rows).
    pub m: usize,
    /// Rows of src1 per batch (result columns).
    pub n: usize,
    /// Result batches along dims 2 and 3.
    pub ne2: usize,
    pub ne3: usize,
    /// Broadcast ratios of src0's batch.
    pub r2: usize,
    pub r3: usize,
}

impl Dims {
    /// Result batches.
    pub fn batches(&self) -> usize {
        self.ne2 * self.ne3
    }

    /// Result batch `g` as `(i2, i3)` and the src0 batch it reads.
    fn batch(&self, g: usize) -> ([usize; 2], [usize; 2]) {
        let (i2, i3) = (g % self.ne2, g / self.ne2);
        ([i2, i3], [i2 / self.r2, i3 / self.r3])
    }
}

pub fn compute(ctx: &Context, t: TensorId, d: &TensorDesc, par: &Par<'_>, shared: &mut Vec<f32>) -> Result<()> {
    let src0 = src(ctx, t, d, 0)?;
    let repacked = repacked::matrix(ctx, src0)?;
    let b = Bound::src(ctx, src(ctx, t, d, 1)?)?;
    let dst = Bound::dst(ctx, t)?;
    if let Some(w) = repacked {
        return mul_mat_quant::compute_repacked(ctx, t, d, w, (&b, &dst), par, shared);
    }
    let a = Bound::src(ctx, src0)?;
    let ok = a.ne[0] == b.ne[0]
        && a.ne[2] > 0
        && a.ne[3] > 0
        && b.ne[2] % a.ne[2] == 0
        && b.ne[3] % a.ne[3] == 0
        && dst.ne == [a.ne[1], b.ne[1], b.ne[2], b.ne[3]]
        && dst.rows_are_dense();
    if !ok {
        return Err(shape_err(ctx, t, d, format!("{:?} x {:?} does not give {:?}", a.ne, b.ne, dst.ne)));
    }
    let dims = Dims {
        k: a.ne[0],
        m: a.ne[1],
        n: b.ne[1],
        ne2: b.ne[2],
        ne3: b.ne[3],
        r2: b.ne[2] / a.ne[2],
        r3: b.ne[3] / a.ne[3],
    };
    let kernels = match src0_path(a.dtype) {
        Some(Src0Path::Plain(kernels)) => kernels,
        Some(Src0Path::Quantized) => {
            return mul_mat_quant::compute_plain(ctx, t, d, (&a, &b, &dst), dims, par, shared);
        }
        None => return Err(shape_err(ctx, t, d, format!("src0 dtype {}", a.dtype))),
    };
    if dims.n == 1 && dims.batches() == 1 && mat_vec(&a, &b, &dst, dims, par)? {
        return Ok(());
    }
    if dims.n <= DOT_MAX_COLS {
        mul_mat_dots(&a, kernels, &b, &dst, dims, par);
    } else {
        mul_mat_sgemm(&a, kernels.lhs, &b, &dst, dims, par);
    }
    Ok(())
}

/// One product of 2-d operands in a plain dtype (F32, F16, BF16), already
/// bound: `a` is `[k, m]`, `b` F32 `[k, n]`, `dst` F32 `[m, n]` with dense
/// rows (MUL_MAT_ID's per-expert products go through here, on MUL_MAT's own
/// paths). Returns `false`, having done nothing, for another dtype.
pub(super) fn plain_product(a: &Bound, b: &Bound, dst: &Bound, par: &Par<'_>) -> Result<bool> {
    let Some(Src0Path::Plain(kernels)) = src0_path(a.dtype) else { return Ok(false) };
    let dims = Dims { k: a.ne[0], m: a.ne[1], n: b.ne[1], ne2: 1, ne3: 1, r2: 1, r3: 1 };
    if dims.n == 1 && mat_vec(a, b, dst, dims, par)? {
        return Ok(true);
    }
    if dims.n <= DOT_MAX_COLS {
        mul_mat_dots(a, kernels, b, dst, dims, par);
    } else {
        mul_mat_sgemm(a, kernels.lhs, b, dst, dims, par);
    }
    Ok(true)
}

/// Whether MUL_MAT multiplies weights of `dtype` against F32 columns.
pub(super) fn takes_weights(dtype: DType) -> bool {
    src0_path(dtype).is_some()
}

/// Floats of the shared scratch node `t` needs on `n_threads` threads: the
/// quantized path's packed columns and driver scratch (the GEMM packs into
/// per-thread scratch).
pub fn work_floats(ctx: &Context, t: TensorId, d: &TensorDesc, n_threads: usize) -> Result<usize> {
    let (Some(a), Some(b)) = (src_desc(ctx, d, 0), src_desc(ctx, d, 1)) else {
        return Err(shape_err(ctx, t, d, "missing a source"));
    };
    let (k, n) = (a.ne[0], b.ne[1]);
    Ok(match src0_path(a.dtype) {
        Some(Src0Path::Quantized) if k > 0 => {
            let repacked = d.srcs[0].is_some_and(|s| repacked::is_repacked(ctx, s));
            mul_mat_quant::work_floats(a.dtype, k, n * b.ne[2] * b.ne[3], n_threads.max(1), repacked)?
        }
        _ => 0,
    })
}

/// One weight matrix times one column (token generation with F16 / F32
/// weights) through the streaming mat-vec kernels of `cpu::float_matvec` (several
/// rows per pass over the column, rows prefetched). Returns `false`, having
/// done nothing, for what they do not take: other dtypes, rows that are not
/// dense, strides that are not whole elements.
fn mat_vec(a: &Bound, b: &Bound, dst: &Bound, dims: Dims, par: &Par<'_>) -> Result<bool> {
    let Dims { k, m, .. } = dims;
    let elem = a.elem_size();
    if !matches!(a.dtype, DType::F16 | DType::F32) || !a.rows_are_dense() || !b.rows_are_dense() {
        return Ok(false);
    }
    if m == 0 || k == 0 || !a.nb[1].is_multiple_of(elem) {
        return Ok(false);
    }
    let stride = a.nb[1] / elem;
    let len = (m - 1) * stride + k;
    // SAFETY: src0's m rows of k elements, `stride` elements apart, lie in
    // its memory from its first element (checked at binding; its element
    // alignment too); the column is k dense floats of src1; dst's first row
    // holds m floats and is a different tensor.
    unsafe {
        let x = std::slice::from_raw_parts(b.row(0, 0, 0) as *const f32, k);
        let y = std::slice::from_raw_parts_mut(dst.row(0, 0, 0) as *mut f32, m);
        match a.dtype {
            DType::F16 => {
                let w = std::slice::from_raw_parts(a.row(0, 0, 0) as *const f16, len);
                crate::float_matvec::f16_mat_vec(Rows { data: w, k, m, row_stride: stride }, x, y, par.jobs())?;
            }
            _ => {
                let w = std::slice::from_raw_parts(a.row(0, 0, 0) as *const f32, len);
                crate::float_matvec::f32_mat_vec(Rows { data: w, k, m, row_stride: stride }, x, y, par.jobs())?;
            }
        }
    }
    Ok(true)
}

/// Row `i` of src0's batch `ab` dotted with `col` (`k` floats). `a_tmp`
/// (k floats) holds the row when it is not densely stored.
///
/// # Safety
/// Indices in range; `col.len() == k`.
#[inline]
unsafe fn row_dot(a: &Bound, kernels: Src0Kernels, i: usize, ab: [usize; 2], col: &[f32], a_tmp: &mut [f32]) -> f32 {
    // SAFETY: the row holds k elements of a's dtype from its first one.
    unsafe {
        if a.rows_are_dense() {
            (kernels.dot)(a.row(i, ab[0], ab[1]), col)
        } else {
            a.load_row(i, ab[0], ab[1], a_tmp);
            simd::dot_f32(a_tmp, col)
        }
    }
}

fn mul_mat_dots(a: &Bound, kernels: Src0Kernels, b: &Bound, dst: &Bound, dims: Dims, par: &Par<'_>) {
    let Dims { k, m, n, .. } = dims;
    let b_dense = b.rows_are_dense();
    let b_tmp = if b_dense { 0 } else { n * k };
    par.for_each(dims.batches() * m, k * n, b_tmp + k, |range, tmp| {
        let (cols, a_tmp) = tmp.split_at_mut(b_tmp);
        let mut loaded = usize::MAX;
        for g in range {
            let (batch, i) = (g / m, g % m);
            let ([i2, i3], ab) = dims.batch(batch);
            if !b_dense && loaded != batch {
                for j in 0..n {
                    // SAFETY: column j of batch (i2, i3) is in range.
                    unsafe { b.load_row(j, i2, i3, &mut cols[j * k..(j + 1) * k]) };
                }
                loaded = batch;
            }
            let col = |j: usize| -> &[f32] {
                if b_dense {
                    // SAFETY: column j of batch (i2, i3) holds k floats.
                    unsafe { std::slice::from_raw_parts(b.row(j, i2, i3) as *const f32, k) }
                } else {
                    &cols[j * k..(j + 1) * k]
                }
            };
            let mut j = 0;
            // Four columns at a time read the row once for all four.
            if a.rows_are_dense() {
                while j + 4 <= n {
                    // SAFETY: indices in range; this thread owns row i of every
                    // result column of this batch.
                    unsafe {
                        let out = (kernels.dot4)(a.row(i, ab[0], ab[1]), [col(j), col(j + 1), col(j + 2), col(j + 3)]);
                        for (jj, v) in out.into_iter().enumerate() {
                            *(dst.at(i, j + jj, i2, i3) as *mut f32) = v;
                        }
                    }
                    j += 4;
                }
            }
            for j in j..n {
                // SAFETY: as above.
                unsafe { *(dst.at(i, j, i2, i3) as *mut f32) = row_dot(a, kernels, i, ab, col(j), a_tmp) };
            }
        }
    });
}

/// Whether a product of `batches` batches of `per_batch` multiply-adds
/// runs one batch per task (on one thread each) rather than each batch
/// over all threads: when there are batches enough to go round, or each is
/// too small to split.
fn spreads_batches(batches: usize, per_batch: usize, n_threads: usize) -> bool {
    batches > 1 && (batches >= 2 * n_threads || per_batch < SPLIT_BATCH_WORK)
}

/// Src0's batch `ab` as the GEMM's left operand.
///
/// # Safety
/// `ab` is in range.
unsafe fn lhs_of(a: &Bound, lhs: LhsType, ab: [usize; 2]) -> Lhs {
    Lhs {
        // SAFETY: the caller's guarantee.
        ptr: unsafe { a.row(0, ab[0], ab[1]) },
        dtype: lhs,
        row_stride: a.nb[1],
        // One element per row has no stride to speak of (ggml leaves any there).
        elem_stride: if a.ne[0] <= 1 { lhs.size() } else { a.nb[0] },
    }
}

/// Src1's batch `bi` as the GEMM's right operand.
///
/// # Safety
/// `bi` is in range.
unsafe fn rhs_of(b: &Bound, bi: [usize; 2]) -> Rhs {
    Rhs {
        // SAFETY: the caller's guarantee.
        ptr: unsafe { b.row(0, bi[0], bi[1]) },
        col_stride: b.nb[1],
        elem_stride: if b.ne[0] <= 1 { size_of::<f32>() } else { b.nb[0] },
    }
}

/// The result's batch `bi` as the GEMM's output.
///
/// # Safety
/// `bi` is in range.
unsafe fn out_of(dst: &Bound, bi: [usize; 2]) -> Out {
    // SAFETY: the caller's guarantee.
    Out { ptr: unsafe { dst.row(0, bi[0], bi[1]) } as *mut f32, col_stride: dst.nb[1] / size_of::<f32>() }
}

/// The GEMM path: every result batch through `cpu::sgemm`, spread over the
/// threads one batch per task, or one after the other each over all threads.
fn mul_mat_sgemm(a: &Bound, lhs: LhsType, b: &Bound, dst: &Bound, dims: Dims, par: &Par<'_>) {
    let Dims { k, m, n, .. } = dims;
    let kernels = Kernels::of(Isa::best());
    let shape = Shape { m, n, k };
    let per_batch = m * n * k;
    if spreads_batches(dims.batches(), per_batch, par.n_threads()) {
        let scratch = sgemm::sgemm_one_thread_floats(&kernels, shape);
        par.for_each(dims.batches(), per_batch, scratch, |range, tmp| {
            for g in range {
                let (bi, ab) = dims.batch(g);
                // SAFETY: all indices are in range (checked shapes); the
                // operands lie in their tensors at their strides; this task
                // alone writes result batch g; `tmp` is the GEMM's scratch.
                unsafe {
                    sgemm::sgemm_one_thread(&kernels, shape, &lhs_of(a, lhs, ab), &rhs_of(b, bi), &out_of(dst, bi), tmp)
                };
            }
        });
        return;
    }
    for g in 0..dims.batches() {
        let (bi, ab) = dims.batch(g);
        // SAFETY: as above; the batch is split over the threads by the GEMM.
        unsafe { sgemm::sgemm(&kernels, shape, &lhs_of(a, lhs, ab), &rhs_of(b, bi), &out_of(dst, bi), par) };
    }
}
