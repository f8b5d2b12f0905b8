//! Plans for ROPE, with YaRN's corrections computed here once.

use std::f32::consts::PI;

use gantry_engine::{DType, RopeMode, RopeParams};

use super::{Builder, Kernel, Launch, Refusal, groups_for};

type Planned = Result<Option<Launch>, Refusal>;

/// The dimension where the rotation of `n_rot` turns over `n_ctx_orig`
/// positions (ggml's `ggml_rope_yarn_corr_dim`).
fn corr_dim(n_dims: usize, n_ctx_orig: usize, n_rot: f32, base: f32) -> f32 {
    n_dims as f32 * (n_ctx_orig as f32 / (n_rot * 2.0 * PI)).ln() / (2.0 * base.ln())
}

/// YaRN's ramp bounds (ggml's `ggml_rope_yarn_corr_dims`).
fn corr_dims(p: &RopeParams) -> [f32; 2] {
    let start = corr_dim(p.n_dims, p.n_ctx_orig, p.beta_fast, p.freq_base).floor();
    let end = corr_dim(p.n_dims, p.n_ctx_orig, p.beta_slow, p.freq_base).ceil();
    [start.max(0.0), end.min(p.n_dims as f32 - 1.0)]
}

pub(super) fn rope(b: &mut Builder<'_>, p: &RopeParams) -> Planned {
    b.bind_dst()?;
    b.bind_src(0)?;
    b.bind_src(1)?;
    if b.d.srcs[2].is_some() {
        b.bind_src(2)?;
    }
    let [low, high] = corr_dims(p);
    let mscale =
        if p.ext_factor != 0.0 { p.attn_factor * (1.0 + 0.1 * (1.0 / p.freq_scale).ln()) } else { p.attn_factor };
    b.params.u[0] = p.n_dims as u32;
    b.params.u[1] = u32::from(p.mode == RopeMode::Neox);
    b.params.f[..6].copy_from_slice(&[p.freq_base.log2(), p.freq_scale, p.ext_factor, low, high, mscale]);
    let pairs = b.d.ne[0].div_ceil(2) * b.d.nrows();
    b.finish(Kernel::Rope, DType::F32, groups_for(pairs))
}
