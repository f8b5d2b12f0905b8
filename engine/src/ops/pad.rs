//! Padding and shifting: PAD (zeros or wrapped around, before and after
//! each dim), PAD_REFLECT_1D and ROLL.

use gantry_arenas::TensorId;

use crate::{Context, DType, Op, Result, op_err};

impl Context {
    /// `a` (F32) with `p[i]` zeros appended along each dim (ggml's `ggml_pad`).
    pub fn pad(&mut self, a: TensorId, p: [u32; 4]) -> Result<TensorId> {
        self.pad_ext(a, [0; 4], p)
    }

    /// `a` (F32) with `lp[i]` zeros before and `rp[i]` after each dim
    /// (ggml's `ggml_pad_ext`).
    pub fn pad_ext(&mut self, a: TensorId, lp: [u32; 4], rp: [u32; 4]) -> Result<TensorId> {
        self.pad_impl(a, lp, rp, false)
    }

    /// [`Context::pad_ext`] with the source wrapped around instead of
    /// zeros (ggml's `ggml_pad_ext_circular`: a torus).
    pub fn pad_ext_circular(&mut self, a: TensorId, lp: [u32; 4], rp: [u32; 4]) -> Result<TensorId> {
        self.pad_impl(a, lp, rp, true)
    }

    fn pad_impl(&mut self, a: TensorId, lp: [u32; 4], rp: [u32; 4], circular: bool) -> Result<TensorId> {
        const OP: &str = "PAD";
        let d = self.expect_dtype(OP, a, &[DType::F32])?;
        let mut ne = d.ne;
        for i in 0..4 {
            ne[i] = d.ne[i]
                .checked_add(lp[i] as usize + rp[i] as usize)
                .ok_or_else(|| op_err!(OP, "padding {lp:?} / {rp:?} of {} overflows", self.describe(a)))?;
        }
        if circular && d.ne.contains(&0) && !ne.contains(&0) {
            return Err(op_err!(OP, "{} is empty, so there is nothing to wrap around", self.describe(a)));
        }
        self.push_op(DType::F32, ne, Op::Pad { lp, rp, circular }, &[a])
    }

    /// `a` (F32, contiguous) with `p0` elements reflected before and `p1`
    /// after each row, the edge not repeated (ggml's `ggml_pad_reflect_1d`);
    /// both below the row length.
    pub fn pad_reflect_1d(&mut self, a: TensorId, p0: u32, p1: u32) -> Result<TensorId> {
        const OP: &str = "PAD_REFLECT_1D";
        let d = self.expect_dtype(OP, a, &[DType::F32])?;
        self.expect_contiguous(OP, a, &d)?;
        if p0 as usize >= d.ne[0] || p1 as usize >= d.ne[0] {
            return Err(op_err!(OP, "padding {p0} and {p1} must be shorter than the rows of {}", self.describe(a)));
        }
        self.push_op(
            DType::F32,
            [d.ne[0] + (p0 + p1) as usize, d.ne[1], d.ne[2], d.ne[3]],
            Op::PadReflect1d { p0, p1 },
            &[a],
        )
    }

    /// `a` (F32, rows dense) with its elements moved `shift[i]` places along
    /// each dim, wrapping around (ggml's `ggml_roll`); each shift shorter
    /// than its dim.
    pub fn roll(&mut self, a: TensorId, shift: [i32; 4]) -> Result<TensorId> {
        const OP: &str = "ROLL";
        let d = self.expect_dtype(OP, a, &[DType::F32])?;
        if d.ne[0] > 1 && d.nb[0] != DType::F32.bytes_per_block() {
            return Err(op_err!(OP, "the rows of {} must be dense", self.describe(a)));
        }
        if (0..4).any(|i| shift[i] != 0 && shift[i].unsigned_abs() as usize >= d.ne[i]) {
            return Err(op_err!(OP, "shifts {shift:?} must be shorter than the dims of {}", self.describe(a)));
        }
        self.push_op(DType::F32, d.ne, Op::Roll { shift }, &[a])
    }
}

#[cfg(test)]
mod tests {
    use crate::{Context, DType, Error};

    #[test]
    fn shapes_and_errors() {
        let mut ctx = Context::new();
        let a = ctx.tensor(DType::F32, [4, 3, 2]).unwrap();
        let p = ctx.pad_ext(a, [1, 0, 2, 0], [2, 1, 0, 3]).unwrap();
        assert_eq!(ctx.desc(p).unwrap().ne, [7, 4, 4, 4]);
        let r = ctx.pad_reflect_1d(a, 3, 2).unwrap();
        assert_eq!(ctx.desc(r).unwrap().ne, [9, 3, 2, 1]);
        assert!(matches!(ctx.pad_reflect_1d(a, 4, 0), Err(Error::InvalidOp { op: "PAD_REFLECT_1D", .. })));
        let t = ctx.transpose(a).unwrap();
        assert!(ctx.pad_reflect_1d(t, 1, 1).is_err());
        assert!(ctx.roll(a, [-3, 2, 1, 0]).is_ok());
        assert!(matches!(ctx.roll(a, [4, 0, 0, 0]), Err(Error::InvalidOp { op: "ROLL", .. })));
        assert!(ctx.roll(t, [1, 0, 0, 0]).is_err());
        // Zeros around nothing are zeros; nothing wraps around nothing.
        let empty = ctx.tensor(DType::F32, [0, 3]).unwrap();
        let padded = ctx.pad(empty, [2, 0, 0, 0]).unwrap();
        assert_eq!(ctx.desc(padded).unwrap().ne, [2, 3, 1, 1]);
        assert!(ctx.pad_ext_circular(empty, [2, 0, 0, 0], [0; 4]).is_err());
        let h = ctx.tensor(DType::F16, [4]).unwrap();
        assert!(matches!(ctx.pad(h, [1, 0, 0, 0]), Err(Error::InvalidOp { op: "PAD", .. })));
    }
}
