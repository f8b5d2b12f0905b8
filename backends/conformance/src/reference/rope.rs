//! ROPE in f64: the rotation angle of pair `k` at position `p` is
//! `p * base^(-2k / n_dims) / freq_factor[k]`, blended by YaRN between its
//! interpolated (`* freq_scale`) and extrapolated values.

use gantry_engine::{RopeMode, RopeParams};

use super::Array;

/// YaRN's correction range `[low, high]` of pair indices, in f64.
fn corr_dims(p: &RopeParams) -> [f64; 2] {
    let n_dims = p.n_dims as f64;
    let dim = |n_rot: f64| {
        n_dims * (p.n_ctx_orig as f64 / (n_rot * 2.0 * std::f64::consts::PI)).ln() / (2.0 * (p.freq_base as f64).ln())
    };
    [dim(p.beta_fast as f64).floor().max(0.0), dim(p.beta_slow as f64).ceil().min(n_dims - 1.0)]
}

/// Rotates the first `n_dims` elements of every row of `x`; `pos[i2]` is
/// the position of token `i2`.
pub fn rope(x: &Array, pos: &Array, freq_factors: Option<&Array>, p: &RopeParams) -> Result<Array, String> {
    let half = p.n_dims / 2;
    let [low, high] = corr_dims(p);
    let mut out = x.clone();
    let [_, n1, n2, n3] = x.ne;
    for i3 in 0..n3 {
        for i2 in 0..n2 {
            let position = pos.data[i2];
            for i1 in 0..n1 {
                for k in 0..half {
                    let ff = freq_factors.map_or(1.0, |f| f.data[k]);
                    let extrap = position * (p.freq_base as f64).powf(-2.0 * k as f64 / p.n_dims as f64) / ff;
                    let interp = p.freq_scale as f64 * extrap;
                    let (theta, mscale) = if p.ext_factor != 0.0 {
                        let y = (k as f64 - low) / (high - low).max(0.001);
                        let mix = (1.0 - y.clamp(0.0, 1.0)) * p.ext_factor as f64;
                        let m = p.attn_factor as f64 * (1.0 + 0.1 * (1.0 / p.freq_scale as f64).ln());
                        (interp * (1.0 - mix) + extrap * mix, m)
                    } else {
                        (interp, p.attn_factor as f64)
                    };
                    let (a, b) = match p.mode {
                        RopeMode::Normal => (2 * k, 2 * k + 1),
                        RopeMode::Neox => (k, k + half),
                    };
                    let (x0, x1) = (x.at([a, i1, i2, i3]), x.at([b, i1, i2, i3]));
                    let (c, s) = (theta.cos() * mscale, theta.sin() * mscale);
                    out.set([a, i1, i2, i3], x0 * c - x1 * s);
                    out.set([b, i1, i2, i3], x0 * s + x1 * c);
                }
            }
        }
    }
    Ok(out)
}
