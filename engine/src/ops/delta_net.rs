//! GATED_DELTA_NET: the gated delta rule (Qwen3-Next, Kimi linear
//! attention), a recurrent `S × S` state per head and sequence that each
//! token decays, corrects towards its value and reads its output from.

use gantry_arenas::TensorId;

use crate::{Context, DType, Error, Op, Result, TensorDesc, op_err};

/// Whether the elements of each row are adjacent (ggml's
/// `ggml_is_contiguous_rows`: `nb[0]` is the element size).
fn dense_rows(d: &TensorDesc) -> bool {
    d.ne[0] <= 1 || d.nb[0] == d.dtype.bytes_per_block()
}

impl Context {
    /// The gated delta rule (ggml's `ggml_gated_delta_net`), all F32:
    /// - `v` `[S, H, T, n_seqs]` (rows dense) sets the sizes;
    /// - `q`, `k` `[S, H_qk, T, n_qk]` (rows dense), head `h` reading head
    ///   `h % H_qk` and sequence `s` reading `s / (n_seqs / n_qk)`, so
    ///   `H_qk` must divide `H` and `n_qk` divide `n_seqs`;
    /// - `g` `[1 or S, H, T, n_seqs]` (contiguous): the log-decay, one per
    ///   head or one per key element (Kimi's KDA);
    /// - `beta` `[1, H, T, n_seqs]` (contiguous): the correction's step;
    /// - `state` `[S, S, H, n_seqs]` (contiguous): the initial states,
    ///   `state[i, j]` along `k` (`i`) and `v` (`j`).
    ///
    /// Per token: `st[i, j] *= exp(g)`, `d[j] = (v[j] - Σ_i st[i, j] ·
    /// k[i]) · beta`, `st[i, j] += k[i] · d[j]`, `out[j] = Σ_i st[i, j] ·
    /// q[i] / √S`. The result `[S · H, T · n_seqs + states · S · n_seqs]`
    /// holds the outputs (`[S, H, T, n_seqs]`), then `states` snapshots of
    /// the states (`[S, S, H, n_seqs]` each): the final one, then those 1,
    /// 2, ... tokens before the end.
    #[expect(clippy::too_many_arguments, reason = "ggml's six sources and K, named and ordered as in ggml")]
    pub fn gated_delta_net(
        &mut self,
        q: TensorId,
        k: TensorId,
        v: TensorId,
        g: TensorId,
        beta: TensorId,
        state: TensorId,
        states: u32,
    ) -> Result<TensorId> {
        const OP: &str = "GATED_DELTA_NET";
        let f32s = &[DType::F32];
        let [dq, dk, dv, dg, db, ds] = [q, k, v, g, beta, state].map(|t| self.expect_dtype(OP, t, f32s));
        let (dq, dk, dv, dg, db, ds) = (dq?, dk?, dv?, dg?, db?, ds?);
        if states == 0 || states > i32::MAX as u32 {
            return Err(op_err!(OP, "the number of kept states must be in 1..=i32::MAX, not {states}"));
        }
        for (t, d) in [(q, &dq), (k, &dk), (v, &dv)] {
            if !dense_rows(d) {
                return Err(op_err!(OP, "{} must have dense rows", self.describe(t)));
            }
        }
        for (t, d) in [(g, &dg), (beta, &db), (state, &ds)] {
            self.expect_contiguous(OP, t, d)?;
        }
        let [s, h, n_t, n_seqs] = dv.ne;
        let wrong = |t: TensorId, what: &str| op_err!(OP, "{} must be {what}", self.describe(t));
        if (dg.ne[0] != 1 && dg.ne[0] != s) || dg.ne[1..] != [h, n_t, n_seqs] {
            return Err(wrong(g, "[1 or S, H, T, n_seqs] of v"));
        }
        if db.ne != [1, h, n_t, n_seqs] {
            return Err(wrong(beta, "[1, H, T, n_seqs] of v"));
        }
        if ds.ne != [s, s, h, n_seqs] {
            return Err(wrong(state, "[S, S, H, n_seqs] of v"));
        }
        // ggml's kernel reads S elements of q and k per head, head h % H_qk
        // and sequence s / (n_seqs / n_qk); its builder checks none of it.
        for (t, d) in [(q, &dq), (k, &dk)] {
            let [sq, hq, tq, nq] = d.ne;
            let heads_ok = if hq == 0 { h == 0 } else { h.is_multiple_of(hq) };
            let seqs_ok = if nq == 0 { n_seqs == 0 } else { n_seqs.is_multiple_of(nq) };
            if sq != s || tq != n_t || !heads_ok || !seqs_ok {
                return Err(wrong(t, "[S, H_qk, T, n_qk] with v's S and T, H_qk dividing H and n_qk dividing n_seqs"));
            }
        }
        let overflow = || Error::Overflow(format!("{OP} result of {}", self.describe(v)));
        let cols = s.checked_mul(h).ok_or_else(overflow)?;
        let rows = (states as usize)
            .checked_mul(s)
            .and_then(|n| n.checked_mul(n_seqs))
            .and_then(|n| n.checked_add(n_t.checked_mul(n_seqs)?))
            .ok_or_else(overflow)?;
        cols.checked_mul(rows).ok_or_else(overflow)?;
        self.push_op(DType::F32, [cols, rows, 1, 1], Op::GatedDeltaNet { states }, &[q, k, v, g, beta, state])
    }
}
