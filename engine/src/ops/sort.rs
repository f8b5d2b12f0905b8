//! Sorting rows: ARGSORT and TOP_K (expert routing picks each token's
//! best-scored experts with them).

use gantry_arenas::TensorId;

use crate::{Context, DType, Op, Result, SortOrder, op_err};

impl Context {
    /// The indices (I32, `a`'s shape) that sort each row of the F32 `a` in
    /// `order`. Equal values keep their order (a stable sort; ggml's CPU
    /// leaves ties unspecified).
    pub fn argsort(&mut self, a: TensorId, order: SortOrder) -> Result<TensorId> {
        const OP: &str = "ARGSORT";
        let d = self.expect_dtype(OP, a, &[DType::F32])?;
        if d.ne[0] > i32::MAX as usize {
            return Err(op_err!(OP, "rows of {} are too long for i32 indices", self.describe(a)));
        }
        self.push_op(DType::I32, d.ne, Op::Argsort { order }, &[a])
    }

    /// The indices (I32 `[k, ne1, ne2, ne3]`) of the `k` largest elements
    /// of each row of the F32 `a`, largest first (ggml's `ggml_top_k`
    /// promises no order; this order is one it allows). Ties go to the
    /// lower index.
    pub fn top_k(&mut self, a: TensorId, k: usize) -> Result<TensorId> {
        const OP: &str = "TOP_K";
        let d = self.expect_dtype(OP, a, &[DType::F32])?;
        if k > d.ne[0] {
            return Err(op_err!(
                OP,
                "k = {k} is more than the {} elements of each row of {}",
                d.ne[0],
                self.describe(a)
            ));
        }
        if d.ne[0] > i32::MAX as usize {
            return Err(op_err!(OP, "rows of {} are too long for i32 indices", self.describe(a)));
        }
        self.push_op(DType::I32, [k, d.ne[1], d.ne[2], d.ne[3]], Op::TopK, &[a])
    }
}

#[cfg(test)]
mod tests {
    use crate::{Context, DType, Error, SortOrder};

    #[test]
    fn shapes_and_errors() {
        let mut ctx = Context::new();
        let a = ctx.tensor(DType::F32, [10, 3, 2]).unwrap();
        let s = ctx.argsort(a, SortOrder::Desc).unwrap();
        assert_eq!((ctx.desc(s).unwrap().dtype, ctx.desc(s).unwrap().ne), (DType::I32, [10, 3, 2, 1]));
        let t = ctx.top_k(a, 4).unwrap();
        assert_eq!((ctx.desc(t).unwrap().dtype, ctx.desc(t).unwrap().ne), (DType::I32, [4, 3, 2, 1]));
        assert!(matches!(ctx.top_k(a, 11), Err(Error::InvalidOp { op: "TOP_K", .. })));
        let h = ctx.tensor(DType::F16, [10]).unwrap();
        assert!(matches!(ctx.argsort(h, SortOrder::Asc), Err(Error::InvalidOp { op: "ARGSORT", .. })));
        assert!(matches!(ctx.top_k(h, 1), Err(Error::InvalidOp { op: "TOP_K", .. })));
    }
}
