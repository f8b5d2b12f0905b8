//! Cases for NORM, RMS_NORM, SOFT_MAX, DIAG_MASK_INF, GROUP_NORM and L2_NORM.

use gantry_engine::DType;

use super::{Layout, input, shape};
use crate::{Built, Case, Init, Tolerance};

pub fn cases() -> Vec<Case> {
    let mut cases = norm_cases();
    cases.extend(soft_max_cases());
    cases.extend(diag_mask_cases());
    cases
}

fn norm_cases() -> Vec<Case> {
    let mut cases = Vec::new();
    let variants = [
        ([64, 5, 4, 3], Layout::Contiguous, 1e-5, false),
        ([1, 3, 1, 1], Layout::Contiguous, 1e-5, false),
        ([4096, 2, 1, 1], Layout::Contiguous, 1e-6, false),
        ([31, 5, 4, 3], Layout::Permuted, 1e-5, false),
        ([24, 5, 2, 1], Layout::Transposed, 1e-5, false),
        ([64, 5, 4, 3], Layout::Contiguous, 1e-6, true),
    ];
    for rms in [false, true] {
        let op = if rms { "RMS_NORM" } else { "NORM" };
        for (ne, layout, eps, inplace) in variants {
            if inplace && !rms {
                continue;
            }
            let name =
                format!("{op}(ne={}{},eps={eps:e}{})", shape(ne), layout.tag(), if inplace { ",inplace" } else { "" });
            cases.push(Case::new(op, name, move |ctx| {
                let (_, a) = input(ctx, DType::F32, ne, layout)?;
                let out = match (rms, inplace) {
                    (false, _) => ctx.norm(a, eps as f32)?,
                    (true, false) => ctx.rms_norm(a, eps as f32)?,
                    (true, true) => ctx.rms_norm_inplace(a, eps as f32)?,
                };
                Ok(Built::output(out))
            }));
        }
    }
    cases.push(
        Case::new("RMS_NORM", "RMS_NORM(ne=[4096,512,1,1],eps=1e-5)".into(), |ctx| {
            let a = ctx.tensor(DType::F32, [4096, 512])?;
            Ok(Built::output(ctx.rms_norm(a, 1e-5)?))
        })
        .perf_only(),
    );
    cases
}

/// A mask's shape for logits of shape `ne`: 3 spare rows, and dims 2 and 3
/// either full or broadcast.
fn mask_shape(ne: [usize; 4], broadcast: bool) -> [usize; 4] {
    if broadcast { [ne[0], ne[1] + 3, 1, 1] } else { [ne[0], ne[1] + 3, ne[2], ne[3]] }
}

fn soft_max_cases() -> Vec<Case> {
    let mut cases = Vec::new();
    let shapes = [[16, 16, 4, 1], [37, 5, 4, 3], [1024, 2, 1, 1], [1, 1, 1, 1], [7, 3, 8, 1]];
    for ne in shapes {
        for mask in [None, Some(DType::F32), Some(DType::F16)] {
            for (broadcast, scale, max_bias) in [(false, 1.0f32, 0.0f32), (true, 0.125, 0.0), (false, 0.5, 8.0)] {
                if mask.is_none() && (broadcast || max_bias > 0.0) {
                    continue;
                }
                let mtag = mask.map_or("none".to_string(), |m| format!("{m}{}", if broadcast { ",bcast" } else { "" }));
                let name = format!("SOFT_MAX(ne={},mask={mtag},scale={scale},max_bias={max_bias})", shape(ne));
                cases.push(
                    Case::new("SOFT_MAX", name, move |ctx| {
                        let a = ctx.tensor(DType::F32, ne)?;
                        let m = mask.map(|mt| ctx.tensor(mt, mask_shape(ne, broadcast))).transpose()?;
                        let out = ctx.soft_max_ext(a, m, scale, max_bias)?;
                        let built = Built::output(out).init(a, Init::Uniform { lo: -4.0, hi: 4.0 });
                        Ok(match m {
                            Some(m) => built.init(m, Init::Mask { p_inf: 0.2 }),
                            None => built,
                        })
                    })
                    .tolerance(Tolerance::Nmse(1e-6)),
                );
            }
        }
    }
    // Attention sinks (gpt-oss): one logit per head joins each row's sum.
    for ne in [[16, 16, 4, 1], [37, 5, 4, 3], [1, 1, 1, 1], [7, 3, 8, 1]] {
        for mask in [None, Some(DType::F16), Some(DType::F32)] {
            let mtag = mask.map_or("none".to_string(), |m| m.to_string());
            let name = format!("SOFT_MAX(ne={},mask={mtag},sinks=true,scale=0.5)", shape(ne));
            cases.push(
                Case::new("SOFT_MAX", name, move |ctx| {
                    let a = ctx.tensor(DType::F32, ne)?;
                    let m = mask.map(|mt| ctx.tensor(mt, mask_shape(ne, false))).transpose()?;
                    let sinks = ctx.tensor(DType::F32, [ne[2]])?;
                    let out = ctx.soft_max_ext_sinks(a, m, sinks, 0.5, 0.0)?;
                    let built = Built::output(out)
                        .init(a, Init::Uniform { lo: -4.0, hi: 4.0 })
                        .init(sinks, Init::Uniform { lo: -4.0, hi: 4.0 });
                    Ok(match m {
                        Some(m) => built.init(m, Init::Mask { p_inf: 0.5 }),
                        None => built,
                    })
                })
                .tolerance(Tolerance::Nmse(1e-6)),
            );
        }
    }
    cases.push(
        Case::new("SOFT_MAX", "SOFT_MAX(ne=[32,6,4,1],mask=f16,inplace)".into(), |ctx| {
            let a = ctx.tensor(DType::F32, [32, 6, 4])?;
            let m = ctx.tensor(DType::F16, [32, 6])?;
            let out = ctx.soft_max_ext_inplace(a, Some(m), 0.3, 0.0)?;
            Ok(Built::output(out).init(m, Init::Mask { p_inf: 0.3 }))
        })
        .tolerance(Tolerance::Nmse(1e-6)),
    );
    cases.push(
        Case::new("SOFT_MAX", "SOFT_MAX(ne=[4096,32,32,1],mask=f16)".into(), |ctx| {
            let a = ctx.tensor(DType::F32, [4096, 32, 32])?;
            let m = ctx.tensor(DType::F16, [4096, 32])?;
            Ok(Built::output(ctx.soft_max_ext(a, Some(m), 0.1, 0.0)?))
        })
        .perf_only(),
    );
    cases
}

fn diag_mask_cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for (ne, n_past, inplace) in
        [([10, 10, 3, 2], 0, false), ([10, 10, 3, 2], 5, false), ([7, 4, 1, 1], 2, false), ([12, 6, 2, 1], 3, true)]
    {
        let name = format!("DIAG_MASK_INF(ne={},n_past={n_past}{})", shape(ne), if inplace { ",inplace" } else { "" });
        cases.push(Case::new("DIAG_MASK_INF", name, move |ctx| {
            let a = ctx.tensor(DType::F32, ne)?;
            let out = if inplace { ctx.diag_mask_inf_inplace(a, n_past)? } else { ctx.diag_mask_inf(a, n_past)? };
            Ok(Built::output(out))
        }));
    }
    cases
}

/// GROUP_NORM over channel groups that divide evenly and that do not, and
/// L2_NORM over rows, with strided inputs where the ops take them.
pub fn vision_cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for (ne, groups, layout) in [
        ([8, 6, 12, 2], 4, Layout::Contiguous),
        ([5, 3, 10, 1], 3, Layout::Contiguous),
        ([4, 4, 7, 2], 7, Layout::Contiguous),
        ([6, 5, 4, 1], 1, Layout::Permuted),
        ([3, 2, 5, 2], 4, Layout::Padded),
    ] {
        let name = format!("GROUP_NORM(ne={}{},groups={groups})", shape(ne), layout.tag());
        cases.push(Case::new("GROUP_NORM", name, move |ctx| {
            let (_, a) = input(ctx, DType::F32, ne, layout)?;
            Ok(Built::output(ctx.group_norm(a, groups, 1e-6)?))
        }));
    }
    for (ne, layout, eps) in [
        ([64, 5, 4, 3], Layout::Contiguous, 1e-6),
        ([7, 3, 1, 1], Layout::Transposed, 1e-12),
        ([33, 4, 2, 1], Layout::Permuted, 1e-6),
        ([16, 3, 1, 1], Layout::Padded, 100.0),
    ] {
        let name = format!("L2_NORM(ne={}{},eps={eps})", shape(ne), layout.tag());
        cases.push(Case::new("L2_NORM", name, move |ctx| {
            let (_, a) = input(ctx, DType::F32, ne, layout)?;
            Ok(Built::output(ctx.l2_norm(a, eps)?))
        }));
    }
    cases
}
