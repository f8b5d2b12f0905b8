//! SOFT_MAX (scale, optional F32/F16 mask broadcast over dims 2 and 3,
//! ALiBi slopes per head, optional attention sinks: one F32 logit per head
//! that joins each row's normalisation), DIAG_MASK_INF and DIAG_MASK_ZERO.

use gantry_engine::{Context, DType, Op, Result, TensorDesc, TensorId};

use super::bound::Bound;
use super::{is_float, shape_err, src, src_desc};
use crate::parallel::Par;
use crate::simd;

pub fn supports(ctx: &Context, d: &TensorDesc) -> bool {
    let Some(s) = src_desc(ctx, d, 0) else { return false };
    let mask_ok = match d.srcs[1] {
        None => true,
        Some(_) => src_desc(ctx, d, 1).is_some_and(|m| matches!(m.dtype, DType::F32 | DType::F16)),
    };
    let sinks_ok = match d.srcs[2] {
        None => true,
        Some(_) => src_desc(ctx, d, 2).is_some_and(|k| k.dtype == DType::F32),
    };
    is_float(s.dtype) && s.dtype == d.dtype && mask_ok && sinks_ok
}

/// ALiBi: the slope of head `h` of `n_head` for `max_bias` (1 when off),
/// ggml's geometric sequence over the largest power of two of heads and
/// interleaved odd powers beyond it.
pub fn alibi_slope(max_bias: f32, h: usize, n_head: usize) -> f32 {
    if max_bias <= 0.0 {
        return 1.0;
    }
    let n_head_log2 = 1usize << (n_head.max(1) as f32).log2().floor() as u32;
    let m0 = 2f32.powf(-max_bias / n_head_log2 as f32);
    let m1 = 2f32.powf(-(max_bias / 2.0) / n_head_log2 as f32);
    if h < n_head_log2 { m0.powi(h as i32 + 1) } else { m1.powi(2 * (h - n_head_log2) as i32 + 1) }
}

pub fn compute(ctx: &Context, t: TensorId, d: &TensorDesc, par: &Par<'_>) -> Result<()> {
    let s = Bound::src(ctx, src(ctx, t, d, 0)?)?;
    let dst = Bound::dst(ctx, t)?;
    if s.ne != dst.ne {
        return Err(shape_err(ctx, t, d, format!("source shape {:?} differs from the result's", s.ne)));
    }
    let n0 = s.ne[0];
    match d.op {
        Op::SoftMax { scale, max_bias } => {
            let mask = d.srcs[1].map(|m| Bound::src(ctx, m)).transpose()?;
            if let Some(m) = &mask {
                let fits = m.ne[0] == n0
                    && m.ne[1] >= s.ne[1]
                    && m.ne[2] > 0
                    && m.ne[3] > 0
                    && s.ne[2] % m.ne[2] == 0
                    && s.ne[3] % m.ne[3] == 0;
                if !fits {
                    return Err(shape_err(ctx, t, d, format!("mask {:?} does not fit logits {:?}", m.ne, s.ne)));
                }
            }
            let sinks = d.srcs[2].map(|k| Bound::src(ctx, k)).transpose()?;
            if let Some(k) = &sinks
                && k.ne != [s.ne[2], 1, 1, 1]
            {
                return Err(shape_err(ctx, t, d, format!("sinks {:?} do not fit {} heads", k.ne, s.ne[2])));
            }
            let n_head = s.ne[2];
            par.for_each(s.nrows(), 6 * n0, 2 * n0, |rows, tmp| {
                let (w, mrow) = tmp.split_at_mut(n0);
                for r in rows {
                    let [i1, i2, i3] = s.row_index(r);
                    // SAFETY: indices in range (the mask's wrap by its extents); this
                    // thread owns row r of dst, read completely before it is written.
                    unsafe { s.load_row(i1, i2, i3, w) };
                    simd::scale(w, scale);
                    if let Some(m) = &mask {
                        let slope = alibi_slope(max_bias, i2, n_head);
                        // SAFETY: as above.
                        unsafe { m.load_row(i1, i2 % m.ne[2], i3 % m.ne[3], mrow) };
                        simd::axpy(w, slope, mrow);
                    }
                    // SAFETY: i2 < ne[2], the sinks' length (checked above).
                    let sink = sinks.as_ref().map(|k| unsafe { k.get(i2, 0, 0, 0) });
                    let max = sink.map_or(simd::max(w), |sk| simd::max(w).max(sk));
                    if max == f32::NEG_INFINITY {
                        // Every logit masked: no distribution; write zeros rather than NaN.
                        w.fill(0.0);
                    } else {
                        let mut sum = simd::exp_shifted(mrow, w, max);
                        if let Some(sk) = sink {
                            // The sink's share of the normalisation, with no output of its own.
                            sum += f64::from((sk - max).exp());
                        }
                        w.copy_from_slice(mrow);
                        simd::scale(w, (1.0 / sum) as f32);
                    }
                    // SAFETY: as above.
                    unsafe { dst.store_row(i1, i2, i3, w) };
                }
            });
        }
        Op::DiagMaskInf { n_past } | Op::DiagMaskZero { n_past } => {
            let value = if matches!(d.op, Op::DiagMaskInf { .. }) { f32::NEG_INFINITY } else { 0.0 };
            par.for_each(s.nrows(), n0, n0, |rows, w| {
                for r in rows {
                    let [i1, i2, i3] = s.row_index(r);
                    // SAFETY: indices in range; this thread owns row r of dst.
                    unsafe { s.load_row(i1, i2, i3, w) };
                    let first_masked = n_past.saturating_add(i1).saturating_add(1).min(n0);
                    w[first_masked..].fill(value);
                    // SAFETY: as above.
                    unsafe { dst.store_row(i1, i2, i3, w) };
                }
            });
        }
        _ => {}
    }
    Ok(())
}
