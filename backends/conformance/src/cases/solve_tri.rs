//! Cases for SOLVE_TRI: one to 32 unknowns, one to ten right-hand sides,
//! batches in dims 2 and 3. The matrices are small random entries plus a
//! diagonal in [1, 2), so the systems are well conditioned and f32 can be
//! compared with f64; the upper triangle holds values the solve must ignore.

use gantry_engine::DType;

use super::shape;
use crate::{Built, Case, Init};

pub fn cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for (n, k, b2, b3) in [(1, 1, 1, 1), (4, 3, 2, 1), (16, 5, 3, 2), (32, 1, 1, 1), (7, 10, 1, 3)] {
        let b_ne = [k, n, b2, b3];
        let name = format!("SOLVE_TRI(ne_a={},ne_b={})", shape([n, n, b2, b3]), shape(b_ne));
        cases.push(Case::new("SOLVE_TRI", name, move |ctx| {
            let off = ctx.tensor(DType::F32, [n, n, b2, b3])?;
            let diag = ctx.tensor(DType::F32, [n, 1, b2, b3])?;
            let d = ctx.diag(diag)?;
            let a = ctx.add(off, d)?;
            let b = ctx.tensor(DType::F32, b_ne)?;
            Ok(Built::output(ctx.solve_tri(a, b, true, true, false)?)
                .init(off, Init::Uniform { lo: -0.25, hi: 0.25 })
                .init(diag, Init::Uniform { lo: 1.0, hi: 2.0 }))
        }));
    }
    cases
}
