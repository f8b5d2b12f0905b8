//! Cases for XIELU, FILL, TRI, DIAG, DIAG_MASK_ZERO, SET, ACC, ADD1 and
//! COUNT_EQUAL: every kind and dtype they take, strided inputs where they
//! allow them, views that cover part of the destination.

use gantry_engine::{DType, TriType};

use super::{Layout, input, shape};
use crate::{Built, Case, Init, Tolerance};

pub fn cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for dtype in [DType::F32, DType::F16, DType::BF16] {
        for (ne, layout) in
            [([10, 5, 4, 3], Layout::Contiguous), ([7, 6, 2, 1], Layout::Transposed), ([9, 3, 2, 1], Layout::Padded)]
        {
            let name = format!("XIELU(type={dtype},ne={}{})", shape(ne), layout.tag());
            cases.push(Case::new("XIELU", name, move |ctx| {
                let (leaf, a) = input(ctx, dtype, ne, layout)?;
                Ok(Built::output(ctx.xielu(a, 0.8, 0.8, 0.5, -1e-6)?).init(leaf, Init::Uniform { lo: -4.0, hi: 4.0 }))
            }));
            let name = format!("ADD1(type={dtype},ne={}{})", shape(ne), layout.tag());
            cases.push(Case::new("ADD1", name, move |ctx| {
                let (_, a) = input(ctx, dtype, ne, layout)?;
                let b = ctx.tensor(DType::F32, [1])?;
                Ok(Built::output(ctx.add1(a, b)?))
            }));
        }
    }
    for (dtype, ne) in [(DType::F32, [5, 4, 3, 2]), (DType::F16, [7, 1, 1, 1]), (DType::F32, [1, 1, 1, 1])] {
        let name = format!("FILL(type={dtype},ne={},c=-2.5)", shape(ne));
        cases.push(
            Case::new("FILL", name, move |ctx| {
                let a = ctx.tensor(dtype, ne)?;
                Ok(Built::output(ctx.fill(a, -2.5)?))
            })
            .tolerance(Tolerance::Exact),
        );
    }
    for ne in [[6, 6, 2, 3], [1, 1, 1, 1], [9, 9, 1, 1]] {
        for kind in TriType::ALL {
            let name = format!("TRI(ne={},type={kind:?})", shape(ne));
            cases.push(
                Case::new("TRI", name, move |ctx| {
                    let a = ctx.tensor(DType::F32, ne)?;
                    Ok(Built::output(ctx.tri(a, kind)?))
                })
                .tolerance(Tolerance::Exact),
            );
        }
    }
    for (ne, layout) in
        [([5, 1, 3, 2], Layout::Contiguous), ([8, 1, 1, 1], Layout::Contiguous), ([4, 1, 3, 1], Layout::Padded)]
    {
        let name = format!("DIAG(ne={}{})", shape(ne), layout.tag());
        cases.push(
            Case::new("DIAG", name, move |ctx| {
                let (_, a) = input(ctx, DType::F32, ne, layout)?;
                Ok(Built::output(ctx.diag(a)?))
            })
            .tolerance(Tolerance::Exact),
        );
    }
    for (ne, n_past, layout) in [
        ([10, 10, 3, 2], 0, Layout::Contiguous),
        ([10, 10, 3, 2], 5, Layout::Contiguous),
        ([7, 4, 1, 1], 2, Layout::Transposed),
    ] {
        let name = format!("DIAG_MASK_ZERO(ne={}{},n_past={n_past})", shape(ne), layout.tag());
        cases.push(
            Case::new("DIAG_MASK_ZERO", name, move |ctx| {
                let (_, a) = input(ctx, DType::F32, ne, layout)?;
                Ok(Built::output(ctx.diag_mask_zero(a, n_past)?))
            })
            .tolerance(Tolerance::Exact),
        );
    }
    // SET and ACC: b's shape, the view's row strides (bytes, of a's rows)
    // and offset, within a [10, 5, 4, 3].
    let a_ne = [10, 5, 4, 3];
    let (r1, r2, r3) = (40, 200, 800);
    for (b_ne, nb, offset, layout) in [
        ([10, 5, 4, 3], [r1, r2, r3], 0, Layout::Contiguous),
        ([4, 3, 2, 1], [r1, r2, r3], 4 * (2 + 10), Layout::Contiguous),
        ([6, 2, 1, 1], [2 * r1, r2, r3], 4 * 3, Layout::Transposed),
        ([5, 4, 2, 2], [r1, r2, 2 * r3 - r2], 4, Layout::Permuted),
        ([7, 1, 1, 1], [r1, r2, r3], 4 * 100, Layout::Contiguous),
    ] {
        for (op, dtype) in [("SET", DType::F32), ("SET", DType::I32), ("ACC", DType::F32)] {
            let name = format!(
                "{op}(type={dtype},ne_a={},ne_b={}{},nb={nb:?},offset={offset})",
                shape(a_ne),
                shape(b_ne),
                layout.tag()
            );
            cases.push(
                Case::new(op, name, move |ctx| {
                    let a = ctx.tensor(dtype, a_ne)?;
                    let (_, b) = input(ctx, dtype, b_ne, layout)?;
                    let out = if op == "SET" { ctx.set(a, b, nb, offset)? } else { ctx.acc(a, b, nb, offset)? };
                    Ok(Built::output(out))
                })
                .tolerance(if op == "SET" { Tolerance::Exact } else { Tolerance::Nmse(1e-7) }),
            );
        }
    }
    for (ne, layout) in
        [([10, 5, 4, 3], Layout::Contiguous), ([7, 6, 2, 1], Layout::Transposed), ([1, 1, 1, 1], Layout::Contiguous)]
    {
        let name = format!("COUNT_EQUAL(type=i32,ne={}{})", shape(ne), layout.tag());
        cases.push(
            Case::new("COUNT_EQUAL", name, move |ctx| {
                let (la, a) = input(ctx, DType::I32, ne, layout)?;
                let b = ctx.tensor(DType::I32, ne)?;
                let built = Built::output(ctx.count_equal(a, b)?);
                Ok(built.init(la, Init::Integers { lo: 0, hi: 3 }).init(b, Init::Integers { lo: 0, hi: 3 }))
            })
            .tolerance(Tolerance::Exact),
        );
    }
    cases
}
