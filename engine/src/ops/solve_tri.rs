//! SOLVE_TRI: batched triangular systems solved by forward substitution.

use gantry_arenas::TensorId;

use crate::{Context, DType, Op, Result, op_err};

impl Context {
    /// `X` with `a X = b` (ggml's `ggml_solve_tri`): `a` (F32 `[n, n, ...]`,
    /// contiguous) lower triangular, its entry `[t, i]` in row `i`; `b`
    /// (F32 `[k, n, ...]`, contiguous, the same batches) holds `k`
    /// right-hand sides as columns. ggml solves only `left`, `lower`,
    /// non-`uni` systems; the other variants are refused here as there. A
    /// zero on the diagonal gives infinities or NaN, as ggml's release
    /// builds do.
    pub fn solve_tri(&mut self, a: TensorId, b: TensorId, left: bool, lower: bool, uni: bool) -> Result<TensorId> {
        const OP: &str = "SOLVE_TRI";
        let da = self.expect_dtype(OP, a, &[DType::F32])?;
        let db = self.expect_dtype(OP, b, &[DType::F32])?;
        if !(left && lower && !uni) {
            return Err(op_err!(OP, "only left, lower, non-unit systems are solved (ggml's one variant)"));
        }
        self.expect_contiguous(OP, a, &da)?;
        self.expect_contiguous(OP, b, &db)?;
        if da.ne[0] != da.ne[1] {
            return Err(op_err!(OP, "the matrices of {} must be square", self.describe(a)));
        }
        if da.ne[1] != db.ne[1] || da.ne[2] != db.ne[2] || da.ne[3] != db.ne[3] {
            return Err(op_err!(OP, "{} must have {}'s rows and batches", self.describe(b), self.describe(a)));
        }
        self.push_op(DType::F32, db.ne, Op::SolveTri, &[a, b])
    }
}
