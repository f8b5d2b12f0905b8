//! Row gathers, scatters and tiling: GET_ROWS, SET_ROWS, CONCAT, REPEAT.

use gantry_arenas::TensorId;

use super::layout::QUANT_TARGETS;
use crate::context::ViewLayout;
use crate::context::shape4;
use crate::tensor::can_repeat;
use crate::{Context, DType, Op, Result, op_err};

impl Context {
    /// Rows of `a` (`[ne0, rows, ne2, ne3]`, any dtype) picked by the I32
    /// indices `b` (`[n, ne2, ne3']`): result `[ne0, n, b.ne1, b.ne2]`, F32
    /// (I32 when `a` is I32). The embedding lookup.
    pub fn get_rows(&mut self, a: TensorId, b: TensorId) -> Result<TensorId> {
        const OP: &str = "GET_ROWS";
        let da = self.src(OP, a)?;
        let db = self.expect_dtype(OP, b, &[DType::I32])?;
        if da.ne[2] != db.ne[1] || da.ne[3] != db.ne[2] || db.ne[3] != 1 {
            return Err(op_err!(
                OP,
                "indices {} do not match {}: need b.ne[1] == a.ne[2], b.ne[2] == a.ne[3] and b.ne[3] == 1",
                self.describe(b),
                self.describe(a)
            ));
        }
        if da.dtype.is_quantized() {
            self.expect_contiguous_rows(OP, a, &da)?;
        }
        let dtype = if da.dtype == DType::I32 { DType::I32 } else { DType::F32 };
        self.push_op(dtype, [da.ne[0], db.ne[0], db.ne[1], db.ne[2]], Op::GetRows, &[a, b])
    }

    /// Writes the F32 rows of `b` (`[ne0, n, ne2, ne3]`) into `a` at the I32
    /// row indices `c` (`[n, c1, c2]`, repeated over `b`'s dims 2 and 3); the
    /// result is a view of `a`. `a` is F32, F16, BF16 or one of the
    /// quantized types Q4_0, Q4_1, Q5_0, Q5_1, Q8_0. The KV-cache store.
    pub fn set_rows(&mut self, a: TensorId, b: TensorId, c: TensorId) -> Result<TensorId> {
        const OP: &str = "SET_ROWS";
        let da = self.src(OP, a)?;
        let db = self.expect_dtype(OP, b, &[DType::F32])?;
        let dc = self.expect_dtype(OP, c, &[DType::I32])?;
        if !(da.dtype.is_float() || QUANT_TARGETS.contains(&da.dtype)) {
            return Err(op_err!(OP, "cannot write rows into {} ({})", self.describe(a), da.dtype));
        }
        self.expect_contiguous_rows(OP, a, &da)?;
        self.expect_contiguous_rows(OP, b, &db)?;
        let fits = da.ne[0] == db.ne[0]
            && da.ne[2] == db.ne[2]
            && da.ne[3] == db.ne[3]
            && db.ne[1] == dc.ne[0]
            && dc.ne[1] > 0
            && dc.ne[2] > 0
            && db.ne[2].is_multiple_of(dc.ne[1])
            && db.ne[3].is_multiple_of(dc.ne[2])
            && dc.ne[3] == 1;
        if !fits {
            return Err(op_err!(
                OP,
                "rows {} with indices {} do not fit into {}",
                self.describe(b),
                self.describe(c),
                self.describe(a)
            ));
        }
        self.push_view(a, ViewLayout::of(&da), 0, Op::SetRows, &[b, c])
    }

    /// `a` and `b` joined along `dim` (every other dim equal, same dtype).
    pub fn concat(&mut self, a: TensorId, b: TensorId, dim: usize) -> Result<TensorId> {
        const OP: &str = "CONCAT";
        let (da, db) = (self.src(OP, a)?, self.src(OP, b)?);
        if dim >= 4 {
            return Err(op_err!(OP, "dim {dim} is not one of 0..4"));
        }
        if da.dtype != db.dtype || da.dtype.is_quantized() {
            return Err(op_err!(OP, "{} and {} must share a non-quantized dtype", self.describe(a), self.describe(b)));
        }
        if (0..4).any(|d| d != dim && da.ne[d] != db.ne[d]) {
            return Err(op_err!(OP, "{} and {} differ outside dim {dim}", self.describe(a), self.describe(b)));
        }
        let mut ne = da.ne;
        ne[dim] += db.ne[dim];
        self.push_op(da.dtype, ne, Op::Concat { dim: dim as u8 }, &[a, b])
    }

    /// `a` tiled to `b`'s shape (each dim of `b` a multiple of `a`'s).
    /// `b` only gives the shape; it is not read.
    pub fn repeat(&mut self, a: TensorId, b: TensorId) -> Result<TensorId> {
        let shape = self.src("REPEAT", b)?.ne;
        self.repeat_to(a, shape)
    }

    /// `a` tiled to `shape`.
    pub fn repeat_to(&mut self, a: TensorId, shape: impl AsRef<[usize]>) -> Result<TensorId> {
        const OP: &str = "REPEAT";
        let da = self.src(OP, a)?;
        let ne = shape4(shape.as_ref()).map_err(|e| op_err!(OP, "{e}"))?;
        if da.dtype.is_quantized() || !can_repeat(da.ne, ne) {
            return Err(op_err!(OP, "{} does not repeat into {ne:?}", self.describe(a)));
        }
        self.push_op(da.dtype, ne, Op::Repeat, &[a])
    }
}
