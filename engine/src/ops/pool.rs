//! Resampling: POOL_1D, POOL_2D (max and average over windows) and
//! UPSCALE (nearest and bilinear interpolation to a given shape).

use gantry_arenas::TensorId;

use crate::{Context, DType, Op, PoolOp, Result, ScaleMode, op_err};

/// ggml's `ggml_calc_pool_output_size`, `None` where ggml's assertion
/// fails: a window longer than the padded input.
fn pool_out(input: usize, k: u32, s: u32, p: u32) -> Option<usize> {
    let padded = input.checked_add(2 * p as usize)?;
    (s > 0 && k > 0 && padded >= k as usize).then(|| (padded - k as usize) / s as usize + 1)
}

impl Context {
    /// Pooling along dim 0 (ggml's `ggml_pool_1d`): windows of `k`
    /// elements every `s`, `p` elements of padding at each end; `a` F32 or
    /// F16, the result F32 `[(ne0 + 2p - k) / s + 1, ne1, ne2, ne3]`.
    /// Average divides by the window's elements inside the input.
    pub fn pool_1d(&mut self, a: TensorId, op: PoolOp, k: u32, s: u32, p: u32) -> Result<TensorId> {
        const OP: &str = "POOL_1D";
        let d = self.expect_dtype(OP, a, &[DType::F32, DType::F16])?;
        let n0 = pool_out(d.ne[0], k, s, p).ok_or_else(|| {
            op_err!(OP, "window {k} with stride {s} and padding {p} does not fit the rows of {}", self.describe(a))
        })?;
        self.push_op(DType::F32, [n0, d.ne[1], d.ne[2], d.ne[3]], Op::Pool1d { op, k, s, p }, &[a])
    }

    /// Pooling over dims 0 and 1 (ggml's `ggml_pool_2d`): windows of `k[0]
    /// × k[1]` every `s`, padding `p` on each side; `a` F32 or F16, the
    /// result F32. Average divides by the whole window, padding included.
    pub fn pool_2d(&mut self, a: TensorId, op: PoolOp, k: [u32; 2], s: [u32; 2], p: [u32; 2]) -> Result<TensorId> {
        const OP: &str = "POOL_2D";
        let d = self.expect_dtype(OP, a, &[DType::F32, DType::F16])?;
        let out = |i: usize| {
            pool_out(d.ne[i], k[i], s[i], p[i]).ok_or_else(|| {
                op_err!(OP, "window {k:?} with stride {s:?} and padding {p:?} does not fit {}", self.describe(a))
            })
        };
        let ne = [out(0)?, out(1)?, d.ne[2], d.ne[3]];
        self.push_op(DType::F32, ne, Op::Pool2d { op, k, s, p }, &[a])
    }

    /// `a` (F32) resampled to shape `ne` (ggml's `ggml_interpolate`):
    /// nearest along every dim, or bilinear along dims 0 and 1 (nearest
    /// along 2 and 3), optionally with the corners aligned.
    pub fn upscale_ext(
        &mut self,
        a: TensorId,
        ne: [usize; 4],
        mode: ScaleMode,
        align_corners: bool,
    ) -> Result<TensorId> {
        const OP: &str = "UPSCALE";
        self.expect_dtype(OP, a, &[DType::F32])?;
        if align_corners && mode != ScaleMode::Bilinear {
            return Err(op_err!(OP, "aligned corners need bilinear sampling ({})", self.describe(a)));
        }
        self.push_op(DType::F32, ne, Op::Upscale { mode, align_corners }, &[a])
    }

    /// `a` (F32) with dims 0 and 1 `factor` times longer (ggml's
    /// `ggml_upscale`, `factor` above 1).
    pub fn upscale(&mut self, a: TensorId, factor: usize, mode: ScaleMode) -> Result<TensorId> {
        let d = self.src("UPSCALE", a)?;
        if factor < 2 {
            return Err(op_err!("UPSCALE", "factor {factor} for {} must be above 1", self.describe(a)));
        }
        self.upscale_ext(a, [d.ne[0] * factor, d.ne[1] * factor, d.ne[2], d.ne[3]], mode, false)
    }
}

#[cfg(test)]
mod tests {
    use crate::{Context, DType, Error, PoolOp, ScaleMode};

    #[test]
    fn shapes_and_errors() {
        let mut ctx = Context::new();
        let a = ctx.tensor(DType::F16, [10, 7, 3]).unwrap();
        let p = ctx.pool_1d(a, PoolOp::Avg, 3, 2, 1).unwrap();
        assert_eq!((ctx.desc(p).unwrap().ne, ctx.desc(p).unwrap().dtype), ([5, 7, 3, 1], DType::F32));
        let p = ctx.pool_2d(a, PoolOp::Max, [2, 3], [2, 2], [0, 1]).unwrap();
        assert_eq!(ctx.desc(p).unwrap().ne, [5, 4, 3, 1]);
        assert!(matches!(ctx.pool_1d(a, PoolOp::Max, 13, 1, 1), Err(Error::InvalidOp { op: "POOL_1D", .. })));
        assert!(matches!(
            ctx.pool_2d(a, PoolOp::Max, [2, 2], [0, 1], [0, 0]),
            Err(Error::InvalidOp { op: "POOL_2D", .. })
        ));
        let f = ctx.tensor(DType::F32, [4, 3, 2]).unwrap();
        let u = ctx.upscale(f, 2, ScaleMode::Nearest).unwrap();
        assert_eq!(ctx.desc(u).unwrap().ne, [8, 6, 2, 1]);
        let u = ctx.upscale_ext(f, [3, 5, 4, 1], ScaleMode::Bilinear, true).unwrap();
        assert_eq!(ctx.desc(u).unwrap().ne, [3, 5, 4, 1]);
        assert!(ctx.upscale(f, 1, ScaleMode::Nearest).is_err());
        assert!(ctx.upscale_ext(f, [3, 5, 4, 1], ScaleMode::Nearest, true).is_err());
        assert!(matches!(ctx.upscale(a, 2, ScaleMode::Nearest), Err(Error::InvalidOp { op: "UPSCALE", .. })));
    }
}
