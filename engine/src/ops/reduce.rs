//! Reductions: SUM, SUM_ROWS, MEAN, ARGMAX, COUNT_EQUAL, and CUMSUM's running sums.

use gantry_arenas::TensorId;

use super::FLOATS;
use crate::{Context, DType, Op, Result, op_err};

impl Context {
    /// The sum of all elements of `a`: a 1-element tensor of `a`'s dtype.
    pub fn sum(&mut self, a: TensorId) -> Result<TensorId> {
        let d = self.expect_dtype("SUM", a, FLOATS)?;
        self.push_op(d.dtype, [1, 1, 1, 1], Op::Sum, &[a])
    }

    /// The sum of each row: shape `[1, ne1, ne2, ne3]`, `a`'s dtype.
    pub fn sum_rows(&mut self, a: TensorId) -> Result<TensorId> {
        let d = self.expect_dtype("SUM_ROWS", a, FLOATS)?;
        self.push_op(d.dtype, [1, d.ne[1], d.ne[2], d.ne[3]], Op::SumRows, &[a])
    }

    /// The mean of each row: shape `[1, ne1, ne2, ne3]`, F32.
    pub fn mean(&mut self, a: TensorId) -> Result<TensorId> {
        let d = self.expect_dtype("MEAN", a, FLOATS)?;
        self.push_op(DType::F32, [1, d.ne[1], d.ne[2], d.ne[3]], Op::Mean, &[a])
    }

    /// The index of the largest element of each row of the matrix `a`: I32 `[ne1]`.
    pub fn argmax(&mut self, a: TensorId) -> Result<TensorId> {
        let d = self.expect_dtype("ARGMAX", a, FLOATS)?;
        if d.ne[2] != 1 || d.ne[3] != 1 {
            return Err(op_err!("ARGMAX", "{} must be a matrix", self.describe(a)));
        }
        if d.ne[0] > i32::MAX as usize {
            return Err(op_err!("ARGMAX", "rows of {} are too long for i32 indices", self.describe(a)));
        }
        self.push_op(DType::I32, [d.ne[1], 1, 1, 1], Op::Argmax, &[a])
    }

    /// The inclusive running sum along each row of the F32 `a` (ggml's
    /// `ggml_cumsum`): `out[i] = a[0] + ... + a[i]`, `a`'s shape.
    pub fn cumsum(&mut self, a: TensorId) -> Result<TensorId> {
        self.expect_dtype("CUMSUM", a, &[DType::F32])?;
        self.result_like(a, Op::Cumsum, &[a], false)
    }

    /// The number of positions where the I32 `a` and `b` (one shape) are
    /// equal, as one I32 (ggml's `ggml_count_equal` counts into an I64,
    /// which Gantry has no dtype for: tensors of more than `i32::MAX`
    /// elements are refused instead).
    pub fn count_equal(&mut self, a: TensorId, b: TensorId) -> Result<TensorId> {
        const OP: &str = "COUNT_EQUAL";
        let da = self.expect_dtype(OP, a, &[DType::I32])?;
        let db = self.expect_dtype(OP, b, &[DType::I32])?;
        if da.ne != db.ne {
            return Err(op_err!(OP, "{} and {} differ in shape", self.describe(a), self.describe(b)));
        }
        if da.nelements() > i32::MAX as usize {
            return Err(op_err!(OP, "{} has too many elements to count in an i32", self.describe(a)));
        }
        self.push_op(DType::I32, [1, 1, 1, 1], Op::CountEqual, &[a, b])
    }
}
