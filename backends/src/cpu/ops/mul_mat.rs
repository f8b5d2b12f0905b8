//! MUL_MAT: `dst[i, j] = dot(row i of src0, row j of src1)`, batched over
//! dims 2 and 3 with src0's batch broadcast (ggml's `r2 = ne12 / ne02`).
//!
//! Four paths:
//! - **quantized** src0 (Q4_0 … Q6_K) goes to the quantized driver (see
//!   [`super::mul_mat_quant`]): activations quantized once, integer dots.
//! - **mat-vec** for one F16 / F32 matrix times one column (token
//!   generation): the streaming kernels of `cpu::float_matvec`.
//! - **dots** for few columns (`n <= DOT_MAX_COLS`, the matrix-vector case
//!   of token generation): each src0 row is read once and dotted with every
//!   column while it is in L1; F16 and BF16 rows are converted in registers.
//!   Rows are spread over the pool.
//! - **gemm** otherwise, through the `gemm` crate: F32 src0 is used in place
//!   with its strides; F16 / BF16 src0 is converted to F32 in scratch, in
//!   blocks of rows. Many small batches run one gemm per thread; few large
//!   ones run one after the other with gemm's own threading on this pool.
//!
//! Every src0 dtype goes through one dispatch point, [`src0_path`]: the
//! quantized driver, or a plain dtype's dot product against F32 columns
//! (dots path) and row conversion to F32 (gemm path); `supports` follows
//! from it.

use gantry_engine::{Context, DType, Result, TensorDesc, TensorId};
use gemm::Parallelism;
use half::{bf16, f16};

use super::bound::Bound;
use super::{mul_mat_quant, repacked, shape_err, src, src_desc};
use crate::cpu::float_matvec::Rows;
use crate::cpu::parallel::{Par, SendPtr};
use crate::cpu::simd;

/// Up to this many columns, dot products beat packing for gemm.
const DOT_MAX_COLS: usize = 8;
/// Rows of F16 / BF16 src0 converted to F32 at a time on the gemm path.
const CONVERT_BLOCK_ROWS: usize = 512;
/// Below this many multiply-adds per batch, gemm does not thread anyway
/// (its own threshold), so batches are better spread over the pool.
const GEMM_THREADING_WORK: usize = 48 * 48 * 256;

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
            && crate::cpu::quant::dot_partner(a.dtype) == Some(b.dtype)
            && b.ne[0].is_multiple_of(b.dtype.block_size())
            && b.nb[0] == b.dtype.bytes_per_block();
    weights_ok && acts_ok && d.dtype == DType::F32
}

/// How a src0 dtype is multiplied.
#[derive(Clone, Copy)]
enum Src0Path {
    /// Row by row against the F32 columns, or converted for gemm.
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
    /// Converts one densely stored src0 row (`out.len()` elements) to F32.
    to_f32: unsafe fn(row: *const u8, out: &mut [f32]),
    /// Whether gemm reads the rows as they lie (F32) instead of converted.
    in_place: bool,
}

/// `n` elements of `T` at `p`.
///
/// # Safety
/// `p` holds `n` aligned elements of `T` (alignment is checked at binding).
unsafe fn elems<'a, T>(p: *const u8, n: usize) -> &'a [T] {
    // SAFETY: the caller's guarantee.
    unsafe { std::slice::from_raw_parts(p as *const T, n) }
}

/// Defines a row dot product and a row conversion for a plain dtype.
macro_rules! plain_row_kernels {
    ($elem:ty, $dot:ident, $dot4:ident, $to_f32:ident, $simd_dot:path, $simd_dot4:path, $convert:expr) => {
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
        /// # Safety
        /// `p` holds `out.len()` elements.
        unsafe fn $to_f32(p: *const u8, out: &mut [f32]) {
            // SAFETY: the caller's guarantee.
            let row = unsafe { elems::<$elem>(p, out.len()) };
            $convert(row, out)
        }
    };
}

plain_row_kernels!(
    f32,
    dot_f32_row,
    dot4_f32_row,
    f32_row_to_f32,
    simd::dot_f32,
    simd::dot4_f32,
    |r: &[f32], o: &mut [f32]| o.copy_from_slice(r)
);
plain_row_kernels!(f16, dot_f16_row, dot4_f16_row, f16_row_to_f32, simd::dot_f16, simd::dot4_f16, simd::f16_to_f32);
plain_row_kernels!(
    bf16,
    dot_bf16_row,
    dot4_bf16_row,
    bf16_row_to_f32,
    simd::dot_bf16,
    simd::dot4_bf16,
    simd::bf16_to_f32_slice
);

/// The kernels of a plain src0 dtype, or `None` when it has none.
fn src0_kernels(dtype: DType) -> Option<Src0Kernels> {
    Some(match dtype {
        DType::F32 => Src0Kernels { dot: dot_f32_row, dot4: dot4_f32_row, to_f32: f32_row_to_f32, in_place: true },
        DType::F16 => Src0Kernels { dot: dot_f16_row, dot4: dot4_f16_row, to_f32: f16_row_to_f32, in_place: false },
        DType::BF16 => Src0Kernels { dot: dot_bf16_row, dot4: dot4_bf16_row, to_f32: bf16_row_to_f32, in_place: false },
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
        mul_mat_gemm(&a, kernels, &b, &dst, dims, par, shared)?;
    }
    Ok(())
}

/// Floats of the shared scratch node `t` needs on `n_threads` threads: the
/// quantized path's packed columns and driver scratch, or the gemm path's
/// converted weight rows (an upper bound: sizing it once is the point).
pub fn work_floats(ctx: &Context, t: TensorId, d: &TensorDesc, n_threads: usize) -> Result<usize> {
    let (Some(a), Some(b)) = (src_desc(ctx, d, 0), src_desc(ctx, d, 1)) else {
        return Err(shape_err(ctx, t, d, "missing a source"));
    };
    let (k, m, n) = (a.ne[0], a.ne[1], b.ne[1]);
    Ok(match src0_path(a.dtype) {
        Some(Src0Path::Quantized) if k > 0 => {
            let repacked = d.srcs[0].is_some_and(|s| repacked::is_repacked(ctx, s));
            mul_mat_quant::work_floats(a.dtype, k, n * b.ne[2] * b.ne[3], n_threads.max(1), repacked)?
        }
        Some(Src0Path::Plain(kernels)) if n > DOT_MAX_COLS && !kernels.in_place => CONVERT_BLOCK_ROWS.min(m) * k,
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
                crate::cpu::float_matvec::f16_mat_vec(Rows { data: w, k, m, row_stride: stride }, x, y, par.jobs())?;
            }
            _ => {
                let w = std::slice::from_raw_parts(a.row(0, 0, 0) as *const f32, len);
                crate::cpu::float_matvec::f32_mat_vec(Rows { data: w, k, m, row_stride: stride }, x, y, par.jobs())?;
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

/// Converts rows `rows` of src0's batch `ab` to F32, packed `k` apart.
///
/// # Safety
/// Indices in range; `out.len() >= rows.len() * k`.
unsafe fn src0_rows_to_f32(
    a: &Bound,
    kernels: Src0Kernels,
    ab: [usize; 2],
    rows: std::ops::Range<usize>,
    out: &mut [f32],
) {
    let k = a.ne[0];
    for (o, i) in rows.enumerate() {
        let out = &mut out[o * k..(o + 1) * k];
        // SAFETY: the caller's guarantee.
        unsafe {
            if a.rows_are_dense() {
                (kernels.to_f32)(a.row(i, ab[0], ab[1]), out);
            } else {
                a.load_row(i, ab[0], ab[1], out);
            }
        }
    }
}

/// One gemm: `dst[rows, all columns]` of result batch `(i2, i3)` from an
/// `m x k` left matrix at `lhs` (strides in floats).
///
/// # Safety
/// Every pointer and stride addresses memory valid for the sizes given; the
/// destination does not overlap the inputs.
#[expect(
    clippy::too_many_arguments,
    reason = "one unsafe call into gemm: the left operand's pointer and strides, the right and result views, and the batch index"
)]
unsafe fn gemm_block(
    m: usize,
    dims: Dims,
    lhs: *const f32,
    lhs_rs: isize,
    lhs_cs: isize,
    b: &Bound,
    dst_block: *mut f32,
    dst: &Bound,
    bi: [usize; 2],
    parallelism: Parallelism,
) {
    let f = size_of::<f32>();
    // gemm computes the transposed product, dst^T (n x m) = b^T (n x k) *
    // lhs^T (k x m), over the same memory: with ggml's layouts (rows of k
    // contiguous on both sides) that makes gemm's left matrix row-major and
    // its result row-major, which its kernels run about 1.4x faster than the
    // direct form (measured at 1024^3 on one AVX2 core: 73 vs 53 GFLOP/s).
    // SAFETY: the caller's guarantee; gemm reads b^T (n x k), lhs^T (k x m)
    // and writes dst^T (n x m), each through the strides given.
    unsafe {
        gemm::gemm(
            dims.n,
            m,
            dims.k,
            dst_block,
            (dst.nb[0] / f) as isize,
            (dst.nb[1] / f) as isize,
            false,
            b.row(0, bi[0], bi[1]) as *const f32,
            (b.nb[0] / f) as isize,
            (b.nb[1] / f) as isize,
            lhs,
            lhs_rs,
            lhs_cs,
            0.0f32,
            1.0f32,
            false,
            false,
            false,
            parallelism,
        );
    }
}

/// [`gemm_block`] over all of this backend's threads: gemm's own threading
/// on a rayon pool, else blocks of rows as the job system's tasks, each
/// through gemm on one thread.
///
/// # Safety
/// As for [`gemm_block`], with `lhs` = (pointer, row stride, column stride).
#[expect(
    clippy::too_many_arguments,
    reason = "one unsafe gemm call split over threads: gemm_block's operands plus the parallel context"
)]
unsafe fn gemm_split(
    par: &Par<'_>,
    m: usize,
    dims: Dims,
    lhs: (*const f32, isize, isize),
    b: &Bound,
    out: *mut f32,
    dst: &Bound,
    bi: [usize; 2],
) {
    let (lhs, rs, cs) = lhs;
    if let Some(pool) = par.jobs().rayon_pool() {
        let threads = Parallelism::Rayon(par.n_threads());
        let (lhs, out) = (SendPtr(lhs as *mut f32), SendPtr(out));
        // SAFETY: the caller's guarantee; gemm threads over this pool.
        pool.install(|| unsafe { gemm_block(m, dims, lhs.get(), rs, cs, b, out.get(), dst, bi, threads) });
        return;
    }
    // Row blocks of at least 32 rows (gemm's kernels are a few rows tall), about 4 per task.
    let rows = m.div_ceil(par.n_threads() * 4).max(32);
    let (lhs, out) = (SendPtr(lhs as *mut f32), SendPtr(out));
    let out_step = (dst.nb[0] / size_of::<f32>()) as isize;
    par.run(m.div_ceil(rows), &|t| {
        let r0 = t * rows;
        let n_rows = rows.min(m - r0);
        // SAFETY: rows r0..r0 + n_rows of the left matrix and the matching
        // result columns are inside the block (the caller's guarantee); this
        // task alone writes them.
        unsafe {
            let lhs = lhs.get().offset(r0 as isize * rs);
            let out = out.get().offset(r0 as isize * out_step);
            gemm_block(n_rows, dims, lhs, rs, cs, b, out, dst, bi, Parallelism::None);
        }
    });
}

fn mul_mat_gemm(
    a: &Bound,
    kernels: Src0Kernels,
    b: &Bound,
    dst: &Bound,
    dims: Dims,
    par: &Par<'_>,
    shared: &mut Vec<f32>,
) -> Result<()> {
    let Dims { k, m, n, .. } = dims;
    let per_batch = m * n * k;
    let f = size_of::<f32>();
    // F32 src0 goes to gemm as it lies (any strides); other dtypes are converted first.
    let direct = kernels.in_place;
    let spread_batches = dims.batches() >= 2 * par.n_threads() || per_batch < GEMM_THREADING_WORK;
    if par.n_threads() == 1 || (dims.batches() > 1 && spread_batches) {
        let tmp_len = if direct { 0 } else { m * k };
        par.for_each(dims.batches(), per_batch, tmp_len, |range, tmp| {
            for g in range {
                let (bi, ab) = dims.batch(g);
                // SAFETY: all indices are in range (checked shapes); this thread
                // owns result batch g; gemm runs single-threaded here.
                unsafe {
                    let (lhs, rs, cs) = if direct {
                        (a.row(0, ab[0], ab[1]) as *const f32, (a.nb[1] / f) as isize, (a.nb[0] / f) as isize)
                    } else {
                        src0_rows_to_f32(a, kernels, ab, 0..m, tmp);
                        (tmp.as_ptr(), k as isize, 1)
                    };
                    let out = dst.row(0, bi[0], bi[1]) as *mut f32;
                    gemm_block(m, dims, lhs, rs, cs, b, out, dst, bi, Parallelism::None);
                }
            }
        });
        return Ok(());
    }
    let a_batches = a.ne[2] * a.ne[3];
    for ag in 0..a_batches {
        let ab = [ag % a.ne[2], ag / a.ne[2]];
        // The result batches reading this src0 batch.
        let users = (0..dims.batches()).filter(|&g| dims.batch(g).1 == ab);
        if direct {
            for g in users {
                let bi = dims.batch(g).0;
                let (rs, cs) = ((a.nb[1] / f) as isize, (a.nb[0] / f) as isize);
                // SAFETY: as above; the block is split over this backend's threads.
                unsafe {
                    let lhs = a.row(0, ab[0], ab[1]) as *const f32;
                    gemm_split(par, m, dims, (lhs, rs, cs), b, dst.row(0, bi[0], bi[1]) as *mut f32, dst, bi);
                }
            }
            continue;
        }
        let block = CONVERT_BLOCK_ROWS.min(m);
        super::grow_scratch(shared, block * k)?;
        for r0 in (0..m).step_by(block) {
            let rows = block.min(m - r0);
            let out = SendPtr(shared.as_mut_ptr());
            par.for_each(rows, k, 0, |range, _| {
                // SAFETY: disjoint row ranges of the shared scratch per call;
                // rows r0 + range are in range of src0.
                unsafe {
                    let part = std::slice::from_raw_parts_mut(out.get().add(range.start * k), range.len() * k);
                    src0_rows_to_f32(a, kernels, ab, r0 + range.start..r0 + range.end, part);
                }
            });
            for g in users.clone() {
                let bi = dims.batch(g).0;
                let lhs = SendPtr(shared.as_mut_ptr());
                // SAFETY: the converted block is `rows x k` floats; the result
                // rows r0.. of batch bi are in range.
                unsafe {
                    let out = dst.at(r0, 0, bi[0], bi[1]) as *mut f32;
                    gemm_split(par, rows, dims, (lhs.get() as *const f32, k as isize, 1), b, out, dst, bi);
                }
            }
        }
    }
    Ok(())
}
