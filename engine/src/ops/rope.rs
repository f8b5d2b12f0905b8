//! Rotary position embedding: ROPE.

use gantry_arenas::TensorId;

use crate::{Context, DType, Op, Result, RopeParams, op_err};

impl Context {
    /// Rotates the first `params.n_dims` dimensions of each row of `a`
    /// (`[head_dim, n_head, n_tokens, ne3]`) by angles `pos * theta_i`, with
    /// `pos` an I32 vector of `n_tokens` positions and optional F32 frequency
    /// factors (`theta_i / freq_factors[i]`, at least `n_dims / 2` of them).
    pub fn rope(
        &mut self,
        a: TensorId,
        pos: TensorId,
        freq_factors: Option<TensorId>,
        params: RopeParams,
    ) -> Result<TensorId> {
        self.rope_impl(a, pos, freq_factors, params, false)
    }

    /// [`Context::rope`] writing into `a`.
    pub fn rope_inplace(
        &mut self,
        a: TensorId,
        pos: TensorId,
        freq_factors: Option<TensorId>,
        params: RopeParams,
    ) -> Result<TensorId> {
        self.rope_impl(a, pos, freq_factors, params, true)
    }

    fn rope_impl(
        &mut self,
        a: TensorId,
        pos: TensorId,
        freq_factors: Option<TensorId>,
        p: RopeParams,
        inplace: bool,
    ) -> Result<TensorId> {
        const OP: &str = "ROPE";
        let d = self.expect_dtype(OP, a, &[DType::F32, DType::F16])?;
        let dp = self.expect_dtype(OP, pos, &[DType::I32])?;
        if dp.n_dims() != 1 || dp.ne[0] != d.ne[2] {
            return Err(op_err!(
                OP,
                "positions {} must be a vector of {} (ne[2] of {})",
                self.describe(pos),
                d.ne[2],
                self.describe(a)
            ));
        }
        if p.n_dims == 0 || !p.n_dims.is_multiple_of(2) || p.n_dims > d.ne[0] {
            return Err(op_err!(
                OP,
                "n_dims {} must be even, positive and at most the row length of {}",
                p.n_dims,
                self.describe(a)
            ));
        }
        if !(p.freq_base > 0.0 && p.freq_base.is_finite()) {
            return Err(op_err!(OP, "freq_base {} must be positive", p.freq_base));
        }
        let mut srcs = [a, pos, pos];
        let mut n = 2;
        if let Some(ff) = freq_factors {
            let df = self.expect_dtype(OP, ff, &[DType::F32])?;
            if df.ne[0] < p.n_dims / 2 {
                return Err(op_err!(
                    OP,
                    "frequency factors {} need at least {} values",
                    self.describe(ff),
                    p.n_dims / 2
                ));
            }
            srcs[2] = ff;
            n = 3;
        }
        self.result_like(a, Op::Rope(p), &srcs[..n], inplace)
    }
}
