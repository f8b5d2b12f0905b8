//! Cases for SAM's vision ops: WIN_PART and WIN_UNPART (images that fill
//! their windows and images padded into them, a round trip, a strided
//! image), GET_REL_POS (F16 tables, one strided) and ADD_REL_POS (one and
//! several batches, square and oblong query grids).

use gantry_engine::DType;

use super::{Layout, input, shape};
use crate::{Built, Case};

pub fn cases() -> Vec<Case> {
    let mut cases = Vec::new();
    // (channels, width, height, window side, layout)
    for (c, iw, ih, w, layout) in [
        (4, 14, 14, 7, Layout::Contiguous),
        (3, 10, 7, 4, Layout::Contiguous),
        (5, 5, 9, 3, Layout::Contiguous),
        (2, 1, 1, 2, Layout::Contiguous),
        (3, 10, 7, 4, Layout::Padded),
    ] {
        let ne = [c, iw, ih, 1];
        cases.push(Case::new("WIN_PART", format!("WIN_PART(ne={},w={w}{})", shape(ne), layout.tag()), move |ctx| {
            let (_, a) = input(ctx, DType::F32, ne, layout)?;
            Ok(Built::output(ctx.win_part(a, w)?))
        }));
    }
    // (channels, width, height, window side, layout, whether the windows
    // come from WIN_PART)
    for (c, iw, ih, w, layout, round_trip) in [
        (4usize, 14usize, 14usize, 7usize, Layout::Contiguous, false),
        (3, 10, 7, 4, Layout::Contiguous, false),
        (5, 5, 9, 3, Layout::Contiguous, false),
        (3, 10, 7, 4, Layout::Contiguous, true),
        (2, 6, 6, 3, Layout::Padded, false),
    ] {
        let np = iw.div_ceil(w) * ih.div_ceil(w);
        let ne = [c, w, w, np];
        let name = format!(
            "WIN_UNPART(ne={},w0={iw},h0={ih},w={w}{}{})",
            shape(ne),
            layout.tag(),
            if round_trip { ",from_win_part" } else { "" }
        );
        cases.push(Case::new("WIN_UNPART", name, move |ctx| {
            let windows = if round_trip {
                let image = ctx.tensor(DType::F32, [c, iw, ih])?;
                ctx.win_part(image, w)?
            } else {
                input(ctx, DType::F32, ne, layout)?.1
            };
            Ok(Built::output(ctx.win_unpart(windows, iw, ih, w)?))
        }));
    }
    for (c, n, layout) in
        [(4, 1, Layout::Contiguous), (8, 5, Layout::Contiguous), (3, 14, Layout::Contiguous), (6, 4, Layout::Padded)]
    {
        let ne = [c, 2 * n - 1, 1, 1];
        cases.push(Case::new(
            "GET_REL_POS",
            format!("GET_REL_POS(ne={},n={n}{})", shape(ne), layout.tag()),
            move |ctx| {
                let (_, a) = input(ctx, DType::F16, ne, layout)?;
                Ok(Built::output(ctx.get_rel_pos(a, n, n)?))
            },
        ));
    }
    // (keys per side n, query grid q1 × q2, batches)
    for (n, q1, q2, b) in [(3, 3, 3, 2), (5, 4, 2, 1), (1, 1, 1, 1), (7, 7, 7, 3)] {
        let pw_ne = [n, q1, q2, b];
        let name = format!("ADD_REL_POS(ne_a={},ne_pw={})", shape([n * n, q1 * q2, b, 1]), shape(pw_ne));
        cases.push(Case::new("ADD_REL_POS", name, move |ctx| {
            let a = ctx.tensor(DType::F32, [n * n, q1 * q2, b])?;
            let pw = ctx.tensor(DType::F32, pw_ne)?;
            let ph = ctx.tensor(DType::F32, pw_ne)?;
            Ok(Built::output(ctx.add_rel_pos(a, pw, ph)?))
        }));
    }
    cases
}
