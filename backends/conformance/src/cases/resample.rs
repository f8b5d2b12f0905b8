//! Cases for resampling and padding: POOL_1D and POOL_2D (max and
//! average, padded windows), UPSCALE (nearest, bilinear, aligned corners,
//! shrinking), PAD (zeros and circular, before and after), PAD_REFLECT_1D
//! and ROLL, over contiguous and strided inputs where the ops allow them.

use gantry_engine::{DType, PoolOp, ScaleMode};

use super::{Layout, input, shape};
use crate::{Built, Case, Tolerance};

pub fn cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for op in [PoolOp::Max, PoolOp::Avg] {
        let o = op.ggml_code();
        for (ne, layout, dtype) in [
            ([10, 3, 2, 2], Layout::Contiguous, DType::F32),
            ([9, 4, 3, 1], Layout::Transposed, DType::F32),
            ([16, 5, 1, 1], Layout::Contiguous, DType::F16),
            ([7, 6, 2, 1], Layout::Padded, DType::F32),
        ] {
            for (k, s, p) in [(3, 1, 0), (2, 2, 1), (4, 3, 2), (1, 1, 0)] {
                let name = format!("POOL_1D(type={dtype},ne={}{},op={o},k={k},s={s},p={p})", shape(ne), layout.tag());
                cases.push(
                    Case::new("POOL_1D", name, move |ctx| {
                        let (_, a) = input(ctx, dtype, ne, layout)?;
                        Ok(Built::output(ctx.pool_1d(a, op, k, s, p)?))
                    })
                    .tolerance(Tolerance::Nmse(1e-9)),
                );
                let (k2, s2, p2) = ([k, k.max(2)], [s, 1], [p, p.min(1)]);
                if ne[1] + 2 * p2[1] as usize >= k2[1] as usize {
                    let name = format!(
                        "POOL_2D(type={dtype},ne={}{},op={o},k={k2:?},s={s2:?},p={p2:?})",
                        shape(ne),
                        layout.tag()
                    );
                    cases.push(
                        Case::new("POOL_2D", name, move |ctx| {
                            let (_, a) = input(ctx, dtype, ne, layout)?;
                            Ok(Built::output(ctx.pool_2d(a, op, k2, s2, p2)?))
                        })
                        .tolerance(Tolerance::Nmse(1e-9)),
                    );
                }
            }
        }
    }
    for (ne, to, layout) in [
        ([4, 3, 2, 1], [8, 6, 2, 1], Layout::Contiguous),
        ([5, 4, 3, 2], [7, 9, 3, 4], Layout::Contiguous),
        ([6, 6, 2, 1], [3, 4, 1, 1], Layout::Contiguous),
        ([5, 4, 3, 1], [11, 7, 3, 1], Layout::Permuted),
        ([1, 3, 1, 1], [4, 5, 2, 1], Layout::Transposed),
    ] {
        for (mode, align) in [(ScaleMode::Nearest, false), (ScaleMode::Bilinear, false), (ScaleMode::Bilinear, true)] {
            let name = format!(
                "UPSCALE(ne={},ne_tgt={}{},mode={}{})",
                shape(ne),
                shape(to),
                layout.tag(),
                mode.ggml_code(),
                if align { ",align_corners" } else { "" }
            );
            cases.push(
                Case::new("UPSCALE", name, move |ctx| {
                    let (_, a) = input(ctx, DType::F32, ne, layout)?;
                    Ok(Built::output(ctx.upscale_ext(a, to, mode, align)?))
                })
                .tolerance(Tolerance::Nmse(1e-9)),
            );
        }
    }
    cases.push(
        Case::new("UPSCALE", "UPSCALE(ne=[3,4,2,1],factor=3,mode=0)".into(), |ctx| {
            let a = ctx.tensor(DType::F32, [3, 4, 2])?;
            Ok(Built::output(ctx.upscale(a, 3, ScaleMode::Nearest)?))
        })
        .tolerance(Tolerance::Exact),
    );
    for (ne, layout) in [
        ([5, 4, 3, 2], Layout::Contiguous),
        ([6, 3, 2, 1], Layout::Transposed),
        ([4, 4, 2, 1], Layout::Padded),
        ([1, 1, 1, 1], Layout::Contiguous),
    ] {
        for (lp, rp) in [([0; 4], [2, 1, 0, 1]), ([1, 2, 0, 1], [2, 0, 1, 0]), ([0, 0, 3, 0], [0, 0, 0, 2])] {
            for circular in [false, true] {
                let name = format!(
                    "PAD(ne={}{},lp={lp:?},rp={rp:?}{})",
                    shape(ne),
                    layout.tag(),
                    if circular { ",circular" } else { "" }
                );
                cases.push(
                    Case::new("PAD", name, move |ctx| {
                        let (_, a) = input(ctx, DType::F32, ne, layout)?;
                        Ok(Built::output(if circular {
                            ctx.pad_ext_circular(a, lp, rp)?
                        } else {
                            ctx.pad_ext(a, lp, rp)?
                        }))
                    })
                    .tolerance(Tolerance::Exact),
                );
            }
        }
    }
    cases.push(
        Case::new("PAD", "PAD(ne=[0,3,1,1],lp=[0,0,0,0],rp=[2,0,0,0])".into(), |ctx| {
            let a = ctx.tensor(DType::F32, [0, 3])?;
            Ok(Built::output(ctx.pad(a, [2, 0, 0, 0])?))
        })
        .tolerance(Tolerance::Exact),
    );
    for (ne, p0, p1) in [([10, 3, 2, 1], 3, 2), ([5, 1, 1, 1], 4, 4), ([2, 4, 1, 2], 1, 0), ([7, 2, 2, 1], 0, 6)] {
        let name = format!("PAD_REFLECT_1D(ne={},p0={p0},p1={p1})", shape(ne));
        cases.push(
            Case::new("PAD_REFLECT_1D", name, move |ctx| {
                let a = ctx.tensor(DType::F32, ne)?;
                Ok(Built::output(ctx.pad_reflect_1d(a, p0, p1)?))
            })
            .tolerance(Tolerance::Exact),
        );
    }
    for (ne, layout, shift) in [
        ([10, 5, 4, 3], Layout::Contiguous, [3, -2, 1, 0]),
        ([7, 6, 3, 2], Layout::Permuted, [-6, 5, -1, 1]),
        ([8, 3, 2, 1], Layout::Padded, [1, 0, 0, 0]),
        ([1, 1, 1, 1], Layout::Contiguous, [0; 4]),
    ] {
        let name = format!("ROLL(ne={}{},shift={shift:?})", shape(ne), layout.tag());
        cases.push(
            Case::new("ROLL", name, move |ctx| {
                let (_, a) = input(ctx, DType::F32, ne, layout)?;
                Ok(Built::output(ctx.roll(a, shift)?))
            })
            .tolerance(Tolerance::Exact),
        );
    }
    cases
}
