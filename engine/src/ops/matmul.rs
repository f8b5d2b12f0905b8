//! Matrix products: MUL_MAT.

use gantry_arenas::TensorId;

use crate::{Context, DType, Op, Result, op_err};

impl Context {
    /// `a^T b` row by row: `a` is `[k, m, ne2, ne3]` in any dtype (weights),
    /// `b` is F32 `[k, n, ne12, ne13]` with `ne12` a multiple of `ne2` and
    /// `ne13` of `ne3` (the batch of `a` is broadcast, as ggml does). The
    /// result is F32 `[m, n, ne12, ne13]`: each element is the dot product of
    /// a row of `a` with a row of `b`.
    ///
    /// ```
    /// use gantry_engine::{Context, DType};
    /// let mut ctx = Context::new();
    /// let w = ctx.tensor(DType::Q4_0, [64, 10])?;      // 10 output features
    /// let x = ctx.tensor(DType::F32, [64, 3, 4])?;     // 3 tokens, 4 heads
    /// let y = ctx.mul_mat(w, x)?;
    /// assert_eq!(ctx.desc(y)?.ne, [10, 3, 4, 1]);
    /// # Ok::<(), gantry_engine::Error>(())
    /// ```
    pub fn mul_mat(&mut self, a: TensorId, b: TensorId) -> Result<TensorId> {
        const OP: &str = "MUL_MAT";
        let da = self.src(OP, a)?;
        let db = self.expect_dtype(OP, b, &[DType::F32])?;
        if da.dtype == DType::I32 {
            return Err(op_err!(OP, "{} has dtype i32, which has no product", self.describe(a)));
        }
        if da.ne[0] != db.ne[0] || !db.ne[2].is_multiple_of(da.ne[2]) || !db.ne[3].is_multiple_of(da.ne[3]) {
            return Err(op_err!(
                OP,
                "cannot multiply {} by {}: inner dims differ or batch does not broadcast",
                self.describe(a),
                self.describe(b)
            ));
        }
        if da.is_transposed() {
            return Err(op_err!(OP, "{} must not be transposed (make it contiguous first)", self.describe(a)));
        }
        if da.dtype.is_quantized() && !da.is_contiguous_rows() {
            return Err(op_err!(OP, "quantized {} must have contiguous rows", self.describe(a)));
        }
        self.push_op(DType::F32, [da.ne[1], db.ne[1], db.ne[2], db.ne[3]], Op::MulMat, &[a, b])
    }
}
