//! Linear attention with a recurrent state per head (RWKV-6, gated linear
//! attention, RWKV-7): each token updates an `S × S` state per head and
//! reads its output from it. The three share ggml's layout: inputs `[S, H,
//! T]` with the `T` tokens split evenly over the sequences, states of `S ·
//! S · H` floats per sequence, and a result holding the outputs `[S · H,
//! T]` followed by the new states `[S · H, S · n_seqs]`.

use gantry_arenas::TensorId;

use crate::{Context, DType, Error, Op, Result, op_err};

impl Context {
    /// Checks the family's common rules: every tensor F32 and contiguous,
    /// each of `per_token` `[S, H, T]` (with `S`, `H`, `T` from the first),
    /// and `state` holding `S · S · H` floats per sequence, the tokens
    /// split evenly over the sequences. Returns the head size, the heads
    /// and the result's shape.
    fn linear_attn_dims(
        &self,
        op: &'static str,
        per_token: &[TensorId],
        others: &[TensorId],
        state: TensorId,
    ) -> Result<(usize, usize, [usize; 4])> {
        for &t in per_token.iter().chain(others).chain([&state]) {
            let d = self.expect_dtype(op, t, &[DType::F32])?;
            self.expect_contiguous(op, t, &d)?;
        }
        let first = self.src(op, per_token[0])?;
        let [s, h, t, _] = first.ne;
        for &x in per_token {
            if self.src(op, x)?.ne != [s, h, t, 1] {
                return Err(op_err!(op, "{} must be [S, H, T] = [{s}, {h}, {t}]", self.describe(x)));
            }
        }
        let ds = self.src(op, state)?;
        let n_seqs = ds.ne[1];
        let per_seq = s.checked_mul(s).and_then(|n| n.checked_mul(h));
        let state_len = per_seq.and_then(|n| n.checked_mul(n_seqs));
        if state_len != Some(ds.nelements()) {
            return Err(op_err!(
                op,
                "{} must hold S · S · H = {s}·{s}·{h} floats per sequence (dim 1)",
                self.describe(state)
            ));
        }
        // ggml gives sequence t / (T / n_seqs) token t: an even split.
        if n_seqs == 0 || !t.is_multiple_of(n_seqs) {
            return Err(op_err!(
                op,
                "the {t} tokens of {} must split evenly over the {n_seqs} sequences of {}",
                self.describe(per_token[0]),
                self.describe(state)
            ));
        }
        let ne = s
            .checked_mul(h)
            .zip(s.checked_mul(n_seqs).and_then(|n| n.checked_add(t)))
            .map(|(c, rows)| [c, rows, 1, 1])
            .ok_or_else(|| Error::Overflow(format!("{op} result of {}", self.describe(per_token[0]))))?;
        Ok((s, h, ne))
    }

    /// RWKV-6's time mixing (ggml's `ggml_rwkv_wkv6`), all F32 and
    /// contiguous: `k`, `v`, `r` and the per-token decay `td` `[S, H, T]`,
    /// the bonus `tf` `[S, H]`, and `state` with `S · S · H` floats per
    /// sequence (`n_seqs` in dim 1; `[S · S · H, n_seqs]` as ggml's callers
    /// make it). With `st[h, i, j]` the state of head `h` (`i` along `k`,
    /// `j` along `v`), per token:
    /// `out[j] = Σ_i r[i] · (tf[i] · k[i] · v[j] + st[i, j])`, then
    /// `st[i, j] = st[i, j] · td[i] + k[i] · v[j]`.
    /// The result `[S · H, T + S · n_seqs]` holds the outputs, then each
    /// sequence's final state.
    pub fn rwkv_wkv6(
        &mut self,
        k: TensorId,
        v: TensorId,
        r: TensorId,
        tf: TensorId,
        td: TensorId,
        state: TensorId,
    ) -> Result<TensorId> {
        const OP: &str = "RWKV_WKV6";
        let (s, h, ne) = self.linear_attn_dims(OP, &[k, v, r, td], &[tf], state)?;
        if self.src(OP, tf)?.ne != [s, h, 1, 1] {
            return Err(op_err!(OP, "{} must be [S, H] = [{s}, {h}]", self.describe(tf)));
        }
        self.push_op(DType::F32, ne, Op::RwkvWkv6, &[k, v, r, tf, td, state])
    }

    /// Gated linear attention (ggml's `ggml_gated_linear_attn`), all F32 and
    /// contiguous: `k`, `v`, `q` and the gate `g` `[S, H, T]`, `state` as
    /// [`Context::rwkv_wkv6`]'s. Per token:
    /// `st[i, j] = st[i, j] · g[i] + k[i] · v[j]`, then
    /// `out[j] = Σ_i st[i, j] · q[i] · scale`. The result is laid out as
    /// RWKV_WKV6's.
    pub fn gated_linear_attn(
        &mut self,
        k: TensorId,
        v: TensorId,
        q: TensorId,
        g: TensorId,
        state: TensorId,
        scale: f32,
    ) -> Result<TensorId> {
        const OP: &str = "GATED_LINEAR_ATTN";
        let (_, _, ne) = self.linear_attn_dims(OP, &[k, v, q, g], &[], state)?;
        self.push_op(DType::F32, ne, Op::GatedLinearAttn { scale }, &[k, v, q, g, state])
    }

    /// RWKV-7's time mixing (ggml's `ggml_rwkv_wkv7`), all F32 and
    /// contiguous: `r`, the decay `w`, `k`, `v`, `a`, `b` `[S, H, T]`,
    /// `state` as [`Context::rwkv_wkv6`]'s but with `i` along `v` and `j`
    /// along `k`. Per token: `sa[i] = Σ_j a[j] · st[i, j]`, then
    /// `st[i, j] = st[i, j] · w[j] + v[i] · k[j] + sa[i] · b[j]` and
    /// `out[i] = Σ_j st[i, j] · r[j]`. The result is laid out as
    /// RWKV_WKV6's.
    #[expect(clippy::too_many_arguments, reason = "ggml's seven sources, named and ordered as in ggml")]
    pub fn rwkv_wkv7(
        &mut self,
        r: TensorId,
        w: TensorId,
        k: TensorId,
        v: TensorId,
        a: TensorId,
        b: TensorId,
        state: TensorId,
    ) -> Result<TensorId> {
        const OP: &str = "RWKV_WKV7";
        // ggml takes the sizes from k and checks the rest against them (r
        // too here: its kernel reads r as it reads k).
        let (_, _, ne) = self.linear_attn_dims(OP, &[k, r, w, v, a, b], &[], state)?;
        self.push_op(DType::F32, ne, Op::RwkvWkv7, &[r, w, k, v, a, b, state])
    }
}
