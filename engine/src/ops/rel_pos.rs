//! SAM's decomposed relative positions: GET_REL_POS expands a table of
//! embeddings per relative offset into one per (key, query) pair,
//! ADD_REL_POS adds the width and height terms to attention scores.

use gantry_arenas::TensorId;

use crate::{Context, DType, Op, Result, op_err};

impl Context {
    /// SAM's relative-position lookup (ggml's `ggml_get_rel_pos`): `a` (F16
    /// `[C, 2 · n - 1]`) holds an embedding per offset; the result (F16 `[C,
    /// kh, qh]`, `kh == qh == n`) is `out[c, k, q] = a[c, kh - 1 - k + q]`.
    /// ggml's CPU kernel also takes BF16, into a result it still calls F16;
    /// that is refused here.
    pub fn get_rel_pos(&mut self, a: TensorId, qh: usize, kh: usize) -> Result<TensorId> {
        const OP: &str = "GET_REL_POS";
        let d = self.expect_dtype(OP, a, &[DType::F16])?;
        if qh != kh {
            return Err(op_err!(OP, "the query and key sizes must agree, not {qh} and {kh}"));
        }
        if qh == 0 || qh.checked_mul(2).map(|n| n - 1) != Some(d.ne[1]) || d.ne[2] != 1 || d.ne[3] != 1 {
            return Err(op_err!(OP, "{} must be a matrix [C, 2·{qh} - 1]", self.describe(a)));
        }
        let ne = [d.ne[0], kh, qh, 1];
        // Fits: C · kh · qh <= C · (2 · kh - 1) · kh and a exists.
        self.push_op(DType::F16, ne, Op::GetRelPos, &[a])
    }

    /// SAM's decomposed relative positions added to attention scores
    /// (ggml's `ggml_add_rel_pos`), all F32 and contiguous: `a` `[n · n,
    /// n_q, B]` (each row the scores of one query against the `n × n` keys),
    /// `pw` and `ph` `[n, q1, q2, B]` with `q1 · q2 == n_q`. The result (a's
    /// shape) is `out[y · n + x, q, b] = a[y · n + x, q, b] + ph[y, q, b] +
    /// pw[x, q, b]`. ggml adds only to the first of a's dim-3 blocks; a
    /// 4-D `a` is refused here.
    pub fn add_rel_pos(&mut self, a: TensorId, pw: TensorId, ph: TensorId) -> Result<TensorId> {
        const OP: &str = "ADD_REL_POS";
        let f32s = &[DType::F32];
        let [da, dw, dh] = [a, pw, ph].map(|t| self.expect_dtype(OP, t, f32s));
        let (da, dw, dh) = (da?, dw?, dh?);
        for (t, d) in [(a, &da), (pw, &dw), (ph, &dh)] {
            self.expect_contiguous(OP, t, d)?;
        }
        if dw.ne != dh.ne {
            return Err(op_err!(OP, "{} and {} differ in shape", self.describe(pw), self.describe(ph)));
        }
        let [n, q1, q2, b] = dw.ne;
        let fits = n.checked_mul(n) == Some(da.ne[0])
            && q1.checked_mul(q2) == Some(da.ne[1])
            && b == da.ne[2]
            && da.ne[3] == 1;
        if !fits {
            return Err(op_err!(
                OP,
                "{} must be [n·n, q1·q2, B] for the terms {} ([n, q1, q2, B])",
                self.describe(a),
                self.describe(pw)
            ));
        }
        self.push_op(DType::F32, da.ne, Op::AddRelPos, &[a, pw, ph])
    }
}
