//! Cases for expert routing's row ops: ARGSORT (both orders), TOP_K (the
//! indices of the largest, largest first) and CUMSUM, over odd row lengths,
//! single elements, and batches along every dimension.

use gantry_engine::{DType, SortOrder};

use super::shape;
use crate::{Built, Case, Init, Tolerance};

const SHAPES: [[usize; 4]; 6] =
    [[16, 10, 10, 10], [60, 10, 10, 10], [1, 1, 1, 1], [1024, 2, 1, 1], [7, 3, 2, 1], [128, 4, 1, 1]];

pub fn cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for ne in SHAPES {
        for order in [SortOrder::Asc, SortOrder::Desc] {
            let name = format!("ARGSORT(type=f32,ne={},order={})", shape(ne), order.ggml_code());
            cases.push(
                Case::new("ARGSORT", name, move |ctx| {
                    let a = ctx.tensor(DType::F32, ne)?;
                    Ok(Built::output(ctx.argsort(a, order)?))
                })
                .tolerance(Tolerance::Exact),
            );
        }
        for k in [1, 4, 8, ne[0]] {
            if k > ne[0] {
                continue;
            }
            let name = format!("TOP_K(type=f32,ne={},k={k})", shape(ne));
            cases.push(
                Case::new("TOP_K", name, move |ctx| {
                    let a = ctx.tensor(DType::F32, ne)?;
                    Ok(Built::output(ctx.top_k(a, k)?))
                })
                .tolerance(Tolerance::Exact),
            );
        }
        let name = format!("CUMSUM(type=f32,ne={})", shape(ne));
        cases.push(
            Case::new("CUMSUM", name, move |ctx| {
                let a = ctx.tensor(DType::F32, ne)?;
                Ok(Built::output(ctx.cumsum(a)?).init(a, Init::Uniform { lo: -1.0, hi: 1.0 }))
            })
            .tolerance(Tolerance::Nmse(1e-7)),
        );
    }
    // Ties: whole rows of a few repeated values (indices break them).
    for (op, k) in [("ARGSORT", 0), ("TOP_K", 3)] {
        let name =
            format!("{op}(type=f32,ne=[12,5,1,1],ties{})", if k > 0 { format!(",k={k}") } else { String::new() });
        cases.push(
            Case::new(op, name, move |ctx| {
                let a = ctx.tensor(DType::F32, [12, 5])?;
                let out = if k == 0 { ctx.argsort(a, SortOrder::Desc)? } else { ctx.top_k(a, k)? };
                Ok(Built::output(out).init(a, Init::Integers { lo: 0, hi: 3 }))
            })
            .tolerance(Tolerance::Exact),
        );
    }
    cases.push(
        Case::new("TOP_K", "TOP_K(type=f32,ne=[128,512,1,1],k=8)".into(), |ctx| {
            let a = ctx.tensor(DType::F32, [128, 512])?;
            Ok(Built::output(ctx.top_k(a, 8)?))
        })
        .perf_only(),
    );
    cases
}
