//! Cases for the ops that move elements: CPY, CONT, DUP, GET_ROWS,
//! SET_ROWS, CONCAT and REPEAT.

use gantry_engine::DType;

use super::{Layout, input, shape};
use crate::{Built, Case, Init, Tolerance};

const PLAIN: [DType; 4] = [DType::F32, DType::F16, DType::BF16, DType::I32];

pub fn cases() -> Vec<Case> {
    let mut cases = copy_cases();
    cases.extend(rows_cases());
    cases.extend(tile_cases());
    cases.extend(perf_cases());
    cases
}

/// Values every dtype holds exactly enough: integers for I32 sources, and
/// floats in a range that truncates to varied integers when the target is I32.
fn copy_init(from: DType, to: DType) -> Init {
    match (from, to) {
        (DType::I32, _) => Init::Integers { lo: -200, hi: 200 },
        (_, DType::I32) => Init::Uniform { lo: -100.0, hi: 100.0 },
        _ => Init::Uniform { lo: -1.0, hi: 1.0 },
    }
}

/// Copies between the same dtype are exact; conversions round the same way.
fn copy_tolerance(from: DType, to: DType) -> Tolerance {
    if from == to { Tolerance::Exact } else { Tolerance::Nmse(1e-7) }
}

fn copy_cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for from in PLAIN {
        for to in PLAIN {
            let (init, tol) = (copy_init(from, to), copy_tolerance(from, to));
            let variants = [
                ([10, 10, 10, 1], Layout::Contiguous, Layout::Contiguous),
                ([7, 3, 5, 2], Layout::Permuted, Layout::Contiguous),
                ([7, 3, 5, 2], Layout::Transposed, Layout::Contiguous),
                ([6, 4, 3, 1], Layout::Contiguous, Layout::Transposed),
                ([6, 4, 3, 1], Layout::Padded, Layout::Padded),
            ];
            for (ne, ls, ld) in variants {
                let name = format!(
                    "CPY(type_src={from},type_dst={to},ne={}{}{})",
                    shape(ne),
                    ls.tag().replace(',', ",src:"),
                    ld.tag().replace(',', ",dst:")
                );
                cases.push(
                    Case::new("CPY", name, move |ctx| {
                        let (leaf, a) = input(ctx, from, ne, ls)?;
                        let (_, b) = input(ctx, to, ne, ld)?;
                        Ok(Built::output(ctx.cpy(a, b)?).init(leaf, init))
                    })
                    .tolerance(tol),
                );
            }
            // Same elements, another shape: [10, 10, 10] into [100, 10].
            let name = format!("CPY(type_src={from},type_dst={to},ne=[10,10,10,1],ne_dst=[100,10,1,1])");
            cases.push(
                Case::new("CPY", name, move |ctx| {
                    let a = ctx.tensor(from, [10, 10, 10])?;
                    let b = ctx.tensor(to, [100, 10])?;
                    Ok(Built::output(ctx.cpy(a, b)?).init(a, init))
                })
                .tolerance(tol),
            );
        }
    }
    for dtype in PLAIN {
        let init = copy_init(dtype, dtype);
        for layout in [Layout::Permuted, Layout::Transposed, Layout::Padded] {
            let ne = [9, 4, 3, 2];
            let name = format!("CONT(type={dtype},ne={}{})", shape(ne), layout.tag());
            cases.push(
                Case::new("CONT", name, move |ctx| {
                    let (leaf, a) = input(ctx, dtype, ne, layout)?;
                    Ok(Built::output(ctx.cont(a)?).init(leaf, init))
                })
                .tolerance(Tolerance::Exact),
            );
        }
        let name = format!("CONT(type={dtype},ne=[9,4,3,2],transposed,ne_dst=[36,6,1,1])");
        cases.push(
            Case::new("CONT", name, move |ctx| {
                let (leaf, a) = input(ctx, dtype, [9, 4, 3, 2], Layout::Transposed)?;
                Ok(Built::output(ctx.cont_shape(a, [36, 6])?).init(leaf, init))
            })
            .tolerance(Tolerance::Exact),
        );
        for layout in [Layout::Contiguous, Layout::Padded] {
            let ne = [5, 4, 3, 2];
            let name = format!("DUP(type={dtype},ne={}{})", shape(ne), layout.tag());
            cases.push(
                Case::new("DUP", name, move |ctx| {
                    let (leaf, a) = input(ctx, dtype, ne, layout)?;
                    Ok(Built::output(ctx.dup(a)?).init(leaf, init))
                })
                .tolerance(Tolerance::Exact),
            );
        }
    }
    cases
}

fn rows_cases() -> Vec<Case> {
    let mut cases = Vec::new();
    // (source shape, index shape); the index shape's dims 1 and 2 follow the source's dims 2 and 3.
    let gets = [([10, 5, 3, 2], [7, 3, 2, 1]), ([256, 100, 1, 1], [9, 1, 1, 1]), ([1, 4, 1, 1], [6, 1, 1, 1])];
    for dtype in PLAIN {
        for (ne, idx_ne) in gets {
            for layout in [Layout::Contiguous, Layout::Padded] {
                let name = format!("GET_ROWS(type={dtype},ne={},idx={}{})", shape(ne), shape(idx_ne), layout.tag());
                cases.push(
                    Case::new("GET_ROWS", name, move |ctx| {
                        let (_, a) = input(ctx, dtype, ne, layout)?;
                        let idx = ctx.tensor(DType::I32, idx_ne)?;
                        Ok(Built::output(ctx.get_rows(a, idx)?).init(idx, Init::Integers { lo: 0, hi: ne[1] as i32 }))
                    })
                    .tolerance(Tolerance::Exact),
                );
            }
        }
    }
    // (destination shape, rows written per [.., j, k], index shape).
    let sets = [
        ([64, 20, 3, 2], 5, [5, 3, 2, 1]),
        ([64, 20, 3, 2], 5, [5, 1, 1, 1]),
        ([17, 10, 1, 1], 4, [4, 1, 1, 1]),
        ([8, 6, 4, 1], 6, [6, 2, 1, 1]),
    ];
    for dtype in [DType::F32, DType::F16, DType::BF16] {
        for (ne, n, idx_ne) in sets {
            for layout in [Layout::Contiguous, Layout::Padded] {
                let name = format!(
                    "SET_ROWS(type={dtype},ne={},rows={n},idx={}{})",
                    shape(ne),
                    shape(idx_ne),
                    layout.tag().replace(',', ",src:")
                );
                cases.push(
                    Case::new("SET_ROWS", name, move |ctx| {
                        let dst = ctx.tensor(dtype, ne)?;
                        let (_, rows) = input(ctx, DType::F32, [ne[0], n, ne[2], ne[3]], layout)?;
                        let idx = ctx.tensor(DType::I32, idx_ne)?;
                        let out = ctx.set_rows(dst, rows, idx)?;
                        Ok(Built::output(out).init(idx, Init::DistinctIndices { n: ne[1] }))
                    })
                    .tolerance(Tolerance::Exact),
                );
            }
        }
    }
    cases
}

fn tile_cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for dtype in [DType::F32, DType::F16, DType::I32] {
        for dim in 0..4 {
            for layout in [Layout::Contiguous, Layout::Permuted] {
                let a_ne = [5, 4, 3, 2];
                let mut b_ne = a_ne;
                b_ne[dim] = 3;
                let name =
                    format!("CONCAT(type={dtype},ne_a={},ne_b={},dim={dim}{})", shape(a_ne), shape(b_ne), layout.tag());
                cases.push(
                    Case::new("CONCAT", name, move |ctx| {
                        let (_, a) = input(ctx, dtype, a_ne, layout)?;
                        let (_, b) = input(ctx, dtype, b_ne, Layout::Contiguous)?;
                        Ok(Built::output(ctx.concat(a, b, dim)?))
                    })
                    .tolerance(Tolerance::Exact),
                );
            }
        }
        for (nr, layout) in [
            ([2, 1, 1, 1], Layout::Contiguous),
            ([1, 2, 1, 2], Layout::Contiguous),
            ([2, 2, 2, 2], Layout::Contiguous),
            ([2, 1, 3, 1], Layout::Permuted),
            ([1, 1, 1, 1], Layout::Transposed),
        ] {
            let ne = [5, 4, 3, 2];
            let to = [ne[0] * nr[0], ne[1] * nr[1], ne[2] * nr[2], ne[3] * nr[3]];
            let name = format!("REPEAT(type={dtype},ne={},nr={}{})", shape(ne), shape(nr), layout.tag());
            cases.push(
                Case::new("REPEAT", name, move |ctx| {
                    let (_, a) = input(ctx, dtype, ne, layout)?;
                    Ok(Built::output(ctx.repeat_to(a, to)?))
                })
                .tolerance(Tolerance::Exact),
            );
        }
    }
    cases
}

fn perf_cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for (from, to) in [(DType::F32, DType::F16), (DType::F16, DType::F32), (DType::F32, DType::F32)] {
        let ne = [4096, 512, 1, 1];
        cases.push(
            Case::new("CPY", format!("CPY(type_src={from},type_dst={to},ne={})", shape(ne)), move |ctx| {
                let a = ctx.tensor(from, ne)?;
                let b = ctx.tensor(to, ne)?;
                Ok(Built::output(ctx.cpy(a, b)?))
            })
            .perf_only(),
        );
    }
    cases.push(
        Case::new("GET_ROWS", "GET_ROWS(type=f16,ne=[4096,32000,1,1],idx=[512,1,1,1])".into(), |ctx| {
            let a = ctx.tensor(DType::F16, [4096, 32000])?;
            let idx = ctx.tensor(DType::I32, [512])?;
            Ok(Built::output(ctx.get_rows(a, idx)?).init(idx, Init::Integers { lo: 0, hi: 32000 }))
        })
        // 512 rows read as f16 and written as f32.
        .bytes((512 * 4096 * (2 + 4)) as f64)
        .perf_only(),
    );
    cases
}
