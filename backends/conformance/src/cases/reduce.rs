//! Cases for SUM, SUM_ROWS, MEAN and ARGMAX.

use gantry_engine::DType;

use super::{Layout, input, shape};
use crate::{Built, Case, Init, Tolerance};

pub fn cases() -> Vec<Case> {
    let mut cases = Vec::new();
    let shapes = [
        ([10, 5, 4, 3], Layout::Contiguous),
        ([33, 1, 1, 1], Layout::Contiguous),
        ([1, 1, 1, 1], Layout::Contiguous),
        ([1, 7, 2, 1], Layout::Contiguous),
        ([10, 5, 4, 3], Layout::Permuted),
        ([12, 5, 4, 1], Layout::Transposed),
    ];
    for dtype in [DType::F32, DType::F16, DType::BF16] {
        for (ne, layout) in shapes {
            let tag = format!("type={dtype},ne={}{}", shape(ne), layout.tag());
            cases.push(Case::new("SUM", format!("SUM({tag})"), move |ctx| {
                let (_, a) = input(ctx, dtype, ne, layout)?;
                Ok(Built::output(ctx.sum(a)?))
            }));
            cases.push(Case::new("SUM_ROWS", format!("SUM_ROWS({tag})"), move |ctx| {
                let (_, a) = input(ctx, dtype, ne, layout)?;
                Ok(Built::output(ctx.sum_rows(a)?))
            }));
            cases.push(Case::new("MEAN", format!("MEAN({tag})"), move |ctx| {
                let (_, a) = input(ctx, dtype, ne, layout)?;
                Ok(Built::output(ctx.mean(a)?))
            }));
        }
        // Distinct integers stay exact in bf16 only up to 256.
        for (ne, layout) in [
            ([100, 10, 1, 1], Layout::Contiguous),
            ([7, 1, 1, 1], Layout::Contiguous),
            ([1, 5, 1, 1], Layout::Contiguous),
            ([256, 3, 1, 1], Layout::Contiguous),
            ([40, 6, 1, 1], Layout::Transposed),
            ([40, 6, 1, 1], Layout::Padded),
        ] {
            let name = format!("ARGMAX(type={dtype},ne={}{})", shape(ne), layout.tag());
            cases.push(
                Case::new("ARGMAX", name, move |ctx| {
                    let (leaf, a) = input(ctx, dtype, ne, layout)?;
                    Ok(Built::output(ctx.argmax(a)?).init(leaf, Init::DistinctRows))
                })
                .tolerance(Tolerance::Exact),
            );
        }
    }
    cases.push(
        Case::new("ARGMAX", "ARGMAX(type=f32,ne=[32000,512,1,1])".into(), |ctx| {
            let a = ctx.tensor(DType::F32, [32000, 512])?;
            Ok(Built::output(ctx.argmax(a)?))
        })
        .perf_only(),
    );
    cases
}
