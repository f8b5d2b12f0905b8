//! Plans for ROPE, with YaRN's corrections computed here once
//! ([`RopeParams::yarn_corr_dims`], the engine's one definition).

use gantry_engine::{DType, RopeMode, RopeParams};

use super::{Builder, Kernel, Launch, Refusal, groups_for};

type Planned = Result<Option<Launch>, Refusal>;

pub(super) fn rope(b: &mut Builder<'_>, p: &RopeParams) -> Planned {
    b.bind_dst()?;
    b.bind_src(0)?;
    b.bind_src(1)?;
    if b.d.srcs[2].is_some() {
        b.bind_src(2)?;
    }
    let [low, high] = p.yarn_corr_dims();
    let mscale =
        if p.ext_factor != 0.0 { p.attn_factor * (1.0 + 0.1 * (1.0 / p.freq_scale).ln()) } else { p.attn_factor };
    b.params.u[0] = p.n_dims as u32;
    b.params.u[1] = u32::from(p.mode == RopeMode::Neox);
    b.params.f[..6].copy_from_slice(&[p.freq_base.log2(), p.freq_scale, p.ext_factor, low, high, mscale]);
    let pairs = b.d.ne[0].div_ceil(2) * b.d.nrows();
    b.finish(Kernel::Rope, DType::F32, groups_for(pairs))
}
