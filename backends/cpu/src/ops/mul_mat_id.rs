//! MUL_MAT_ID: each token's chosen experts' weights times its activations
//! (mixture-of-experts feed-forwards), computed as ggml's CPU backend does
//! it: grouped by expert, so each expert's weights stream from memory once
//! per compute however many tokens chose it.
//!
//! 1. The ids are read and checked (an id outside `0..n_expert` is an
//!    error naming the ids and the weights, before anything is read with
//!    it), and the result slots `(e, t)` are sorted by expert: a counting
//!    sort into a list of slots and each expert's end in it.
//! 2. Every slot's activation row is gathered into packed F32 columns, in
//!    that order, so an expert's columns lie side by side.
//! 3. Each expert that any token chose multiplies its weights with its
//!    columns through MUL_MAT's own products: the plain dtypes' paths
//!    ([`super::mul_mat::plain_product`]), the quantized driver
//!    ([`quant_mul_mat`], which quantizes each column once), or the
//!    repacked driver for weights in a `CPU_REPACK` buffer (each expert's
//!    matrix repacked on its own, one after the other).
//! 4. The results are scattered back to their slots.
//!
//! Everything lives in the backend's shared scratch, sized by
//! [`work_floats`]: a steady-state compute allocates nothing.

use gantry_engine::{Context, DType, Error, Result, TensorDesc, TensorId};

use super::bound::Bound;
use super::{mul_mat, repacked, shape_err, src, src_desc};
use crate::parallel::{Par, SendPtr};
use crate::quant::repack::{repacked_mul_mat, repacked_scratch_size};
use crate::quant::{self, QuantMatrix, dot_partner, quant_mul_mat, quant_mul_mat_scratch_size};
use crate::repack_buffer::RepackedStack;

pub fn supports(ctx: &Context, d: &TensorDesc) -> bool {
    let (Some(a), Some(b), Some(ids)) = (src_desc(ctx, d, 0), src_desc(ctx, d, 1), src_desc(ctx, d, 2)) else {
        return false;
    };
    let weights_ok = if a.dtype.is_quantized() {
        // The driver reads dense rows of whole blocks.
        dot_partner(a.dtype).is_some()
            && a.ne[0].is_multiple_of(a.dtype.block_size())
            && (a.ne[0] <= a.dtype.block_size() || a.nb[0] == a.dtype.bytes_per_block())
    } else {
        mul_mat::takes_weights(a.dtype)
    };
    weights_ok && b.dtype == DType::F32 && ids.dtype == DType::I32 && d.dtype == DType::F32
}

/// The sizes of one MUL_MAT_ID.
#[derive(Clone, Copy)]
struct Sizes {
    /// Values per row.
    k: usize,
    /// Rows per expert (result rows).
    m: usize,
    /// Experts in the weights.
    n_expert: usize,
    /// Experts each token uses.
    n_used: usize,
    /// Tokens.
    n_tokens: usize,
}

impl Sizes {
    /// Result slots, one per (chosen expert, token).
    fn slots(&self) -> usize {
        self.n_used * self.n_tokens
    }
}

/// Where each part of the scratch starts, in floats, and its total. The
/// packed activation columns (`slots · k` floats) come first.
struct ScratchLayout {
    /// Packed results, `slots · m` floats.
    out: usize,
    /// The slots sorted by expert (u32 each).
    order: usize,
    /// Each expert's end in `order` (u32 each).
    ends: usize,
    /// The product driver's scratch (bytes).
    driver: usize,
    /// Floats in all.
    total: usize,
}

impl ScratchLayout {
    fn new(s: Sizes, driver_bytes: usize) -> Result<Self> {
        let overflow = || Error::Overflow("MUL_MAT_ID scratch".into());
        let slots = s.slots();
        let out = slots.checked_mul(s.k).ok_or_else(overflow)?;
        let order = out.checked_add(slots.checked_mul(s.m).ok_or_else(overflow)?).ok_or_else(overflow)?;
        let ends = order.checked_add(slots).ok_or_else(overflow)?;
        let driver = ends.checked_add(s.n_expert).ok_or_else(overflow)?;
        let total = driver.checked_add(driver_bytes.div_ceil(size_of::<f32>())).ok_or_else(overflow)?;
        Ok(Self { out, order, ends, driver, total })
    }
}

/// How the experts are multiplied.
#[derive(Clone, Copy)]
enum Experts<'a> {
    /// F32, F16 or BF16 weights: MUL_MAT's plain paths.
    Plain(&'a Bound),
    /// Quantized weights: the quantized driver.
    Quantized(&'a Bound),
    /// Repacked matrices, one per expert (weights in a `CPU_REPACK` buffer).
    Repacked(RepackedStack<'a>),
}

/// Bytes of the product driver's scratch for up to `cols` columns.
fn driver_bytes(dtype: DType, k: usize, cols: usize, threads: usize, repacked: bool) -> Result<usize> {
    if repacked {
        repacked_scratch_size(dtype, k, cols)
    } else if dtype.is_quantized() {
        quant_mul_mat_scratch_size(dtype, k, cols, threads)
    } else {
        Ok(0)
    }
}

/// Floats of the shared scratch node `t` needs on `n_threads` threads.
pub fn work_floats(ctx: &Context, t: TensorId, d: &TensorDesc, n_threads: usize) -> Result<usize> {
    let (Some(a), Some(ids)) = (src_desc(ctx, d, 0), src_desc(ctx, d, 2)) else {
        return Err(shape_err(ctx, t, d, "missing a source"));
    };
    let s = Sizes { k: a.ne[0], m: a.ne[1], n_expert: a.ne[2], n_used: ids.ne[0], n_tokens: ids.ne[1] };
    if s.k == 0 {
        return Ok(0);
    }
    let repacked = d.srcs[0].is_some_and(|w| repacked::is_repacked(ctx, w));
    let driver = driver_bytes(a.dtype, s.k, s.slots(), n_threads.max(1), repacked)?;
    Ok(ScratchLayout::new(s, driver)?.total)
}

pub fn compute(ctx: &Context, t: TensorId, d: &TensorDesc, par: &Par<'_>, shared: &mut Vec<f32>) -> Result<()> {
    let src0 = src(ctx, t, d, 0)?;
    let repacked = repacked::stack(ctx, src0)?;
    let b = Bound::src(ctx, src(ctx, t, d, 1)?)?;
    let ids = Bound::src(ctx, src(ctx, t, d, 2)?)?;
    let dst = Bound::dst(ctx, t)?;
    let plain = match repacked {
        Some(_) => None,
        None => Some(Bound::src(ctx, src0)?),
    };
    let (experts, [k, m, n_expert]) = match (&plain, repacked) {
        (Some(a), _) if a.dtype.is_quantized() => (Experts::Quantized(a), [a.ne[0], a.ne[1], a.ne[2]]),
        (Some(a), _) => (Experts::Plain(a), [a.ne[0], a.ne[1], a.ne[2]]),
        (None, Some(w)) => (Experts::Repacked(w), [w.k, w.m, w.count]),
        (None, None) => return Err(shape_err(ctx, t, d, "no weights")),
    };
    let s = Sizes { k, m, n_expert, n_used: ids.ne[0], n_tokens: ids.ne[1] };
    let ok = b.ne[0] == k
        && b.ne[1] > 0
        && s.n_used.is_multiple_of(b.ne[1])
        && b.ne[2] == s.n_tokens
        && b.ne[3] == 1
        && ids.ne[2] == 1
        && ids.ne[3] == 1
        && dst.ne == [m, s.n_used, s.n_tokens, 1]
        && dst.rows_are_dense();
    if !ok {
        return Err(shape_err(
            ctx,
            t,
            d,
            format!("experts [{k}, {m}, {n_expert}] x {:?} with ids {:?} does not give {:?}", b.ne, ids.ne, dst.ne),
        ));
    }
    if s.slots() > u32::MAX as usize {
        return Err(shape_err(ctx, t, d, format!("{} result slots are more than the kernel indexes", s.slots())));
    }
    let threads = par.n_threads();
    let dtype = match experts {
        Experts::Plain(a) | Experts::Quantized(a) => a.dtype,
        Experts::Repacked(w) => w.dtype,
    };
    let layout = ScratchLayout::new(s, driver_bytes(dtype, k, s.slots(), threads, repacked.is_some())?)?;
    super::grow_scratch(shared, layout.total)?;
    let (head, driver) = shared.split_at_mut(layout.driver);
    let (head, ends) = head.split_at_mut(layout.ends);
    let (head, order) = head.split_at_mut(layout.order);
    let (cols, out) = head.split_at_mut(layout.out);
    let order: &mut [u32] = bytemuck::cast_slice_mut(order);
    let ends: &mut [u32] = bytemuck::cast_slice_mut(ends);
    let driver: &mut [u8] = bytemuck::cast_slice_mut(driver);

    sort_slots_by_expert(ctx, t, d, &ids, s, order, ends)?;
    if s.n_tokens == 1 && b.ne[1] == 1 && shares_columns(experts) {
        return one_column_for_all(experts, &ids, &b, &dst, s, (cols, out, driver), par);
    }
    gather_columns(&b, s, order, cols, par);
    let mut start = 0usize;
    for (x, &end) in ends.iter().enumerate() {
        let (start_x, end) = (start, end as usize);
        start = end;
        if end == start_x {
            continue;
        }
        let n = end - start_x;
        let cols_x = &cols[start_x * k..end * k];
        let out_x = &mut out[start_x * m..end * m];
        multiply_expert(experts, x, (k, m), cols_x, n, out_x, driver, par)?;
    }
    scatter_results(&dst, s, order, out, par);
    Ok(())
}

/// Reads and checks every id and sorts the result slots by expert: slot
/// `e + n_used · t` (chosen expert `e` of token `t`) goes into `order`,
/// expert by expert in slot order, and `ends[x]` is where expert `x`'s
/// slots end.
fn sort_slots_by_expert(
    ctx: &Context,
    t: TensorId,
    d: &TensorDesc,
    ids: &Bound,
    s: Sizes,
    order: &mut [u32],
    ends: &mut [u32],
) -> Result<()> {
    let id_at = |e: usize, tok: usize| -> i32 {
        // SAFETY: e < ids.ne[0] and tok < ids.ne[1] (the shape was checked);
        // I32 elements are aligned (checked at binding).
        unsafe { *(ids.at(e, tok, 0, 0) as *const i32) }
    };
    ends.fill(0);
    for tok in 0..s.n_tokens {
        for e in 0..s.n_used {
            let id = id_at(e, tok);
            match usize::try_from(id) {
                Ok(x) if x < s.n_expert => ends[x] += 1,
                _ => {
                    let weights = d.srcs[0].map(|w| ctx.describe(w)).unwrap_or_default();
                    let id_tensor = d.srcs[2].map(|w| ctx.describe(w)).unwrap_or_default();
                    return Err(Error::InvalidOp {
                        op: "MUL_MAT_ID",
                        reason: format!(
                            "{}: the ids {id_tensor} hold expert {id} at [{e}, {tok}], outside the {} experts of {weights}",
                            ctx.describe(t),
                            s.n_expert
                        ),
                    });
                }
            }
        }
    }
    // Counts to starts (exclusive running sums), then each slot placed at
    // its expert's cursor, which leaves every cursor at its expert's end.
    let mut sum = 0u32;
    for c in ends.iter_mut() {
        let n = *c;
        *c = sum;
        sum += n;
    }
    for tok in 0..s.n_tokens {
        for e in 0..s.n_used {
            // In range: checked in the first pass.
            let x = id_at(e, tok) as usize;
            order[ends[x] as usize] = (e + s.n_used * tok) as u32;
            ends[x] += 1;
        }
    }
    Ok(())
}

/// Packs each slot's activation row (row `e % n_b` of token `t`) as F32
/// columns of `k` values, in `order`.
fn gather_columns(b: &Bound, s: Sizes, order: &[u32], cols: &mut [f32], par: &Par<'_>) {
    let (k, n_b) = (s.k, b.ne[1]);
    let cols = SendPtr(cols.as_mut_ptr());
    par.for_each(order.len(), k, 0, |range, _| {
        for p in range {
            let slot = order[p] as usize;
            let (e, tok) = (slot % s.n_used, slot / s.n_used);
            // SAFETY: column p is `k` floats inside `cols` (sized for every
            // slot), written by this task alone; row `e % n_b` of token `tok`
            // is within b's shape (checked by the caller).
            unsafe {
                let column = std::slice::from_raw_parts_mut(cols.get().add(p * k), k);
                b.load_row(e % n_b, tok, 0, column);
            }
        }
    });
}

/// Copies each packed result column back to its slot of `dst`.
fn scatter_results(dst: &Bound, s: Sizes, order: &[u32], out: &[f32], par: &Par<'_>) {
    let m = s.m;
    par.for_each(order.len(), m, 0, |range, _| {
        for p in range {
            let slot = order[p] as usize;
            let (e, tok) = (slot % s.n_used, slot / s.n_used);
            // SAFETY: (e, tok) is within dst's shape, whose rows are dense
            // F32; each slot appears once in `order`, so no two tasks write
            // one row.
            unsafe { dst.store_row(e, tok, 0, &out[p * m..(p + 1) * m]) };
        }
    });
}

/// Whether the experts' product driver multiplies several matrices by the
/// same column in one dispatch (the repacked driver, and the quantized one
/// for a single column).
fn shares_columns(experts: Experts<'_>) -> bool {
    match experts {
        Experts::Repacked(_) => true,
        Experts::Quantized(_) => quant::shared_takes(1),
        Experts::Plain(_) => false,
    }
}

/// One token whose chosen experts all read its one activation row (a
/// decoder's gate and up products at batch 1): the chosen experts go
/// [`quant::MAX_SHARED`] at a time through the drivers' shared products,
/// the row quantized once per group and one hand-over to the pool each,
/// instead of one per expert. The ids were checked by the caller.
fn one_column_for_all(
    experts: Experts<'_>,
    ids: &Bound,
    b: &Bound,
    dst: &Bound,
    s: Sizes,
    (cols, out, driver): (&mut [f32], &mut [f32], &mut [u8]),
    par: &Par<'_>,
) -> Result<()> {
    let (k, m) = (s.k, s.m);
    let column = &mut cols[..k];
    // SAFETY: row 0 of token 0 exists (the shape was checked) and `column`
    // holds its `k` floats.
    unsafe { b.load_row(0, 0, 0, column) };
    let columns = quant::Columns { data: column, stride: k, n: 1 };
    // SAFETY: e < ids.ne[0] and token 0 exist; I32 elements are aligned.
    let id_at = |e: usize| unsafe { *(ids.at(e, 0, 0, 0) as *const i32) } as usize;
    let out = &mut out[..s.n_used * m];
    for (g, group) in out.chunks_mut(quant::MAX_SHARED * m).enumerate() {
        let first = g * quant::MAX_SHARED;
        let mut dsts: [quant::ColumnsMut<'_>; quant::MAX_SHARED] =
            std::array::from_fn(|_| quant::ColumnsMut { data: &mut [], stride: m });
        let mut n = 0;
        for (slot, rows) in group.chunks_mut(m).enumerate() {
            dsts[slot] = quant::ColumnsMut { data: rows, stride: m };
            n = slot + 1;
        }
        match experts {
            Experts::Repacked(stack) => {
                // x < n_expert = stack.count: the ids were checked against it.
                let expert =
                    |x: usize| stack.matrix(x).ok_or_else(|| Error::Unsupported(format!("no repacked expert {x}")));
                let mut matrices = [expert(id_at(first))?; quant::MAX_SHARED];
                for (i, w) in matrices.iter_mut().enumerate().take(n).skip(1) {
                    *w = expert(id_at(first + i))?;
                }
                repacked_mul_mat(&matrices[..n], columns, &mut dsts[..n], driver, par.jobs())?;
            }
            Experts::Quantized(a) => {
                let row_bytes = a.dtype.row_size(k).unwrap_or(0);
                let span = (m - 1) * a.nb[1] + row_bytes;
                let matrices: [QuantMatrix<'_>; quant::MAX_SHARED] = std::array::from_fn(|i| {
                    let x = id_at(first + i.min(n - 1));
                    // SAFETY: expert x < a.ne[2] (the ids were checked); its m
                    // rows of `row_bytes` bytes, nb[1] apart, lie inside a's memory.
                    let data = unsafe { std::slice::from_raw_parts(a.row(0, x, 0) as *const u8, span) };
                    QuantMatrix { dtype: a.dtype, data, row_stride: a.nb[1], k, m }
                });
                quant::quant_mul_mat_shared(&matrices[..n], columns, &mut dsts[..n], driver, par.jobs())?;
            }
            Experts::Plain(_) => return Err(Error::Unsupported("plain experts take no shared products".into())),
        }
    }
    for (e, rows) in out.chunks(m).enumerate() {
        // SAFETY: slot (e, 0) is within dst's shape, whose rows are dense F32.
        unsafe { dst.store_row(e, 0, 0, rows) };
    }
    Ok(())
}

/// Expert `x`'s weights times `n` packed columns, into `n` packed result
/// columns of `m` values.
#[expect(
    clippy::too_many_arguments,
    reason = "one product: the weights and the expert, the sizes, columns in and out, driver scratch and pool"
)]
fn multiply_expert(
    experts: Experts<'_>,
    x: usize,
    (k, m): (usize, usize),
    cols: &[f32],
    n: usize,
    out: &mut [f32],
    driver: &mut [u8],
    par: &Par<'_>,
) -> Result<()> {
    let f = size_of::<f32>();
    match experts {
        Experts::Plain(a) => {
            // The three operands as bound tensors: expert x < a.ne[2] lies
            // inside a's memory (checked when a was bound), with a's row
            // strides; `cols` holds n columns of k floats and `out` n
            // columns of m, both dense and aligned, valid for this call.
            // SAFETY: x < a.ne[2] and row 0 exists (m > 0: the node is not empty).
            let base = unsafe { a.row(0, x, 0) };
            let a_x = Bound { base, dtype: a.dtype, ne: [k, m, 1, 1], nb: a.nb };
            let b_x = Bound {
                base: cols.as_ptr() as *mut u8,
                dtype: DType::F32,
                ne: [k, n, 1, 1],
                nb: [f, k * f, k * n * f, k * n * f],
            };
            let dst_x = Bound {
                base: out.as_mut_ptr() as *mut u8,
                dtype: DType::F32,
                ne: [m, n, 1, 1],
                nb: [f, m * f, m * n * f, m * n * f],
            };
            mul_mat::plain_product(&a_x, &b_x, &dst_x, par)?;
        }
        Experts::Quantized(a) => {
            let row_bytes = a.dtype.row_size(k).unwrap_or(0);
            let span = (m - 1) * a.nb[1] + row_bytes;
            // SAFETY: expert x's m rows of `row_bytes` bytes, nb[1] apart,
            // lie inside a's memory (checked when a was bound).
            let data = unsafe { std::slice::from_raw_parts(a.row(0, x, 0) as *const u8, span) };
            let w = QuantMatrix { dtype: a.dtype, data, row_stride: a.nb[1], k, m };
            let columns = quant::Columns { data: cols, stride: k, n };
            quant_mul_mat(&w, columns, quant::ColumnsMut { data: out, stride: m }, driver, par.jobs())?;
        }
        Experts::Repacked(stack) => {
            // x < n_expert = stack.count: the ids were checked against it.
            let w = stack.matrix(x).ok_or_else(|| Error::Unsupported(format!("no repacked expert {x}")))?;
            let columns = quant::Columns { data: cols, stride: k, n };
            repacked_mul_mat(&[w], columns, &mut [quant::ColumnsMut { data: out, stride: m }], driver, par.jobs())?;
        }
    }
    Ok(())
}
