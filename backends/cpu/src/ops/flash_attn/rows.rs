//! Flash attention one query and head at a time, K and V read in place:
//! the decoding path (a query per sequence), and the path for any layout.

use gantry_engine::DType;
use half::{bf16, f16};

use super::super::bound::Bound;
use super::super::softmax::alibi_slope;
use super::{Attention, KV_BLOCK, add_sink, dequantize_q8_0_row, load_mask, prefetch_block};
use crate::parallel::Par;
use crate::simd;

/// `dot(row, q)` for a K row of any supported dtype (`tmp` holds strided rows).
///
/// # Safety
/// Row indices in range; `q.len()` is K's row length.
#[inline]
pub(super) unsafe fn k_dot(k: &Bound, row: [usize; 3], q: &[f32], tmp: &mut [f32]) -> f32 {
    let n = q.len();
    // SAFETY: the row holds n elements from its first one.
    unsafe {
        let p = k.row(row[0], row[1], row[2]);
        match k.dtype {
            DType::Q8_0 => {
                dequantize_q8_0_row(p, &mut tmp[..n]);
                simd::dot_f32(&tmp[..n], q)
            }
            _ if !k.rows_are_dense() => {
                k.load_row(row[0], row[1], row[2], &mut tmp[..n]);
                simd::dot_f32(&tmp[..n], q)
            }
            DType::F16 => simd::dot_f16(std::slice::from_raw_parts(p as *const f16, n), q),
            DType::BF16 => simd::dot_bf16(std::slice::from_raw_parts(p as *const bf16, n), q),
            _ => simd::dot_f32(std::slice::from_raw_parts(p as *const f32, n), q),
        }
    }
}

/// `acc += w · V row`, for a V row of any supported dtype.
///
/// # Safety
/// Row indices in range; `acc.len()` is V's row length.
#[inline]
pub(super) unsafe fn v_axpy(v: &Bound, row: [usize; 3], w: f32, acc: &mut [f32], tmp: &mut [f32]) {
    let dv = acc.len();
    // SAFETY: the row holds dv elements from its first one.
    unsafe {
        let vp = v.row(row[0], row[1], row[2]);
        if v.dtype == DType::F32 && v.rows_are_dense() {
            simd::axpy(acc, w, std::slice::from_raw_parts(vp as *const f32, dv));
        } else if v.dtype == DType::F16 && v.rows_are_dense() {
            simd::axpy_f16(acc, w, std::slice::from_raw_parts(vp as *const f16, dv));
        } else if v.dtype == DType::Q8_0 {
            dequantize_q8_0_row(vp, &mut tmp[..dv]);
            simd::axpy(acc, w, &tmp[..dv]);
        } else {
            v.load_row(row[0], row[1], row[2], &mut tmp[..dv]);
            simd::axpy(acc, w, &tmp[..dv]);
        }
    }
}

/// Computes `a` one (query, head) row at a time, each about `row_work`
/// work, for the split over threads.
pub(super) fn compute(a: &Attention, row_work: usize, par: &Par<'_>) {
    let Attention { dk, dv, n_q, n_head, n_batch, n_kv, rk, rv, .. } = *a;
    let tmp_len = dk + dv + dv.max(dk) + 3 * KV_BLOCK;
    par.for_each(n_q * n_head * n_batch, row_work, tmp_len, |rows, tmp| {
        let (qrow, rest) = tmp.split_at_mut(dk);
        let (acc, rest) = rest.split_at_mut(dv);
        let (row_tmp, rest) = rest.split_at_mut(dv.max(dk));
        let (scores, rest) = rest.split_at_mut(KV_BLOCK);
        let (weights, mask_block) = rest.split_at_mut(KV_BLOCK);
        for r in rows {
            // Items in q's row order: query fastest, then head, then batch.
            let (iq1, iq2, iq3) = (r % n_q, (r / n_q) % n_head, r / (n_q * n_head));
            let slope = alibi_slope(a.params.max_bias, iq2, n_head);
            let kh = [iq2 / rk[0], iq3 / rk[1]];
            let vh = [iq2 / rv[0], iq3 / rv[1]];
            // SAFETY: every index below is within its tensor's shape (checked
            // by the caller); this thread owns result row (iq2, iq1, iq3).
            unsafe {
                a.q.load_row(iq1, iq2, iq3, qrow);
                acc.fill(0.0);
                let (mut running_max, mut sum) = (f32::NEG_INFINITY, 0f64);
                for c0 in (0..n_kv).step_by(KV_BLOCK) {
                    let block = KV_BLOCK.min(n_kv - c0);
                    // The block's mask, converted once (the mask row is the same for every head).
                    let mvals = &mut mask_block[..block];
                    match &a.mask {
                        Some(m) => {
                            load_mask(m, c0, [iq1, iq2 % m.ne[2], iq3 % m.ne[3]], mvals);
                            // Keys of other sequences, or beyond a window: nothing to score.
                            if simd::max(mvals) == f32::NEG_INFINITY {
                                continue;
                            }
                        }
                        None => mvals.fill(0.0),
                    }
                    // The block's K and V rows on their way while the first are scored.
                    prefetch_block(a, c0, block, [kh, vh]);
                    // Scores of the block; masked-out keys get -inf (weight 0).
                    for (j, score) in scores[..block].iter_mut().enumerate() {
                        let mv = if a.mask.is_some() { slope * mvals[j] } else { 0.0 };
                        *score = if mv == f32::NEG_INFINITY {
                            f32::NEG_INFINITY
                        } else {
                            a.finish_score(k_dot(&a.k, [c0 + j, kh[0], kh[1]], qrow, row_tmp)) + mv
                        };
                    }
                    if super::not_a_weight(&scores[..block]) {
                        // The row's result is NaN, as the softmax's would be.
                        sum = f64::NAN;
                        continue;
                    }
                    let block_max = simd::max(&scores[..block]);
                    if block_max == f32::NEG_INFINITY {
                        continue;
                    }
                    // A new maximum rescales what was accumulated (online softmax).
                    if block_max > running_max {
                        let rescale = (running_max - block_max).exp();
                        simd::scale(acc, rescale);
                        sum *= rescale as f64;
                        running_max = block_max;
                    }
                    sum += simd::exp_shifted(&mut weights[..block], &scores[..block], running_max);
                    for (j, &w) in weights[..block].iter().enumerate() {
                        if w != 0.0 {
                            v_axpy(&a.v, [c0 + j, vh[0], vh[1]], w, acc, row_tmp);
                        }
                    }
                }
                add_sink(a, iq2, &mut running_max, &mut sum, acc);
                // A query that sees no key gets zeros, as in ggml.
                let inv = if sum == 0.0 { 0.0 } else { (1.0 / sum) as f32 };
                simd::scale(acc, inv);
                let out = a.dst.row(iq2, iq1, iq3) as *mut f32;
                std::ptr::copy_nonoverlapping(acc.as_ptr(), out, dv);
            }
        }
    });
}
