//! Cases for the element-wise ops: unary functions, SCALE, CLAMP,
//! LEAKY_RELU, the binary ops with broadcasting and the gated linear units
//! (SWIGLU, GEGLU, REGLU, GEGLU_ERF, GEGLU_QUICK).

use gantry_engine::{BinaryOp, DType, GluOp, UnaryOp};

use super::{Layout, input, shape};
use crate::{Built, Case, Init};

const FLOATS: [DType; 3] = [DType::F32, DType::F16, DType::BF16];

pub fn cases() -> Vec<Case> {
    let mut cases = unary_cases();
    cases.extend(scale_clamp_cases());
    cases.extend(binary_cases());
    cases.extend(glu_cases());
    cases.extend(perf_cases());
    cases
}

/// Shapes and layouts every unary op is run on; `true` = in place.
const UNARY_SHAPES: [([usize; 4], Layout, bool); 7] = [
    ([128, 2, 2, 2], Layout::Contiguous, false),
    ([5, 7, 11, 1], Layout::Contiguous, false),
    ([1, 1, 1, 1], Layout::Contiguous, false),
    ([17, 3, 4, 2], Layout::Permuted, false),
    ([17, 3, 4, 2], Layout::Transposed, false),
    ([16, 5, 2, 1], Layout::Padded, false),
    ([33, 3, 2, 1], Layout::Contiguous, true),
];

fn unary_cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for op in UnaryOp::ALL {
        let init = match op {
            UnaryOp::Sqrt | UnaryOp::Log => Init::Uniform { lo: 0.1, hi: 3.0 },
            UnaryOp::Exp | UnaryOp::Expm1 | UnaryOp::Elu => Init::Uniform { lo: -5.0, hi: 5.0 },
            // A few periods, and both sides of SOFTPLUS's shortcut at 20.
            UnaryOp::Sin | UnaryOp::Cos => Init::Uniform { lo: -10.0, hi: 10.0 },
            UnaryOp::Softplus => Init::Uniform { lo: -25.0, hi: 25.0 },
            // Both sides of the hard functions' knees at -3 and 3.
            UnaryOp::Hardswish | UnaryOp::Hardsigmoid => Init::Uniform { lo: -5.0, hi: 5.0 },
            _ => Init::Uniform { lo: -3.0, hi: 3.0 },
        };
        for dtype in FLOATS {
            for (ne, layout, inplace) in UNARY_SHAPES {
                let name = format!(
                    "{}(type={dtype},ne={}{}{})",
                    op.name(),
                    shape(ne),
                    layout.tag(),
                    if inplace { ",inplace" } else { "" }
                );
                cases.push(Case::new(op.name(), name, move |ctx| {
                    let (leaf, a) = input(ctx, dtype, ne, layout)?;
                    let out = if inplace { ctx.unary_inplace(op, a)? } else { ctx.unary(op, a)? };
                    Ok(Built::output(out).init(leaf, init))
                }));
            }
        }
    }
    cases
}

/// SCALE, CLAMP and LEAKY_RELU: the element-wise functions with parameters.
fn scale_clamp_cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for dtype in FLOATS {
        for (ne, layout, inplace) in UNARY_SHAPES {
            let tag = format!("type={dtype},ne={}{}{}", shape(ne), layout.tag(), if inplace { ",inplace" } else { "" });
            cases.push(Case::new("SCALE", format!("SCALE({tag},s=0.5,b=0.25)"), move |ctx| {
                let (_, a) = input(ctx, dtype, ne, layout)?;
                let out = if inplace { ctx.scale_inplace(a, 0.5, 0.25)? } else { ctx.scale(a, 0.5, 0.25)? };
                Ok(Built::output(out))
            }));
            cases.push(Case::new("LEAKY_RELU", format!("LEAKY_RELU({tag},negative_slope=0.1)"), move |ctx| {
                let (_, a) = input(ctx, dtype, ne, layout)?;
                let out = if inplace { ctx.leaky_relu_inplace(a, 0.1)? } else { ctx.leaky_relu(a, 0.1)? };
                Ok(Built::output(out))
            }));
            if !inplace {
                cases.push(Case::new("CLAMP", format!("CLAMP({tag},min=-0.5,max=0.5)"), move |ctx| {
                    let (_, a) = input(ctx, dtype, ne, layout)?;
                    Ok(Built::output(ctx.clamp(a, -0.5, 0.5)?))
                }));
            }
        }
    }
    cases
}

fn binary_cases() -> Vec<Case> {
    // (b's shape, repetitions of b in a): a = b * nr.
    let shapes: [([usize; 4], [usize; 4]); 8] = [
        ([10, 5, 4, 3], [1, 1, 1, 1]),
        ([10, 5, 4, 3], [2, 1, 1, 1]),
        ([10, 5, 4, 3], [1, 2, 1, 1]),
        ([10, 5, 4, 3], [1, 1, 2, 1]),
        ([10, 5, 4, 3], [1, 1, 1, 2]),
        ([10, 5, 4, 3], [1, 2, 2, 2]),
        ([1, 1, 1, 1], [7, 3, 5, 2]),
        ([16, 1, 1, 1], [1, 9, 1, 1]),
    ];
    let types = [
        (DType::F32, DType::F32),
        (DType::F16, DType::F16),
        (DType::F16, DType::F32),
        (DType::BF16, DType::BF16),
        (DType::BF16, DType::F32),
    ];
    let mut cases = Vec::new();
    for op in BinaryOp::ALL {
        // Divisors away from zero.
        let b_init =
            if op == BinaryOp::Div { Init::Uniform { lo: 0.5, hi: 1.5 } } else { Init::Uniform { lo: -1.0, hi: 1.0 } };
        for (ta, tb) in types {
            let variants =
                shapes.iter().map(|&(ne, nr)| (ne, nr, Layout::Contiguous, Layout::Contiguous, false)).chain([
                    ([10, 5, 4, 3], [1, 1, 1, 1], Layout::Permuted, Layout::Padded, false),
                    ([8, 5, 4, 3], [1, 2, 1, 1], Layout::Transposed, Layout::Permuted, false),
                    ([10, 5, 4, 3], [1, 2, 1, 2], Layout::Contiguous, Layout::Contiguous, true),
                ]);
            for (ne, nr, la, lb, inplace) in variants {
                let a_ne = [ne[0] * nr[0], ne[1] * nr[1], ne[2] * nr[2], ne[3] * nr[3]];
                let name = format!(
                    "{}(type_a={ta},type_b={tb},ne={},nr={}{}{}{})",
                    op.name(),
                    shape(ne),
                    shape(nr),
                    la.tag().replace(',', ",a:"),
                    lb.tag().replace(',', ",b:"),
                    if inplace { ",inplace" } else { "" }
                );
                cases.push(Case::new(op.name(), name, move |ctx| {
                    let (_, a) = input(ctx, ta, a_ne, la)?;
                    let (b_leaf, b) = input(ctx, tb, ne, lb)?;
                    let out = if inplace { ctx.binary_inplace(op, a, b)? } else { ctx.binary(op, a, b)? };
                    Ok(Built::output(out).init(b_leaf, b_init))
                }));
            }
        }
    }
    cases
}

fn glu_cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for op in GluOp::ALL {
        for dtype in FLOATS {
            for (ne, layout) in [
                ([64, 3, 2, 1], Layout::Contiguous),
                ([10, 5, 1, 1], Layout::Contiguous),
                ([12, 4, 3, 1], Layout::Padded),
            ] {
                for swapped in [false, true] {
                    let name =
                        format!("{}(type={dtype},ne={}{},swapped={swapped})", op.name(), shape(ne), layout.tag());
                    cases.push(Case::new(op.name(), name, move |ctx| {
                        let (_, a) = input(ctx, dtype, ne, layout)?;
                        Ok(Built::output(ctx.glu(op, a, swapped)?))
                    }));
                }
                let half = [ne[0] / 2, ne[1], ne[2], ne[3]];
                let name = format!("{}(type={dtype},ne={}{},split)", op.name(), shape(half), layout.tag());
                cases.push(Case::new(op.name(), name, move |ctx| {
                    let (_, a) = input(ctx, dtype, half, layout)?;
                    let (_, g) = input(ctx, dtype, half, layout)?;
                    Ok(Built::output(ctx.glu_split(op, a, g)?))
                }));
            }
        }
    }
    cases
}

fn perf_cases() -> Vec<Case> {
    let ne = [4096, 512, 1, 1];
    let mut cases = Vec::new();
    for dtype in [DType::F32, DType::F16] {
        cases.push(
            Case::new("ADD", format!("ADD(type={dtype},ne={})", shape(ne)), move |ctx| {
                let a = ctx.tensor(dtype, ne)?;
                let b = ctx.tensor(dtype, ne)?;
                Ok(Built::output(ctx.add(a, b)?))
            })
            .perf_only(),
        );
        cases.push(
            Case::new("SILU", format!("SILU(type={dtype},ne={})", shape(ne)), move |ctx| {
                let a = ctx.tensor(dtype, ne)?;
                Ok(Built::output(ctx.silu(a)?))
            })
            .perf_only(),
        );
    }
    cases.push(
        Case::new("SWIGLU", "SWIGLU(type=f32,ne=[28672,64,1,1])".into(), |ctx| {
            let a = ctx.tensor(DType::F32, [28672, 64])?;
            Ok(Built::output(ctx.swiglu(a)?))
        })
        .perf_only(),
    );
    cases
}
