//! ROPE: rotary position embedding, modes NORMAL (adjacent pairs) and NEOX
//! (pairs half a rotation apart), with YaRN scaling and frequency factors
//! (ggml's `rope_yarn` and `ggml_rope_yarn_corr_dims`).
//!
//! The angles of one token are computed once (in f64, so large positions
//! keep their precision) and shared by all heads of that token.

use gantry_engine::{Context, DType, Result, RopeMode, RopeParams, TensorDesc, TensorId};

use super::bound::Bound;
use super::{shape_err, src, src_desc};
use crate::cpu::parallel::Par;

pub fn supports(ctx: &Context, d: &TensorDesc) -> bool {
    let (Some(x), Some(pos)) = (src_desc(ctx, d, 0), src_desc(ctx, d, 1)) else { return false };
    let ff_ok = match d.srcs[2] {
        None => true,
        Some(_) => src_desc(ctx, d, 2).is_some_and(|f| f.dtype == DType::F32),
    };
    matches!(x.dtype, DType::F32 | DType::F16) && x.dtype == d.dtype && pos.dtype == DType::I32 && ff_ok
}

/// YaRN's correction range: the first and last dimension pair whose
/// frequencies get blended between interpolation and extrapolation.
pub fn yarn_corr_dims(n_dims: usize, n_ctx_orig: usize, freq_base: f32, beta_fast: f32, beta_slow: f32) -> [f32; 2] {
    let corr_dim = |n_rot: f32| {
        n_dims as f32 * (n_ctx_orig as f32 / (n_rot * 2.0 * std::f32::consts::PI)).ln() / (2.0 * freq_base.ln())
    };
    let start = corr_dim(beta_fast).floor();
    let end = corr_dim(beta_slow).ceil();
    [start.max(0.0), end.min(n_dims as f32 - 1.0)]
}

/// Cosine and sine (times the magnitude scale) of pair `i0 / 2` at `position`.
fn angle(p: &RopeParams, corr: [f32; 2], position: f64, i0: usize, freq_factor: f32) -> (f32, f32) {
    let theta_scale = (p.freq_base as f64).powf(-2.0 / p.n_dims as f64);
    let theta_extrap = position * theta_scale.powi((i0 / 2) as i32) / freq_factor as f64;
    let theta_interp = p.freq_scale as f64 * theta_extrap;
    let mut theta = theta_interp;
    let mut mscale = p.attn_factor as f64;
    if p.ext_factor != 0.0 {
        let y = ((i0 / 2) as f32 - corr[0]) / (corr[1] - corr[0]).max(0.001);
        let ramp_mix = ((1.0 - y.clamp(0.0, 1.0)) * p.ext_factor) as f64;
        theta = theta_interp * (1.0 - ramp_mix) + theta_extrap * ramp_mix;
        mscale *= 1.0 + 0.1 * (1.0 / p.freq_scale as f64).ln();
    }
    ((theta.cos() * mscale) as f32, (theta.sin() * mscale) as f32)
}

pub fn compute(ctx: &Context, t: TensorId, d: &TensorDesc, p: &RopeParams, par: &Par<'_>) -> Result<()> {
    let x = Bound::src(ctx, src(ctx, t, d, 0)?)?;
    let pos = Bound::src(ctx, src(ctx, t, d, 1)?)?;
    let ff = d.srcs[2].map(|f| Bound::src(ctx, f)).transpose()?;
    let dst = Bound::dst(ctx, t)?;
    let (n0, n_dims) = (x.ne[0], p.n_dims);
    if x.ne != dst.ne || pos.ne[0] != x.ne[2] || n_dims == 0 || n_dims % 2 != 0 || n_dims > n0 {
        return Err(shape_err(
            ctx,
            t,
            d,
            format!("{:?} with {} positions and n_dims {n_dims} do not fit", x.ne, pos.nelements()),
        ));
    }
    if let Some(f) = &ff
        && f.ne[0] < n_dims / 2
    {
        return Err(shape_err(ctx, t, d, format!("{} frequency factors for n_dims {n_dims}", f.ne[0])));
    }
    if p.freq_base.is_nan() || p.freq_base <= 0.0 {
        return Err(shape_err(ctx, t, d, format!("freq_base {}", p.freq_base)));
    }
    let corr = yarn_corr_dims(n_dims, p.n_ctx_orig, p.freq_base, p.beta_fast, p.beta_slow);
    let half = n_dims / 2;
    par.for_each(x.nrows(), 4 * n0, n0 + n_dims, |rows, tmp| {
        let (row, cache) = tmp.split_at_mut(n0);
        let mut cached_token = usize::MAX;
        for r in rows {
            let [i1, i2, i3] = x.row_index(r);
            if i2 != cached_token {
                // SAFETY: `i2 < ne[2]` = the number of positions, read as I32.
                let position = unsafe { *(pos.at(i2, 0, 0, 0) as *const i32) } as f64;
                for k in 0..half {
                    // SAFETY: k < n_dims / 2 <= the number of factors.
                    let factor = ff.as_ref().map_or(1.0, |f| unsafe { f.get(k, 0, 0, 0) });
                    let (c, s) = angle(p, corr, position, 2 * k, factor);
                    cache[2 * k] = c;
                    cache[2 * k + 1] = s;
                }
                cached_token = i2;
            }
            // SAFETY: indices in range; this thread owns row r of dst, read
            // completely before it is written.
            unsafe { x.load_row(i1, i2, i3, row) };
            for k in 0..half {
                let (c, s) = (cache[2 * k], cache[2 * k + 1]);
                let (a, b) = match p.mode {
                    RopeMode::Normal => (2 * k, 2 * k + 1),
                    RopeMode::Neox => (k, k + half),
                };
                let (x0, x1) = (row[a], row[b]);
                row[a] = x0 * c - x1 * s;
                row[b] = x0 * s + x1 * c;
            }
            // SAFETY: as above.
            unsafe { dst.store_row(i1, i2, i3, row) };
        }
    });
    Ok(())
}
