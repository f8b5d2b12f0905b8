//! State-space model ops (Mamba): SSM_CONV, the depthwise causal
//! convolution over a window of past inputs, and SSM_SCAN, the selective
//! scan that carries each sequence's state across its tokens.

use gantry_arenas::TensorId;

use crate::{Context, DType, Error, Op, Result, TensorDesc, op_err};

/// Whether dims 0 and 1 of `d` are dense (ggml's `nb[0] == type_size` and
/// `nb[1] == ne[0] * nb[0]`), so a kernel may step through a row and from
/// row to row by element counts.
fn dense_rows(d: &TensorDesc) -> bool {
    let es = d.dtype.bytes_per_block();
    (d.ne[0] <= 1 || d.nb[0] == es) && (d.ne[1] <= 1 || d.nb[1] == d.ne[0] * es)
}

impl Context {
    /// Mamba's depthwise causal convolution (ggml's `ggml_ssm_conv`): `sx`
    /// (F32 `[d_conv - 1 + n_t, d_inner, n_s]`, dims 0 and 1 dense) holds
    /// each channel's window of past and new inputs, `c` (F32 `[d_conv,
    /// d_inner]`) each channel's kernel; the result (F32 `[d_inner, n_t,
    /// n_s]`) is `out[i, t, s] = Σ_k sx[t + k, i, s] · c[k, i]`.
    pub fn ssm_conv(&mut self, sx: TensorId, c: TensorId) -> Result<TensorId> {
        const OP: &str = "SSM_CONV";
        let dx = self.expect_dtype(OP, sx, &[DType::F32])?;
        let dc = self.expect_dtype(OP, c, &[DType::F32])?;
        if dx.ne[3] != 1 || !dense_rows(&dx) {
            return Err(op_err!(OP, "{} must be 3-D with dense dims 0 and 1", self.describe(sx)));
        }
        if dc.ne[2] != 1 || dc.ne[3] != 1 || (dc.ne[0] > 1 && dc.nb[0] != DType::F32.bytes_per_block()) {
            return Err(op_err!(OP, "{} must be a matrix with dense rows", self.describe(c)));
        }
        let (d_conv, d_inner) = (dc.ne[0], dc.ne[1]);
        // ggml's n_t = ne0 - d_conv + 1 >= 0; a kernel of width 0 would make
        // more outputs than inputs.
        let n_t = (d_conv >= 1).then(|| (dx.ne[0] + 1).checked_sub(d_conv)).flatten().ok_or_else(|| {
            op_err!(OP, "{} is shorter than the kernel {} minus one", self.describe(sx), self.describe(c))
        })?;
        if dx.ne[1] != d_inner {
            return Err(op_err!(OP, "{} and {} differ in channels", self.describe(sx), self.describe(c)));
        }
        self.push_op(DType::F32, [d_inner, n_t, dx.ne[2], 1], Op::SsmConv, &[sx, c])
    }

    /// Mamba's selective scan (ggml's `ggml_ssm_scan`), all F32 but `ids`:
    /// - `s` `[d_state, head_dim, n_head, n_states]` (contiguous): the states
    ///   that `ids` (I32 `[n_seqs]`) picks each sequence's initial one from;
    /// - `x` `[head_dim, n_head, n_tokens, n_seqs]` (dims 0 and 1 dense);
    /// - `dt` `[n_head, n_tokens, n_seqs]` (contiguous), through softplus;
    /// - `a` `[1, n_head]` (Mamba-2: one decay per head) or `[d_state,
    ///   n_head]` (Mamba-1: one per state element, with `states == 1`);
    /// - `b`, `c` `[d_state, n_group, n_tokens, n_seqs]` (dims 0 and 1
    ///   dense), group `h / (n_head / n_group)` serving head `h`.
    ///
    /// Per token: `state = state · exp(softplus(dt) · A) + B · x ·
    /// softplus(dt)`, `y = Σ state · C`. The 1-D result holds `y` as
    /// `[head_dim, n_head, n_tokens, n_seqs]`, then `states` blocks of
    /// `n_seqs` states: the final one, then those 1, 2, ... tokens earlier.
    #[expect(clippy::too_many_arguments, reason = "ggml's seven sources and K, named as in ggml")]
    pub fn ssm_scan(
        &mut self,
        s: TensorId,
        x: TensorId,
        dt: TensorId,
        a: TensorId,
        b: TensorId,
        c: TensorId,
        ids: TensorId,
        states: u32,
    ) -> Result<TensorId> {
        const OP: &str = "SSM_SCAN";
        let f32s = &[DType::F32];
        let [ds, dx, ddt, da, db, dc] = [s, x, dt, a, b, c].map(|t| self.expect_dtype(OP, t, f32s));
        let (ds, dx, ddt, da, db, dc) = (ds?, dx?, ddt?, da?, db?, dc?);
        let did = self.expect_dtype(OP, ids, &[DType::I32])?;
        if states == 0 || states > i32::MAX as u32 {
            return Err(op_err!(OP, "the number of kept states must be in 1..=i32::MAX, not {states}"));
        }
        for (t, d) in [(s, &ds), (dt, &ddt), (a, &da)] {
            self.expect_contiguous(OP, t, d)?;
        }
        for (t, d) in [(x, &dx), (b, &db), (c, &dc)] {
            if !dense_rows(d) {
                return Err(op_err!(OP, "{} must have dense dims 0 and 1", self.describe(t)));
            }
        }
        if db.ne != dc.ne {
            return Err(op_err!(OP, "{} and {} differ in shape", self.describe(b), self.describe(c)));
        }
        let [d_state, head_dim, n_head] = [ds.ne[0], dx.ne[0], dx.ne[1]];
        let [n_tokens, n_seqs, n_group] = [dx.ne[2], dx.ne[3], db.ne[1]];
        let wrong = |t: TensorId, what: &str| op_err!(OP, "{} must be {what}", self.describe(t));
        if ddt.ne != [n_head, n_tokens, n_seqs, 1] {
            return Err(wrong(dt, "[n_head, n_tokens, n_seqs] of x"));
        }
        if ds.ne[1] != head_dim || ds.ne[2] != n_head {
            return Err(wrong(s, "[d_state, head_dim, n_head, n] with x's head_dim and n_head"));
        }
        if db.ne[0] != d_state || db.ne[2] != n_tokens || db.ne[3] != n_seqs {
            return Err(wrong(b, "[d_state, n_group, n_tokens, n_seqs] of s and x"));
        }
        // ggml's kernel asserts this; its builder does not.
        if if n_group == 0 { n_head != 0 } else { n_head % n_group != 0 } {
            return Err(wrong(b, "split into a number of groups that divides the heads"));
        }
        if did.ne != [n_seqs, 1, 1, 1] {
            return Err(wrong(ids, "a vector of one state index per sequence"));
        }
        if da.ne[1] != n_head || da.ne[2] != 1 || da.ne[3] != 1 {
            return Err(wrong(a, "a matrix [1 or d_state, n_head]"));
        }
        if da.ne[0] != 1 && (da.ne[0] != d_state || states != 1) {
            return Err(wrong(a, "[1, n_head], or [d_state, n_head] with one kept state"));
        }
        let len = (states as usize)
            .checked_mul(d_state)
            .and_then(|n| {
                n.checked_mul(head_dim)?.checked_mul(n_head)?.checked_mul(n_seqs)?.checked_add(dx.nelements())
            })
            .ok_or_else(|| Error::Overflow(format!("{OP} result of {}", self.describe(x))))?;
        self.push_op(DType::F32, [len, 1, 1, 1], Op::SsmScan { states }, &[s, x, dt, a, b, c, ids])
    }
}
