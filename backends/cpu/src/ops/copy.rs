//! CPY, CONT and DUP: copy the elements of `src0`, in logical order, into
//! the result (another layout, shape or dtype among F32, F16, BF16, I32).
//! Element `k` of the source (counting dim 0 fastest) becomes element `k`
//! of the destination, as in ggml's `dup`.
//!
//! Quantized results: F32 rows are quantized into Q4_0, Q4_1, Q5_0, Q5_1 or
//! Q8_0 rows of the same length with ggml's reference quantizer (exactly
//! ggml's bytes); a quantized tensor is copied into one of its own dtype
//! block by block (rows of equal length, or both tensors packed).

use gantry_engine::quant::quantize_row;
use gantry_engine::{Context, DType, Result, TensorDesc, TensorId};

use super::bound::Bound;
use super::rows::{QUANT_TARGETS, check_failures, dense_blocks, quant_row_bytes};
use super::{shape_err, src, src_desc};
use crate::FirstError;
use crate::parallel::Par;

fn copyable(t: DType) -> bool {
    matches!(t, DType::F32 | DType::F16 | DType::BF16 | DType::I32)
}

pub fn supports(ctx: &Context, d: &TensorDesc) -> bool {
    let Some(s) = src_desc(ctx, d, 0) else { return false };
    if copyable(s.dtype) && copyable(d.dtype) {
        return true;
    }
    let quantizing = s.dtype == DType::F32 && QUANT_TARGETS.contains(&d.dtype) && s.ne[0] == d.ne[0];
    let same_blocks = s.dtype == d.dtype
        && s.dtype.is_quantized()
        && dense_blocks(s)
        && (s.ne[0] == d.ne[0] || (s.is_contiguous() && d.is_contiguous()));
    (quantizing || same_blocks) && dense_blocks(d)
}

/// `b`'s memory seen with `a`'s shape, when `b` is densely packed.
fn reshaped_like(b: &Bound, ne: [usize; 4]) -> Option<Bound> {
    if !b.is_contiguous() {
        return None;
    }
    let mut nb = [b.elem_size(); 4];
    for i in 1..4 {
        nb[i] = nb[i - 1] * ne[i - 1];
    }
    Some(Bound { ne, nb, ..*b })
}

pub fn compute(ctx: &Context, t: TensorId, d: &TensorDesc, par: &Par<'_>) -> Result<()> {
    let s = Bound::src(ctx, src(ctx, t, d, 0)?)?;
    let dst = Bound::dst(ctx, t)?;
    if s.nelements() != dst.nelements() {
        return Err(shape_err(ctx, t, d, format!("{} elements cannot become {}", s.nelements(), dst.nelements())));
    }
    if dst.dtype.is_quantized() {
        return copy_into_blocks(ctx, t, d, &s, &dst, par);
    }
    // Line the two up row for row: equal row lengths map row r to row r;
    // otherwise view the packed one with the other's shape.
    let (s, dst) = if s.ne[0] == dst.ne[0] {
        (s, dst)
    } else if let Some(s2) = reshaped_like(&s, dst.ne) {
        (s2, dst)
    } else if let Some(d2) = reshaped_like(&dst, s.ne) {
        (s, d2)
    } else {
        return copy_elementwise(&s, &dst, par);
    };
    let n0 = s.ne[0];
    let same = s.dtype == dst.dtype;
    let dense = s.rows_are_dense() && dst.rows_are_dense();
    par.for_each(s.nrows(), n0, n0, |rows, tmp| {
        for r in rows {
            let [i1, i2, i3] = s.row_index(r);
            let [j1, j2, j3] = dst.row_index(r);
            // SAFETY: both row indices are in range (equal row counts); this
            // thread owns row r of the destination.
            unsafe {
                if same && dense {
                    std::ptr::copy(s.row(i1, i2, i3), dst.row(j1, j2, j3), n0 * s.elem_size());
                } else if same {
                    let size = s.elem_size();
                    for i0 in 0..n0 {
                        std::ptr::copy(s.at(i0, i1, i2, i3), dst.at(i0, j1, j2, j3), size);
                    }
                } else {
                    s.load_row(i1, i2, i3, tmp);
                    dst.store_row(j1, j2, j3, tmp);
                }
            }
        }
    });
    Ok(())
}

/// The general case (different row lengths, neither side packed): walk both
/// in logical order with separate counters. Rare, so on one thread.
fn copy_elementwise(s: &Bound, dst: &Bound, par: &Par<'_>) -> Result<()> {
    par.inline(0, |_| {
        let mut j = [0usize; 4];
        for i3 in 0..s.ne[3] {
            for i2 in 0..s.ne[2] {
                for i1 in 0..s.ne[1] {
                    for i0 in 0..s.ne[0] {
                        // SAFETY: both index tuples stay within their shapes: `j`
                        // advances once per source element and the counts are equal.
                        unsafe {
                            let from = s.at(i0, i1, i2, i3);
                            let to = dst.at(j[0], j[1], j[2], j[3]);
                            if s.dtype == dst.dtype {
                                std::ptr::copy(from, to, s.elem_size());
                            } else {
                                super::bound::write_elem(dst.dtype, to, super::bound::read_elem(s.dtype, from));
                            }
                        }
                        for k in 0..4 {
                            j[k] += 1;
                            if j[k] < dst.ne[k] {
                                break;
                            }
                            j[k] = 0;
                        }
                    }
                }
            }
        }
    });
    Ok(())
}

/// Copies into a quantized destination: F32 rows quantized, or blocks of the
/// same dtype moved as they are. Rows line up one to one (equal lengths),
/// except for a packed-to-packed block copy, which moves every byte at once.
fn copy_into_blocks(ctx: &Context, t: TensorId, d: &TensorDesc, s: &Bound, dst: &Bound, par: &Par<'_>) -> Result<()> {
    let bytes = quant_row_bytes(ctx, t, d, dst)?;
    if s.dtype == dst.dtype && s.ne[0] != dst.ne[0] {
        let total = quant_row_bytes(ctx, t, d, s)? * s.nrows();
        if !(s.is_contiguous() && dst.is_contiguous()) {
            return Err(shape_err(ctx, t, d, "a block copy between different row lengths needs packed tensors"));
        }
        // SAFETY: both tensors are packed and hold `total` bytes (equal element
        // counts, same dtype); `copy` allows overlap.
        unsafe { std::ptr::copy(s.base, dst.base, total) };
        return Ok(());
    }
    if s.ne[0] != dst.ne[0] || !(s.dtype == dst.dtype || s.dtype == DType::F32) {
        return Err(shape_err(
            ctx,
            t,
            d,
            format!("cannot copy {} rows of {} into {} rows of {}", s.dtype, s.ne[0], dst.dtype, dst.ne[0]),
        ));
    }
    let n0 = s.ne[0];
    let failed = FirstError::default();
    par.for_each(s.nrows(), n0, n0, |rows, tmp| {
        for r in rows {
            let [i1, i2, i3] = s.row_index(r);
            let [j1, j2, j3] = dst.row_index(r);
            // SAFETY: both row indices are in range (equal row counts); this
            // thread owns row r of the destination, whose rows are dense
            // blocks of `bytes` bytes (checked by `supports`).
            unsafe {
                let out = std::slice::from_raw_parts_mut(dst.row(j1, j2, j3), bytes);
                if s.dtype == dst.dtype {
                    std::ptr::copy(s.row(i1, i2, i3), out.as_mut_ptr(), bytes);
                } else {
                    s.load_row(i1, i2, i3, tmp);
                    failed.note(quantize_row(dst.dtype, tmp, out));
                }
            }
        }
    });
    check_failures(ctx, t, d, &failed, "quantizing rows")
}
