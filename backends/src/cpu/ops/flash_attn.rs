//! FLASH_ATTN_EXT: `softmax(Q K^T * scale + slope * mask) V` per query and
//! head in one pass over the keys, with the online softmax (a running
//! maximum, and the sums so far rescaled when it grows), grouped-query
//! broadcast of K and V over heads, ALiBi slopes and logit soft-capping. The
//! result is `[dv, n_head, n_q, ne3]`.
//!
//! Keys are taken in blocks: the scores of a block first, then one maximum,
//! one vectorized `exp` and one rescale per block (ggml rescales per key).

use gantry_engine::{Context, DType, Result, TensorDesc, TensorId};
use half::{bf16, f16};

use super::bound::Bound;
use super::softmax::alibi_slope;
use super::{shape_err, src, src_desc};
use crate::cpu::parallel::Par;
use crate::cpu::simd;

/// Keys scored together before their values are accumulated.
const KV_BLOCK: usize = 64;

/// The op's parameters.
#[derive(Debug, Clone, Copy)]
pub struct Params {
    /// Multiplies `Q K^T`.
    pub scale: f32,
    /// ALiBi maximum bias (0 = off).
    pub max_bias: f32,
    /// Logit soft-capping (0 = off).
    pub softcap: f32,
}

pub fn supports(ctx: &Context, d: &TensorDesc) -> bool {
    let (Some(q), Some(k), Some(v)) = (src_desc(ctx, d, 0), src_desc(ctx, d, 1), src_desc(ctx, d, 2)) else {
        return false;
    };
    // Q8_0: a quantized KV cache (`--kv-type q8_0`), rows dequantized as they are read.
    let kv = |t: DType| matches!(t, DType::F32 | DType::F16 | DType::BF16 | DType::Q8_0);
    let mask_ok = match d.srcs[3] {
        None => true,
        Some(_) => src_desc(ctx, d, 3).is_some_and(|m| matches!(m.dtype, DType::F32 | DType::F16)),
    };
    q.dtype == DType::F32 && kv(k.dtype) && kv(v.dtype) && d.dtype == DType::F32 && mask_ok
}

/// `dot(row, q)` for a K row of any supported dtype (`tmp` holds strided rows).
///
/// # Safety
/// Row indices in range; `q.len()` is K's row length.
#[inline]
unsafe fn k_dot(k: &Bound, row: [usize; 3], q: &[f32], tmp: &mut [f32]) -> f32 {
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

/// Mask values `c0..c0 + out.len()` of mask row `[i1, i2, i3]` as f32.
///
/// # Safety
/// The row and columns are within the mask's shape.
#[inline]
unsafe fn load_mask(m: &Bound, c0: usize, [i1, i2, i3]: [usize; 3], out: &mut [f32]) {
    // SAFETY: in range (the caller's contract); dense rows are contiguous values.
    unsafe {
        if m.rows_are_dense() && m.dtype == DType::F16 {
            let p = (m.row(i1, i2, i3) as *const f16).add(c0);
            simd::f16_to_f32(std::slice::from_raw_parts(p, out.len()), out);
        } else {
            for (j, o) in out.iter_mut().enumerate() {
                *o = m.get(c0 + j, i1, i2, i3);
            }
        }
    }
}

/// Dequantizes the Q8_0 row of `out.len()` values starting at `p`.
///
/// # Safety
/// `p` points at `out.len() / 32` whole Q8_0 blocks.
#[inline]
unsafe fn dequantize_q8_0_row(p: *const u8, out: &mut [f32]) {
    let len = DType::Q8_0.row_size(out.len()).unwrap_or(0);
    // SAFETY: the caller's contract: the row's blocks lie at p.
    let bytes = unsafe { std::slice::from_raw_parts(p, len) };
    // The row length is a whole number of blocks (checked when the cache was made).
    let _ = gantry_engine::quant::dequantize_row(DType::Q8_0, bytes, out);
}

pub fn compute(ctx: &Context, t: TensorId, d: &TensorDesc, p: Params, par: &Par<'_>) -> Result<()> {
    let q = Bound::src(ctx, src(ctx, t, d, 0)?)?;
    let k = Bound::src(ctx, src(ctx, t, d, 1)?)?;
    let v = Bound::src(ctx, src(ctx, t, d, 2)?)?;
    let mask = d.srcs[3].map(|m| Bound::src(ctx, m)).transpose()?;
    let dst = Bound::dst(ctx, t)?;
    let (dk, dv, n_q, n_head, n_batch, n_kv) = (q.ne[0], v.ne[0], q.ne[1], q.ne[2], q.ne[3], k.ne[1]);
    let divides = |a: usize, b: usize| b > 0 && a.is_multiple_of(b);
    let mut ok = k.ne[0] == dk
        && v.ne[1] == n_kv
        && divides(n_head, k.ne[2])
        && divides(n_head, v.ne[2])
        && divides(n_batch, k.ne[3])
        && divides(n_batch, v.ne[3])
        && dst.ne == [dv, n_head, n_q, n_batch]
        && dst.rows_are_dense();
    if let Some(m) = &mask {
        ok &= m.ne[0] == n_kv && m.ne[1] >= n_q && divides(n_head, m.ne[2]) && divides(n_batch, m.ne[3]);
    }
    if !ok {
        return Err(shape_err(ctx, t, d, format!("Q {:?}, K {:?}, V {:?} into {:?}", q.ne, k.ne, v.ne, dst.ne)));
    }
    let (rk2, rk3, rv2, rv3) = (n_head / k.ne[2], n_batch / k.ne[3], n_head / v.ne[2], n_batch / v.ne[3]);
    // ggml folds the softcap into the scale: s = softcap * tanh(qk * scale / softcap).
    let scale = if p.softcap != 0.0 { p.scale / p.softcap } else { p.scale };
    let tmp_len = dk + dv + dv.max(dk) + 3 * KV_BLOCK;
    par.for_each(n_q * n_head * n_batch, n_kv * (dk + dv) * 2, tmp_len, |rows, tmp| {
        let (qrow, rest) = tmp.split_at_mut(dk);
        let (acc, rest) = rest.split_at_mut(dv);
        let (row_tmp, rest) = rest.split_at_mut(dv.max(dk));
        let (scores, rest) = rest.split_at_mut(KV_BLOCK);
        let (weights, mask_block) = rest.split_at_mut(KV_BLOCK);
        for r in rows {
            // Items in q's row order: query fastest, then head, then batch.
            let (iq1, iq2, iq3) = (r % n_q, (r / n_q) % n_head, r / (n_q * n_head));
            let slope = alibi_slope(p.max_bias, iq2, n_head);
            let kh = [iq2 / rk2, iq3 / rk3];
            let vh = [iq2 / rv2, iq3 / rv3];
            // SAFETY: every index below is within its tensor's shape (checked
            // above); this thread owns result row (iq2, iq1, iq3).
            unsafe {
                q.load_row(iq1, iq2, iq3, qrow);
                acc.fill(0.0);
                let (mut running_max, mut sum) = (f32::NEG_INFINITY, 0f64);
                for c0 in (0..n_kv).step_by(KV_BLOCK) {
                    let block = KV_BLOCK.min(n_kv - c0);
                    // The block's mask, converted once (the mask row is the same for every head).
                    let mvals = &mut mask_block[..block];
                    match &mask {
                        Some(m) => {
                            load_mask(m, c0, [iq1, iq2 % m.ne[2], iq3 % m.ne[3]], mvals);
                            // Keys of other sequences, or beyond a window: nothing to score.
                            if simd::max(mvals) == f32::NEG_INFINITY {
                                continue;
                            }
                        }
                        None => mvals.fill(0.0),
                    }
                    // Scores of the block; masked-out keys get -inf (weight 0).
                    for (j, score) in scores[..block].iter_mut().enumerate() {
                        let ic = c0 + j;
                        let mv = if mask.is_some() { slope * mvals[j] } else { 0.0 };
                        if mv == f32::NEG_INFINITY {
                            *score = f32::NEG_INFINITY;
                            continue;
                        }
                        let mut s = k_dot(&k, [ic, kh[0], kh[1]], qrow, row_tmp) * scale;
                        if p.softcap != 0.0 {
                            s = p.softcap * s.tanh();
                        }
                        *score = s + mv;
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
                        if w == 0.0 {
                            continue;
                        }
                        let ic = c0 + j;
                        let vp = v.row(ic, vh[0], vh[1]);
                        if v.dtype == DType::F32 && v.rows_are_dense() {
                            simd::axpy(acc, w, std::slice::from_raw_parts(vp as *const f32, dv));
                        } else if v.dtype == DType::F16 && v.rows_are_dense() {
                            simd::axpy_f16(acc, w, std::slice::from_raw_parts(vp as *const f16, dv));
                        } else if v.dtype == DType::Q8_0 {
                            dequantize_q8_0_row(vp, &mut row_tmp[..dv]);
                            simd::axpy(acc, w, &row_tmp[..dv]);
                        } else {
                            v.load_row(ic, vh[0], vh[1], &mut row_tmp[..dv]);
                            simd::axpy(acc, w, &row_tmp[..dv]);
                        }
                    }
                }
                // A query that sees no key gets zeros, as in ggml.
                let inv = if sum == 0.0 { 0.0 } else { (1.0 / sum) as f32 };
                simd::scale(acc, inv);
                let out = dst.row(iq2, iq1, iq3) as *mut f32;
                std::ptr::copy_nonoverlapping(acc.as_ptr(), out, dv);
            }
        }
    });
    Ok(())
}
