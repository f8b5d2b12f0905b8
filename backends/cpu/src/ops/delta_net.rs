//! GATED_DELTA_NET: the gated delta rule. The (head, sequence) pairs are
//! split over the tasks (as in ggml); a task carries one pair's `S × S`
//! state through the sequence's tokens in scratch, stored as ggml stores
//! it (`m[j · S + i]` is the state's entry `[i, j]`, `i` along `k`, `j`
//! along `v`), so each output element is a dot product of adjacent floats.

use gantry_engine::{Context, DType, Op, Result, TensorDesc, TensorId};

use super::bound::Bound;
use super::{shape_err, src, src_desc};
use crate::parallel::{Par, SendPtr};

pub fn supports(ctx: &Context, d: &TensorDesc) -> bool {
    (0..6).all(|i| src_desc(ctx, d, i).is_some_and(|s| s.dtype == DType::F32)) && d.dtype == DType::F32
}

/// Row `[i1, i2, i3]` of `b` (dense rows, `b.ne[0]` floats).
///
/// # Safety
/// Each index below its `ne`, `b` F32 with dense rows, and nothing writes
/// the row meanwhile.
unsafe fn row(b: &Bound, i1: usize, i2: usize, i3: usize) -> &[f32] {
    // SAFETY: the caller's guarantee; binding checked the extent.
    unsafe { std::slice::from_raw_parts(b.row(i1, i2, i3) as *const f32, b.ne[0]) }
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).fold(0.0, |acc, (x, y)| acc + x * y)
}

pub fn compute(ctx: &Context, t: TensorId, d: &TensorDesc, par: &Par<'_>) -> Result<()> {
    let [q, k, v, g, beta, state] = std::array::from_fn(|i| src(ctx, t, d, i));
    let (q, k, v, g, beta, state) = (
        Bound::src(ctx, q?)?,
        Bound::src(ctx, k?)?,
        Bound::src(ctx, v?)?,
        Bound::src(ctx, g?)?,
        Bound::src(ctx, beta?)?,
        Bound::src(ctx, state?)?,
    );
    let dst = Bound::dst(ctx, t)?;
    let Op::GatedDeltaNet { states } = d.op else { return Err(shape_err(ctx, t, d, "not GATED_DELTA_NET")) };
    let k_states = states as usize;
    let [s, h, n_t, n_seqs] = v.ne;
    let kda = g.ne[0] == s && s != 1;
    // The shapes again: every index below relies on them, and a node may
    // come from somewhere other than the builder.
    let qk_ok = |b: &Bound| {
        let [sq, hq, tq, nq] = b.ne;
        let heads_ok = if hq == 0 { h == 0 } else { h.is_multiple_of(hq) };
        let seqs_ok = if nq == 0 { n_seqs == 0 } else { n_seqs.is_multiple_of(nq) };
        sq == s && tq == n_t && heads_ok && seqs_ok
    };
    // Exact once the shapes below are checked (both tensors exist).
    let (y_len, state_len) = (v.nelements(), state.nelements());
    let fits = [&q, &k, &v].iter().all(|b| b.dtype == DType::F32 && b.rows_are_dense())
        && qk_ok(&q)
        && qk_ok(&k)
        && (g.ne[0] == 1 || g.ne[0] == s)
        && g.ne[1..] == [h, n_t, n_seqs]
        && beta.ne == [1, h, n_t, n_seqs]
        && state.ne == [s, s, h, n_seqs]
        && k_states >= 1
        && dst.is_contiguous()
        && Some(dst.nelements()) == k_states.checked_mul(state_len).and_then(|n| n.checked_add(y_len));
    if !fits {
        return Err(shape_err(ctx, t, d, format!("q {:?}, k {:?}, v {:?}, state {:?}", q.ne, k.ne, v.ne, state.ne)));
    }
    // (No pair to compute where a divisor is 0.)
    let (q_seqs_per, k_seqs_per) = (n_seqs / q.ne[3].max(1), n_seqs / k.ne[3].max(1));
    let scale = 1.0 / (s as f32).sqrt();
    let out = SendPtr(dst.base as *mut f32);
    // Scratch: the state (s·s), then the correction or the decays (s).
    par.for_each(h * n_seqs, n_t * s * s * 4, s * s + s, |pairs, tmp| {
        let (m, delta) = tmp.split_at_mut(s * s);
        for pair in pairs {
            let (head, seq) = (pair % h, pair / h);
            for j in 0..s {
                // SAFETY: j, head, seq within the state's shape (checked).
                unsafe { state.load_row(j, head, seq, &mut m[j * s..(j + 1) * s]) };
            }
            let (q_head, q_seq) = (head % q.ne[1], seq / q_seqs_per);
            let (k_head, k_seq) = (head % k.ne[1], seq / k_seqs_per);
            for tok in 0..n_t {
                // SAFETY: every index within the shapes checked above; the
                // sources are read only.
                let (q_row, k_row, v_row, b_val) = unsafe {
                    (
                        row(&q, q_head, tok, q_seq),
                        row(&k, k_head, tok, k_seq),
                        row(&v, head, tok, seq),
                        beta.get(0, head, tok, seq),
                    )
                };
                if kda {
                    for (i, e) in delta.iter_mut().enumerate() {
                        // SAFETY: i < s = g.ne[0] (KDA), the rest as above.
                        *e = unsafe { g.get(i, head, tok, seq) }.exp();
                    }
                    for m_row in m.chunks_exact_mut(s) {
                        m_row.iter_mut().zip(delta.iter()).for_each(|(x, e)| *x *= e);
                    }
                } else {
                    // SAFETY: as above.
                    let decay = unsafe { g.get(0, head, tok, seq) }.exp();
                    m.iter_mut().for_each(|x| *x *= decay);
                }
                for (j, e) in delta.iter_mut().enumerate() {
                    *e = (v_row[j] - dot(&m[j * s..(j + 1) * s], k_row)) * b_val;
                }
                for (m_row, &e) in m.chunks_exact_mut(s).zip(delta.iter()) {
                    m_row.iter_mut().zip(k_row).for_each(|(x, &k_i)| *x += k_i * e);
                }
                let y_at = ((seq * n_t + tok) * h + head) * s;
                for j in 0..s {
                    let y = dot(&m[j * s..(j + 1) * s], q_row) * scale;
                    // SAFETY: y_at + j < y_len <= dst's length; this task
                    // alone writes (head, seq).
                    unsafe { *out.get().add(y_at + j) = y };
                }
                // ggml keeps the state `slot` tokens before the end in
                // snapshot `slot` (0 < slot < K).
                let slot = n_t - 1 - tok;
                if slot > 0 && slot < k_states {
                    // SAFETY: as for the final state below, in snapshot `slot`.
                    unsafe { store_state(out, y_len + slot * state_len + pair * s * s, m) };
                }
            }
            // SAFETY: (seq · h + head) = pair; the final state's block lies
            // inside dst and is written by this task alone.
            unsafe { store_state(out, y_len + pair * s * s, m) };
            // Snapshots from before the first token: ggml leaves them
            // unwritten; zeros here.
            m.fill(0.0);
            for slot in n_t.max(1)..k_states {
                // SAFETY: as above.
                unsafe { store_state(out, y_len + slot * state_len + pair * s * s, m) };
            }
        }
    });
    Ok(())
}

/// Writes the state `m` at float `at` of the result.
///
/// # Safety
/// `at + m.len()` must lie inside the result, and no other task may touch
/// those floats.
unsafe fn store_state(out: SendPtr<f32>, at: usize, m: &[f32]) {
    // SAFETY: the caller's guarantee.
    unsafe { std::ptr::copy_nonoverlapping(m.as_ptr(), out.get().add(at), m.len()) };
}
