//! Cases for the recurrent linear-attention ops: RWKV_WKV6,
//! GATED_LINEAR_ATTN, RWKV_WKV7 (one and several heads, tokens and
//! sequences) and GATED_DELTA_NET (grouped q/k heads, q/k shared by
//! sequences, a per-head or per-element gate, permuted q/k/v, several kept
//! states, more than there are tokens too). Decays lie in (0, 1) and keys
//! are small, so the states stay bounded over the tokens and f32 can be
//! compared with f64.

use gantry_engine::{Context, DType, Result, TensorId};

use super::{Layout, input};
use crate::{Built, Case, Init};

/// (heads, head size, tokens per sequence, sequences) of the three ops
/// that split their tokens over the sequences.
const SHAPES: [(usize, usize, usize, usize); 5] =
    [(1, 4, 1, 1), (2, 8, 1, 4), (4, 16, 5, 3), (3, 32, 7, 2), (2, 64, 3, 1)];

pub fn cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for (h, s, per_seq, n_seqs) in SHAPES {
        let vars = format!("head_count={h},head_size={s},n_seq_tokens={per_seq},n_seqs={n_seqs}");
        let dims = Dims { h, s, n_t: per_seq * n_seqs, n_seqs };
        cases.push(Case::new("RWKV_WKV6", format!("RWKV_WKV6({vars})"), move |ctx| wkv6(ctx, dims)));
        cases.push(Case::new("GATED_LINEAR_ATTN", format!("GATED_LINEAR_ATTN({vars})"), move |ctx| gla(ctx, dims)));
        cases.push(Case::new("RWKV_WKV7", format!("RWKV_WKV7({vars})"), move |ctx| wkv7(ctx, dims)));
    }
    // ggml's CPU RWKV_WKV7 steps through a head GGML_F32_STEP floats at a
    // time (up to 64): heads of 64 over several sequences, for the parity
    // run.
    for (h, per_seq, n_seqs) in [(2, 1, 4), (1, 4, 3), (3, 5, 2)] {
        let vars = format!("head_count={h},head_size=64,n_seq_tokens={per_seq},n_seqs={n_seqs}");
        let dims = Dims { h, s: 64, n_t: per_seq * n_seqs, n_seqs };
        cases.push(Case::new("RWKV_WKV7", format!("RWKV_WKV7({vars})"), move |ctx| wkv7(ctx, dims)));
    }
    // (heads of v, head size, tokens, sequences, v heads per q/k head,
    // sequences per q/k sequence, permuted, per-element gate, kept states)
    for (h, s, n_t, n_seqs, rep, seq_rep, permuted, kda, k) in [
        (4, 16, 1, 1, 1, 1, false, false, 1),
        (2, 32, 5, 2, 1, 1, false, false, 1),
        (4, 16, 4, 2, 2, 1, false, true, 1),
        (2, 16, 6, 2, 1, 1, true, false, 3),
        (2, 8, 3, 1, 1, 1, false, true, 5),
        (3, 8, 4, 4, 3, 2, true, true, 2),
        (2, 64, 2, 1, 1, 1, false, false, 2),
    ] {
        let name = format!(
            "GATED_DELTA_NET(head_count={h},head_size={s},n_seq_tokens={n_t},n_seqs={n_seqs},v_repeat={rep},\
             qk_seq_repeat={seq_rep},permuted={permuted},kda={kda},K={k})"
        );
        let d = DeltaDims { h, s, n_t, n_seqs, rep, seq_rep, permuted, kda };
        cases.push(Case::new("GATED_DELTA_NET", name, move |ctx| delta_net(ctx, d, k)));
    }
    cases
}

/// The sizes of one RWKV_WKV6, GATED_LINEAR_ATTN or RWKV_WKV7 case.
#[derive(Clone, Copy)]
struct Dims {
    h: usize,
    s: usize,
    n_t: usize,
    n_seqs: usize,
}

impl Dims {
    /// A per-token input `[S, H, T]`.
    fn token_input(self, ctx: &mut Context) -> Result<TensorId> {
        ctx.tensor(DType::F32, [self.s, self.h, self.n_t])
    }

    /// The states as ggml's callers make them: `[S · S · H, n_seqs]`.
    fn state(self, ctx: &mut Context) -> Result<TensorId> {
        ctx.tensor(DType::F32, [self.s * self.s * self.h, self.n_seqs])
    }
}

/// Keys small enough that a state's sum over a head stays near 1.
fn small(s: usize) -> Init {
    let r = 1.5 / (s as f32).sqrt();
    Init::Uniform { lo: -r, hi: r }
}

/// Decays in (0, 1).
const DECAY: Init = Init::Uniform { lo: 0.5, hi: 0.98 };

fn wkv6(ctx: &mut Context, d: Dims) -> Result<Built> {
    let [k, v, r, td] = [(); 4].map(|()| d.token_input(ctx));
    let (k, v, r, td) = (k?, v?, r?, td?);
    let tf = ctx.tensor(DType::F32, [d.s, d.h])?;
    let state = d.state(ctx)?;
    let out = ctx.rwkv_wkv6(k, v, r, tf, td, state)?;
    Ok(Built::output(out).init(k, small(d.s)).init(td, DECAY))
}

fn gla(ctx: &mut Context, d: Dims) -> Result<Built> {
    let [k, v, q, g] = [(); 4].map(|()| d.token_input(ctx));
    let (k, v, q, g) = (k?, v?, q?, g?);
    let state = d.state(ctx)?;
    let out = ctx.gated_linear_attn(k, v, q, g, state, 1.0 / (d.s as f32).sqrt())?;
    Ok(Built::output(out).init(k, small(d.s)).init(g, DECAY))
}

fn wkv7(ctx: &mut Context, d: Dims) -> Result<Built> {
    let [r, w, k, v, a, b] = [(); 6].map(|()| d.token_input(ctx));
    let (r, w, k, v, a, b) = (r?, w?, k?, v?, a?, b?);
    let state = d.state(ctx)?;
    let out = ctx.rwkv_wkv7(r, w, k, v, a, b, state)?;
    // The in-context term sa · b adds (S a) b^T: small a and b keep
    // diag(w) + a b^T contracting.
    let tiny = Init::Uniform { lo: -0.5 / d.s as f32, hi: 0.5 / d.s as f32 };
    Ok(Built::output(out).init(w, DECAY).init(k, small(d.s)).init(a, tiny).init(b, tiny))
}

/// The sizes of one GATED_DELTA_NET case.
#[derive(Clone, Copy)]
struct DeltaDims {
    h: usize,
    s: usize,
    n_t: usize,
    n_seqs: usize,
    /// v heads per q/k head.
    rep: usize,
    /// Sequences per q/k sequence.
    seq_rep: usize,
    /// q, k and v permuted views (dims 1 and 2 swapped in memory).
    permuted: bool,
    /// A gate per key element (Kimi's KDA) rather than per head.
    kda: bool,
}

fn delta_net(ctx: &mut Context, d: DeltaDims, k_states: u32) -> Result<Built> {
    let layout = if d.permuted { Layout::Permuted } else { Layout::Contiguous };
    let qk_ne = [d.s, d.h / d.rep, d.n_t, d.n_seqs / d.seq_rep];
    let (q_leaf, q) = input(ctx, DType::F32, qk_ne, layout)?;
    let (k_leaf, k) = input(ctx, DType::F32, qk_ne, layout)?;
    let (_, v) = input(ctx, DType::F32, [d.s, d.h, d.n_t, d.n_seqs], layout)?;
    let g = ctx.tensor(DType::F32, [if d.kda { d.s } else { 1 }, d.h, d.n_t, d.n_seqs])?;
    let beta = ctx.tensor(DType::F32, [1, d.h, d.n_t, d.n_seqs])?;
    let state = ctx.tensor(DType::F32, [d.s, d.s, d.h, d.n_seqs])?;
    let out = ctx.gated_delta_net(q, k, v, g, beta, state, k_states)?;
    Ok(Built::output(out)
        .init(q_leaf, small(d.s))
        .init(k_leaf, small(d.s))
        .init(g, Init::Uniform { lo: -1.0, hi: -0.01 })
        .init(beta, Init::Uniform { lo: 0.0, hi: 1.0 }))
}
