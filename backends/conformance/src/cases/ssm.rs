//! Cases for SSM_CONV and SSM_SCAN: kernel widths from 1 to 4, one and
//! several sequences, Mamba-1 (a decay per state element) and Mamba-2 (a
//! decay per head, grouped B and C), several kept states (more than there
//! are tokens too), and ids that reuse and reorder the initial states.

use gantry_engine::{Context, DType, Result, TensorId};

use super::shape;
use crate::{Built, Case, Init};

pub fn cases() -> Vec<Case> {
    let mut cases = Vec::new();
    // (d_conv, n_t, d_inner, n_s), and whether sx is a view with padded sequences.
    for (d_conv, n_t, d_inner, n_s, padded) in
        [(4, 1, 16, 1, false), (4, 5, 32, 3, false), (3, 7, 10, 2, true), (1, 4, 8, 2, false), (2, 1, 1, 1, false)]
    {
        let sx_ne = [d_conv - 1 + n_t, d_inner, n_s, 1];
        let name = format!("SSM_CONV(ne_sx={},d_conv={d_conv}{})", shape(sx_ne), if padded { ",padded" } else { "" });
        cases.push(Case::new("SSM_CONV", name, move |ctx| {
            let sx = if padded {
                // Dims 0 and 1 dense (as SSM_CONV needs), sequences apart.
                let leaf = ctx.tensor(DType::F32, [sx_ne[0], sx_ne[1] + 2, n_s, 1])?;
                let nb1 = sx_ne[0] * 4;
                ctx.view_3d(leaf, [sx_ne[0], sx_ne[1], n_s], nb1, nb1 * (sx_ne[1] + 2), 0)?
            } else {
                ctx.tensor(DType::F32, sx_ne)?
            };
            let c = ctx.tensor(DType::F32, [d_conv, d_inner])?;
            Ok(Built::output(ctx.ssm_conv(sx, c)?))
        }));
    }
    // (d_state, head_dim, n_head, n_group, n_tokens, n_seqs, mamba1, kept states)
    for (d_state, head_dim, n_head, n_group, n_tokens, n_seqs, mamba1, k) in [
        (16, 1, 64, 1, 8, 3, true, 1),
        (16, 1, 24, 1, 1, 1, true, 1),
        (32, 16, 8, 2, 6, 3, false, 1),
        (16, 4, 4, 4, 5, 2, false, 3),
        (8, 8, 6, 3, 4, 2, false, 7),
        (128, 8, 2, 1, 3, 1, false, 2),
    ] {
        let name = format!(
            "SSM_SCAN(d_state={d_state},head_dim={head_dim},n_head={n_head},n_group={n_group},n_tokens={n_tokens},\
             n_seqs={n_seqs},{},K={k})",
            if mamba1 { "mamba1" } else { "mamba2" }
        );
        cases.push(Case::new("SSM_SCAN", name, move |ctx| {
            let dims = ScanDims { d_state, head_dim, n_head, n_group, n_tokens, n_seqs, mamba1 };
            scan(ctx, dims, k)
        }));
    }
    cases
}

/// The sizes of one SSM_SCAN case.
#[derive(Clone, Copy)]
struct ScanDims {
    d_state: usize,
    head_dim: usize,
    n_head: usize,
    n_group: usize,
    n_tokens: usize,
    n_seqs: usize,
    mamba1: bool,
}

/// An SSM_SCAN over two spare states more than sequences, with negative
/// decays (so the states stay bounded over the tokens).
fn scan(ctx: &mut Context, d: ScanDims, k: u32) -> Result<Built> {
    let n_states = d.n_seqs + 2;
    let s = ctx.tensor(DType::F32, [d.d_state, d.head_dim, d.n_head, n_states])?;
    let x = ctx.tensor(DType::F32, [d.head_dim, d.n_head, d.n_tokens, d.n_seqs])?;
    let dt = ctx.tensor(DType::F32, [d.n_head, d.n_tokens, d.n_seqs])?;
    let a = ctx.tensor(DType::F32, [if d.mamba1 { d.d_state } else { 1 }, d.n_head])?;
    let b = ctx.tensor(DType::F32, [d.d_state, d.n_group, d.n_tokens, d.n_seqs])?;
    let c = ctx.tensor(DType::F32, [d.d_state, d.n_group, d.n_tokens, d.n_seqs])?;
    let ids: TensorId = ctx.tensor(DType::I32, [d.n_seqs])?;
    let out = ctx.ssm_scan(s, x, dt, a, b, c, ids, k)?;
    Ok(Built::output(out)
        .init(a, Init::Uniform { lo: -1.0, hi: -0.1 })
        .init(ids, Init::Integers { lo: 0, hi: n_states as i32 }))
}
