//! Mixture-of-experts ops: MUL_MAT_ID (each token's chosen experts' weights
//! times its activations) and ADD_ID (each chosen expert's bias).
//!
//! Both read their experts through I32 ids, which are data: a builder
//! checks every shape, and each backend's kernel checks every id against
//! the number of experts when it reads it, so an id out of range is an
//! error from the compute, never a read outside the weights.

use gantry_arenas::TensorId;

use crate::{Context, DType, Op, Result, op_err};

impl Context {
    /// ggml's `ggml_mul_mat_id`: `as_` holds one weight matrix per expert,
    /// `[k, m, n_expert]` in any dtype MUL_MAT takes; `b` is F32 `[k, n_b,
    /// n_tokens]` with `n_b` either `n_used` (one activation row per chosen
    /// expert) or a divisor of it (broadcast: row `e % n_b` for slot `e`);
    /// `ids` is I32 `[n_used, n_tokens]`, the experts each token uses. The
    /// result is F32 `[m, n_used, n_tokens]`: slot `e` of token `t` is
    /// expert `ids[e, t]`'s weights times row `e % n_b` of token `t`.
    ///
    /// ```
    /// use gantry_engine::{Context, DType};
    /// let mut ctx = Context::new();
    /// let experts = ctx.tensor(DType::Q4_0, [64, 10, 8])?; // 8 experts
    /// let x = ctx.tensor(DType::F32, [64, 1, 5])?;         // 5 tokens, shared row
    /// let ids = ctx.tensor(DType::I32, [2, 5])?;           // 2 experts per token
    /// let y = ctx.mul_mat_id(experts, x, ids)?;
    /// assert_eq!(ctx.desc(y)?.ne, [10, 2, 5, 1]);
    /// # Ok::<(), gantry_engine::Error>(())
    /// ```
    pub fn mul_mat_id(&mut self, as_: TensorId, b: TensorId, ids: TensorId) -> Result<TensorId> {
        const OP: &str = "MUL_MAT_ID";
        let da = self.src(OP, as_)?;
        let db = self.expect_dtype(OP, b, &[DType::F32])?;
        let di = self.expect_dtype(OP, ids, &[DType::I32])?;
        if da.dtype == DType::I32 {
            return Err(op_err!(OP, "{} has dtype i32, which has no product", self.describe(as_)));
        }
        if da.ne[3] != 1 {
            return Err(op_err!(OP, "the experts {} must be 3-d [k, m, n_expert]", self.describe(as_)));
        }
        if db.ne[3] != 1 {
            return Err(op_err!(OP, "the activations {} must be 3-d [k, n, n_tokens]", self.describe(b)));
        }
        if di.ne[2] != 1 || di.ne[3] != 1 {
            return Err(op_err!(OP, "the ids {} must be 2-d [n_used, n_tokens]", self.describe(ids)));
        }
        if da.ne[0] != db.ne[0] {
            return Err(op_err!(
                OP,
                "rows of the experts {} and of the activations {} differ in length",
                self.describe(as_),
                self.describe(b)
            ));
        }
        if di.ne[1] != db.ne[2] {
            return Err(op_err!(
                OP,
                "the ids {} need one list per token of the activations {}",
                self.describe(ids),
                self.describe(b)
            ));
        }
        if db.ne[1] == 0 || !di.ne[0].is_multiple_of(db.ne[1]) {
            return Err(op_err!(
                OP,
                "the activations' {} rows per token must divide the {} experts each token uses ({})",
                db.ne[1],
                di.ne[0],
                self.describe(ids)
            ));
        }
        if da.ne[2] > i32::MAX as usize {
            return Err(op_err!(OP, "{} has more experts than i32 ids address", self.describe(as_)));
        }
        if da.is_transposed() {
            return Err(op_err!(OP, "{} must not be transposed (make it contiguous first)", self.describe(as_)));
        }
        if da.dtype.is_quantized() && !da.is_contiguous_rows() {
            return Err(op_err!(OP, "quantized {} must have contiguous rows", self.describe(as_)));
        }
        self.push_op(DType::F32, [da.ne[1], di.ne[0], db.ne[2], 1], Op::MulMatId, &[as_, b, ids])
    }

    /// ggml's `ggml_add_id`: `a` is F32 `[n, n_used, n_tokens]` (a
    /// MUL_MAT_ID result), `b` F32 `[n, n_expert]` (one bias row per
    /// expert), `ids` I32 `[n_used, n_tokens]`; the result, `a`'s shape, is
    /// `a[:, e, t] + b[:, ids[e, t]]`.
    pub fn add_id(&mut self, a: TensorId, b: TensorId, ids: TensorId) -> Result<TensorId> {
        const OP: &str = "ADD_ID";
        let da = self.expect_dtype(OP, a, &[DType::F32])?;
        let db = self.expect_dtype(OP, b, &[DType::F32])?;
        let di = self.expect_dtype(OP, ids, &[DType::I32])?;
        if da.ne[3] != 1 || db.ne[2] != 1 || db.ne[3] != 1 || di.ne[2] != 1 || di.ne[3] != 1 {
            return Err(op_err!(
                OP,
                "{} must be 3-d, {} and the ids {} 2-d",
                self.describe(a),
                self.describe(b),
                self.describe(ids)
            ));
        }
        if da.ne[0] != db.ne[0] {
            return Err(op_err!(
                OP,
                "rows of {} and of the biases {} differ in length",
                self.describe(a),
                self.describe(b)
            ));
        }
        if da.ne[1] != di.ne[0] || da.ne[2] != di.ne[1] {
            return Err(op_err!(
                OP,
                "the ids {} must be [{}, {}] for {}",
                self.describe(ids),
                da.ne[1],
                da.ne[2],
                self.describe(a)
            ));
        }
        self.result_like(a, Op::AddId, &[a, b, ids], false)
    }
}

#[cfg(test)]
mod tests {
    use crate::{Context, DType, Error};

    fn reason(e: Error) -> String {
        match e {
            Error::InvalidOp { op, reason } => format!("{op}: {reason}"),
            other => panic!("expected InvalidOp, got {other:?}"),
        }
    }

    #[test]
    fn mul_mat_id_shapes_and_errors() {
        let mut ctx = Context::new();
        let w = ctx.tensor(DType::F16, [32, 6, 4]).unwrap();
        let x = ctx.tensor(DType::F32, [32, 2, 3]).unwrap();
        let ids = ctx.tensor(DType::I32, [2, 3]).unwrap();
        let y = ctx.mul_mat_id(w, x, ids).unwrap();
        assert_eq!(ctx.desc(y).unwrap().ne, [6, 2, 3, 1]);
        // One shared row per token, broadcast over 4 slots.
        let x1 = ctx.tensor(DType::F32, [32, 1, 3]).unwrap();
        let ids4 = ctx.tensor(DType::I32, [4, 3]).unwrap();
        let y4 = ctx.mul_mat_id(w, x1, ids4).unwrap();
        assert_eq!(ctx.desc(y4).unwrap().ne, [6, 4, 3, 1]);

        let bad_k = ctx.tensor(DType::F32, [16, 2, 3]).unwrap();
        assert!(reason(ctx.mul_mat_id(w, bad_k, ids).unwrap_err()).contains("differ in length"));
        let x3 = ctx.tensor(DType::F32, [32, 3, 3]).unwrap();
        assert!(reason(ctx.mul_mat_id(w, x3, ids).unwrap_err()).contains("must divide"));
        let ids_f = ctx.tensor(DType::F32, [2, 3]).unwrap();
        assert!(reason(ctx.mul_mat_id(w, x, ids_f).unwrap_err()).starts_with("MUL_MAT_ID"));
        let ids_tokens = ctx.tensor(DType::I32, [2, 4]).unwrap();
        assert!(reason(ctx.mul_mat_id(w, x, ids_tokens).unwrap_err()).contains("one list per token"));
        let w4 = ctx.tensor(DType::F32, [32, 6, 4, 2]).unwrap();
        assert!(reason(ctx.mul_mat_id(w4, x, ids).unwrap_err()).contains("3-d"));
        let wt = ctx.transpose(w).unwrap();
        let xt = ctx.tensor(DType::F32, [6, 2, 3]).unwrap();
        assert!(reason(ctx.mul_mat_id(wt, xt, ids).unwrap_err()).contains("transposed"));
    }

    #[test]
    fn add_id_shapes_and_errors() {
        let mut ctx = Context::new();
        let a = ctx.tensor(DType::F32, [8, 2, 3]).unwrap();
        let b = ctx.tensor(DType::F32, [8, 5]).unwrap();
        let ids = ctx.tensor(DType::I32, [2, 3]).unwrap();
        let y = ctx.add_id(a, b, ids).unwrap();
        assert_eq!(ctx.desc(y).unwrap().ne, [8, 2, 3, 1]);
        let b7 = ctx.tensor(DType::F32, [7, 5]).unwrap();
        assert!(reason(ctx.add_id(a, b7, ids).unwrap_err()).contains("differ in length"));
        let ids_bad = ctx.tensor(DType::I32, [3, 3]).unwrap();
        assert!(reason(ctx.add_id(a, b, ids_bad).unwrap_err()).contains("must be [2, 3]"));
        let a16 = ctx.tensor(DType::F16, [8, 2, 3]).unwrap();
        assert!(reason(ctx.add_id(a16, b, ids).unwrap_err()).starts_with("ADD_ID"));
    }
}
