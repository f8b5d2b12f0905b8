//! Ops that keep part of a tensor or make one of a constant: FILL, TRI,
//! DIAG, DIAG_MASK_ZERO; and SET and ACC, which write or add a tensor
//! into a byte-addressed view of a copy of another.

use gantry_arenas::TensorId;

use crate::tensor::TensorLayout;
use crate::{Context, DType, Op, Result, TriType, op_err};

impl Context {
    /// A tensor of `a`'s shape (F32 or F16, contiguous) filled with `c`
    /// (ggml's `ggml_fill`; `a`'s values are not read).
    pub fn fill(&mut self, a: TensorId, c: f32) -> Result<TensorId> {
        let d = self.expect_dtype("FILL", a, &[DType::F32, DType::F16])?;
        self.expect_contiguous("FILL", a, &d)?;
        self.result_like(a, Op::Fill { c }, &[a], false)
    }

    /// The triangle `kind` of each square matrix of the contiguous F32
    /// `a`, zeros elsewhere (ggml's `ggml_tri`).
    pub fn tri(&mut self, a: TensorId, kind: TriType) -> Result<TensorId> {
        const OP: &str = "TRI";
        let d = self.expect_dtype(OP, a, &[DType::F32])?;
        self.expect_contiguous(OP, a, &d)?;
        if d.ne[0] != d.ne[1] {
            return Err(op_err!(OP, "the matrices of {} must be square", self.describe(a)));
        }
        self.result_like(a, Op::Tri(kind), &[a], false)
    }

    /// Each row of the F32 `a` (`[n, 1, ne2, ne3]`, rows dense) as the
    /// diagonal of an `[n, n]` matrix (ggml's `ggml_diag`).
    pub fn diag(&mut self, a: TensorId) -> Result<TensorId> {
        const OP: &str = "DIAG";
        let d = self.expect_dtype(OP, a, &[DType::F32])?;
        if d.ne[1] != 1 || (d.ne[0] > 1 && d.nb[0] != DType::F32.bytes_per_block()) {
            return Err(op_err!(OP, "{} must be [n, 1, ...] with dense rows", self.describe(a)));
        }
        self.push_op(DType::F32, [d.ne[0], d.ne[0], d.ne[2], d.ne[3]], Op::Diag, &[a])
    }

    /// `a` (F32) with `a[j, i] = 0` for columns `j > n_past + i` of each
    /// row `i` (ggml's `ggml_diag_mask_zero`).
    pub fn diag_mask_zero(&mut self, a: TensorId, n_past: usize) -> Result<TensorId> {
        self.expect_dtype("DIAG_MASK_ZERO", a, &[DType::F32])?;
        self.result_like(a, Op::DiagMaskZero { n_past }, &[a], false)
    }

    /// A copy of `a` (contiguous) with `b` written over the view of `b`'s
    /// shape at byte `offset` with row strides `nb` (ggml's `ggml_set`; F32
    /// or I32, one dtype).
    pub fn set(&mut self, a: TensorId, b: TensorId, nb: [usize; 3], offset: usize) -> Result<TensorId> {
        self.set_acc(a, b, Op::Set { nb, offset }, &[DType::F32, DType::I32])
    }

    /// [`Context::set`] of a 1-D `b` at byte `offset` (ggml's `ggml_set_1d`).
    pub fn set_1d(&mut self, a: TensorId, b: TensorId, offset: usize) -> Result<TensorId> {
        let d = self.src("SET", a)?;
        self.set(a, b, [d.nb[1], d.nb[2], d.nb[3]], offset)
    }

    /// A copy of the F32 `a` (contiguous) with the F32 `b` added to the view
    /// of `b`'s shape at byte `offset` with row strides `nb` (ggml's `ggml_acc`).
    pub fn acc(&mut self, a: TensorId, b: TensorId, nb: [usize; 3], offset: usize) -> Result<TensorId> {
        self.set_acc(a, b, Op::Acc { nb, offset }, &[DType::F32])
    }

    fn set_acc(&mut self, a: TensorId, b: TensorId, op: Op, dtypes: &[DType]) -> Result<TensorId> {
        let name = op.name();
        let (Op::Set { nb, offset } | Op::Acc { nb, offset }) = op else {
            return Err(op_err!(name, "not SET or ACC"));
        };
        let da = self.expect_dtype(name, a, dtypes)?;
        self.expect_contiguous(name, a, &da)?;
        let db = self.expect_dtype(name, b, &[da.dtype])?;
        let es = da.dtype.bytes_per_block();
        let view = TensorLayout { dtype: da.dtype, ne: db.ne, nb: [es, nb[0], nb[1], nb[2]] };
        // The view must be whole elements inside `a`, none of them twice
        // (each is written once, by one thread).
        let end = (0..4)
            .try_fold(offset.checked_add(es), |acc, i| {
                Some(acc?.checked_add(db.ne[i].checked_sub(1)?.checked_mul(view.nb[i])?))
            })
            .flatten();
        let fits = db.nelements() == 0 || end.is_some_and(|e| e <= da.nbytes());
        if !fits || !offset.is_multiple_of(es) || nb.iter().any(|s| !s.is_multiple_of(es)) || view.overlaps_itself() {
            return Err(op_err!(
                name,
                "{} does not fit {} as a view of whole, distinct elements at byte {offset} with strides {nb:?}",
                self.describe(b),
                self.describe(a)
            ));
        }
        self.result_like(a, op, &[a, b], false)
    }
}

#[cfg(test)]
mod tests {
    use crate::{Context, DType, Error, TriType};

    #[test]
    fn shapes_and_errors() {
        let mut ctx = Context::new();
        let a = ctx.tensor(DType::F32, [4, 4, 2]).unwrap();
        assert!(ctx.tri(a, TriType::Lower).is_ok());
        let r = ctx.tensor(DType::F32, [4, 3]).unwrap();
        assert!(matches!(ctx.tri(r, TriType::Upper), Err(Error::InvalidOp { op: "TRI", .. })));
        let v = ctx.tensor(DType::F32, [5, 1, 3]).unwrap();
        let dg = ctx.diag(v).unwrap();
        assert_eq!(ctx.desc(dg).unwrap().ne, [5, 5, 3, 1]);
        assert!(ctx.diag(r).is_err());
        let h = ctx.tensor(DType::F16, [3, 2]).unwrap();
        assert!(ctx.fill(h, 2.0).is_ok());
        let i = ctx.tensor(DType::I32, [3, 2]).unwrap();
        assert!(matches!(ctx.fill(i, 2.0), Err(Error::InvalidOp { op: "FILL", .. })));
        // SET / ACC: the view must lie inside `a`, in whole distinct elements.
        let b = ctx.tensor(DType::F32, [2, 2]).unwrap();
        assert!(ctx.acc(a, b, [16, 32, 128], 8).is_ok());
        assert!(ctx.set(a, b, [16, 32, 128], 104).is_ok());
        assert!(ctx.set(a, b, [16, 32, 128], 108).is_err());
        assert!(matches!(ctx.acc(a, b, [16, 32, 128], 128), Err(Error::InvalidOp { op: "ACC", .. })));
        assert!(ctx.set(a, b, [16, 32, 128], 2).is_err());
        assert!(ctx.set(a, b, [4, 32, 128], 0).is_err());
        assert!(ctx.set(a, i, [16, 32, 128], 0).is_err());
        let ai = ctx.tensor(DType::I32, [4, 4]).unwrap();
        let bi = ctx.tensor(DType::I32, [3]).unwrap();
        assert!(ctx.set_1d(ai, bi, 4).is_ok());
        assert!(ctx.acc(ai, bi, [16, 64, 64], 0).is_err());
    }
}
