//! Cases for ROPE: both modes, full and partial rotation, frequency
//! factors, YaRN, large positions, F32 and F16, views and in place.

use gantry_engine::{DType, RopeMode, RopeParams};

use super::{Layout, input, shape};
use crate::{Built, Case, Init};

fn params(n_dims: usize, mode: RopeMode, yarn: bool) -> RopeParams {
    let mut p = RopeParams::new(n_dims, mode, 10000.0);
    if yarn {
        p.n_ctx_orig = 512;
        p.freq_scale = 0.25;
        p.ext_factor = 1.0;
        p.attn_factor = 0.9;
    }
    p
}

fn rope_case(dtype: DType, ne: [usize; 4], p: RopeParams, ff: bool, layout: Layout, inplace: bool) -> Case {
    let mode = match p.mode {
        RopeMode::Normal => "normal",
        RopeMode::Neox => "neox",
    };
    let name = format!(
        "ROPE(type={dtype},ne={},n_dims={},mode={mode},ff={ff},yarn={}{}{})",
        shape(ne),
        p.n_dims,
        p.ext_factor != 0.0,
        layout.tag(),
        if inplace { ",inplace" } else { "" }
    );
    Case::new("ROPE", name, move |ctx| {
        let (_, x) = input(ctx, dtype, ne, layout)?;
        let pos = ctx.tensor(DType::I32, [ne[2]])?;
        let factors = if ff { Some(ctx.tensor(DType::F32, [p.n_dims / 2])?) } else { None };
        let out = if inplace { ctx.rope_inplace(x, pos, factors, p)? } else { ctx.rope(x, pos, factors, p)? };
        let built = Built::output(out).init(pos, Init::Integers { lo: 0, hi: 4096 });
        Ok(match factors {
            Some(f) => built.init(f, Init::Uniform { lo: 0.8, hi: 2.5 }),
            None => built,
        })
    })
}

pub fn cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for dtype in [DType::F32, DType::F16] {
        for mode in [RopeMode::Normal, RopeMode::Neox] {
            for (head_dim, n_dims) in [(64, 64), (64, 32), (128, 128)] {
                for (ff, yarn) in [(false, false), (true, false), (false, true), (true, true)] {
                    let p = params(n_dims, mode, yarn);
                    cases.push(rope_case(dtype, [head_dim, 4, 5, 1], p, ff, Layout::Contiguous, false));
                }
            }
            let p = params(32, mode, false);
            cases.push(rope_case(dtype, [32, 3, 6, 2], p, false, Layout::Contiguous, true));
            cases.push(rope_case(dtype, [32, 3, 6, 2], p, false, Layout::Padded, false));
            cases.push(rope_case(dtype, [32, 3, 6, 1], p, true, Layout::Permuted, false));
            cases.push(rope_case(dtype, [10, 2, 3, 1], params(6, mode, true), false, Layout::Contiguous, false));
        }
    }
    let p = params(128, RopeMode::Neox, false);
    cases.push(rope_case(DType::F32, [128, 32, 512, 1], p, false, Layout::Contiguous, false).perf_only());
    cases
}
