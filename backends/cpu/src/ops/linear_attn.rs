//! RWKV_WKV6, GATED_LINEAR_ATTN and RWKV_WKV7: linear attention with an
//! `S × S` state per head. Heads are split over the tasks (as in ggml):
//! a task copies each of its heads' initial states into the result's state
//! block and carries it there through the sequence's tokens, writing the
//! head's output row of each token. Every input is contiguous (checked), so
//! the kernel reads plain slices and Rust checks each index.

use gantry_engine::{Context, DType, Op, Result, TensorDesc, TensorId};

use super::bound::Bound;
use super::{shape_err, src, src_desc};
use crate::parallel::{Par, SendPtr};

/// Which of the three ops, with what its update reads.
#[derive(Clone, Copy)]
enum Rule {
    /// RWKV-6: srcs k, v, r, tf, td, state.
    Wkv6,
    /// Gated linear attention: srcs k, v, q, g, state; `q` scaled.
    Gla(f32),
    /// RWKV-7: srcs r, w, k, v, a, b, state.
    Wkv7,
}

impl Rule {
    fn of(op: Op) -> Option<Self> {
        match op {
            Op::RwkvWkv6 => Some(Rule::Wkv6),
            Op::GatedLinearAttn { scale } => Some(Rule::Gla(scale)),
            Op::RwkvWkv7 => Some(Rule::Wkv7),
            _ => None,
        }
    }

    /// The number of sources (the state last).
    fn n_srcs(self) -> usize {
        match self {
            Rule::Wkv6 => 6,
            Rule::Gla(_) => 5,
            Rule::Wkv7 => 7,
        }
    }
}

pub fn supports(ctx: &Context, d: &TensorDesc) -> bool {
    Rule::of(d.op)
        .is_some_and(|rule| (0..rule.n_srcs()).all(|i| src_desc(ctx, d, i).is_some_and(|s| s.dtype == DType::F32)))
        && d.dtype == DType::F32
}

/// The elements of a contiguous F32 tensor, or `None` for another layout.
fn dense(b: &Bound) -> Option<&[f32]> {
    (b.dtype == DType::F32 && b.is_contiguous())
        // SAFETY: binding checked that the tensor's extent (here its
        // nelements() adjacent floats) lies inside its buffer, aligned; no
        // task of this node writes a source.
        .then(|| unsafe { std::slice::from_raw_parts(b.base as *const f32, b.nelements()) })
}

pub fn compute(ctx: &Context, t: TensorId, d: &TensorDesc, par: &Par<'_>) -> Result<()> {
    let Some(rule) = Rule::of(d.op) else { return Err(shape_err(ctx, t, d, "not a linear-attention op")) };
    let n = rule.n_srcs();
    let dst = Bound::dst(ctx, t)?;
    // A fixed array (no allocation per compute): the sources first, the
    // slots past them unused.
    let mut bound = [dst; 7];
    for (i, b) in bound.iter_mut().enumerate().take(n) {
        *b = Bound::src(ctx, src(ctx, t, d, i)?)?;
    }
    let state_in = &bound[n - 1];
    // ggml's sizes come from k (src 2 of RWKV_WKV7, src 0 of the others).
    let [s, h, n_t, _] = bound[if matches!(rule, Rule::Wkv7) { 2 } else { 0 }].ne;
    let n_seqs = state_in.ne[1];
    let sizes = s.checked_mul(h).zip(s.checked_mul(n_seqs).and_then(|x| x.checked_add(n_t)));
    let Some((c, rows)) = sizes else { return Err(shape_err(ctx, t, d, "sizes overflow")) };
    // The shapes again: the slices below are cut by them, and a node may
    // come from somewhere other than the builder.
    let per_token_ok = bound[..n - 1].iter().enumerate().all(|(i, b)| {
        let is_tf = matches!(rule, Rule::Wkv6) && i == 3;
        b.ne == if is_tf { [s, h, 1, 1] } else { [s, h, n_t, 1] }
    });
    let state_ok = s.checked_mul(c).and_then(|x| x.checked_mul(n_seqs)) == Some(state_in.nelements());
    let fits = per_token_ok
        && state_ok
        && n_seqs > 0
        && n_t.is_multiple_of(n_seqs)
        && dst.is_contiguous()
        && dst.ne == [c, rows, 1, 1];
    let mut srcs: [&[f32]; 7] = [&[]; 7];
    let mut all_dense = true;
    for (slice, b) in srcs.iter_mut().zip(&bound).take(n) {
        match dense(b) {
            Some(v) => *slice = v,
            None => all_dense = false,
        }
    }
    if !(fits && all_dense) {
        return Err(shape_err(ctx, t, d, format!("inputs {:?}, state {:?}", bound[0].ne, state_in.ne)));
    }
    let state_in = srcs[n - 1];
    let per_seq = n_t / n_seqs;
    let out = SendPtr(dst.base as *mut f32);
    par.for_each(h, n_t * s * s, 0, |heads, _| {
        for seq in 0..n_seqs {
            for head in heads.clone() {
                let st_at = n_t * c + (seq * h + head) * s * s;
                // SAFETY: the state block of (seq, head) lies inside dst
                // (dst holds n_t·c + s·s·h·n_seqs floats, checked) and only
                // this task, which has `head`, touches it.
                let st = unsafe { std::slice::from_raw_parts_mut(out.get().add(st_at), s * s) };
                st.copy_from_slice(&state_in[st_at - n_t * c..][..s * s]);
                for tok in seq * per_seq..(seq + 1) * per_seq {
                    let at = tok * c + head * s;
                    // SAFETY: the output row of (tok, head) lies inside dst's
                    // first n_t·c floats, written by this task alone.
                    let row = unsafe { std::slice::from_raw_parts_mut(out.get().add(at), s) };
                    let x = |i: usize| &srcs[i][at..at + s];
                    match rule {
                        Rule::Wkv6 => wkv6_token(st, row, [x(0), x(1), x(2), &srcs[3][head * s..][..s], x(4)]),
                        Rule::Gla(scale) => gla_token(st, row, [x(0), x(1), x(2), x(3)], scale),
                        Rule::Wkv7 => wkv7_token(st, row, [x(0), x(1), x(2), x(3), x(4), x(5)]),
                    }
                }
            }
        }
    });
    Ok(())
}

/// One RWKV-6 token of one head: `out[j] = Σ_i r[i] · (tf[i] · k[i] · v[j]
/// + st[i, j])`, then `st[i, j] = st[i, j] · td[i] + k[i] · v[j]`, summed
/// over `i` in order as ggml does.
fn wkv6_token(st: &mut [f32], out: &mut [f32], [k, v, r, tf, td]: [&[f32]; 5]) {
    let s = out.len();
    out.fill(0.0);
    for (i, st_row) in st.chunks_exact_mut(s).enumerate() {
        let (k_i, r_i, tf_i, td_i) = (k[i], r[i], tf[i], td[i]);
        for ((o, prev), &v_j) in out.iter_mut().zip(st_row.iter_mut()).zip(v) {
            let kv = v_j * k_i;
            *o += (kv * tf_i + *prev) * r_i;
            *prev = *prev * td_i + kv;
        }
    }
}

/// One gated-linear-attention token of one head: `st[i, j] = st[i, j] ·
/// g[i] + k[i] · v[j]`, then `out[j] = Σ_i st[i, j] · q[i] · scale`.
fn gla_token(st: &mut [f32], out: &mut [f32], [k, v, q, g]: [&[f32]; 4], scale: f32) {
    let s = out.len();
    out.fill(0.0);
    for (i, st_row) in st.chunks_exact_mut(s).enumerate() {
        let (k_i, q_i, g_i) = (k[i], q[i] * scale, g[i]);
        for ((o, prev), &v_j) in out.iter_mut().zip(st_row.iter_mut()).zip(v) {
            let next = *prev * g_i + v_j * k_i;
            *o += next * q_i;
            *prev = next;
        }
    }
}

/// One RWKV-7 token of one head (row `i` of the state along `v`, column `j`
/// along `k`): `sa = Σ_j a[j] · st[i, j]`, `st[i, j] = st[i, j] · w[j] +
/// v[i] · k[j] + sa · b[j]`, `out[i] = Σ_j st[i, j] · r[j]`.
fn wkv7_token(st: &mut [f32], out: &mut [f32], [r, w, k, v, a, b]: [&[f32]; 6]) {
    let s = out.len();
    for ((o, st_row), &v_i) in out.iter_mut().zip(st.chunks_exact_mut(s)).zip(v) {
        let sa: f32 = a.iter().zip(st_row.iter()).fold(0.0, |acc, (a_j, s_ij)| acc + a_j * s_ij);
        let mut sum = 0.0f32;
        for (j, s_ij) in st_row.iter_mut().enumerate() {
            *s_ij = *s_ij * w[j] + v_i * k[j] + sa * b[j];
            sum += *s_ij * r[j];
        }
        *o = sum;
    }
}
