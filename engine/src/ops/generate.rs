//! Ops that make values rather than transform them: ARANGE (a range, no
//! sources) and TIMESTEP_EMBEDDING (diffusion models' sinusoidal
//! embeddings of timesteps).

use gantry_arenas::TensorId;

use crate::{Context, DType, Op, Result, op_err};

/// ARANGE's length, `ceil((stop - start) / step)` in f32 as ggml computes it.
pub fn arange_len(start: f32, stop: f32, step: f32) -> Option<usize> {
    let n = ((stop - start) / step).ceil();
    (start.is_finite() && stop.is_finite() && step.is_finite() && stop > start && n >= 1.0 && n < u32::MAX as f32)
        .then_some(n as usize)
}

impl Context {
    /// The F32 values `start + step * i` for `i` in `0..ceil((stop -
    /// start) / step)` (ggml's `ggml_arange`; `stop > start`, `step > 0`).
    ///
    /// ```
    /// use gantry_engine::Context;
    /// let mut ctx = Context::new();
    /// let r = ctx.arange(0.0, 5.0, 2.0)?;
    /// assert_eq!(ctx.desc(r)?.ne, [3, 1, 1, 1]);
    /// # Ok::<(), gantry_engine::Error>(())
    /// ```
    pub fn arange(&mut self, start: f32, stop: f32, step: f32) -> Result<TensorId> {
        let n = arange_len(start, stop, step).ok_or_else(|| {
            op_err!("ARANGE", "start {start}, stop {stop} and step {step} give no finite, non-empty range")
        })?;
        self.push_op(DType::F32, [n, 1, 1, 1], Op::Arange { start, stop, step }, &[])
    }

    /// Sinusoidal embeddings of the F32 vector of timesteps `t` (ggml's
    /// `ggml_timestep_embedding`): F32 `[dim, n]`, row `i` holding `cos(t_i
    /// f_j)` for `j < dim / 2` then `sin(t_i f_j)`, with `f_j =
    /// max_period^(-j / (dim / 2))`, and a final 0 when `dim` is odd.
    pub fn timestep_embedding(&mut self, t: TensorId, dim: u32, max_period: i32) -> Result<TensorId> {
        const OP: &str = "TIMESTEP_EMBEDDING";
        let d = self.expect_dtype(OP, t, &[DType::F32])?;
        if d.ne[1] != 1 || d.ne[2] != 1 || d.ne[3] != 1 {
            return Err(op_err!(OP, "the timesteps {} must be a vector", self.describe(t)));
        }
        if max_period <= 0 {
            return Err(op_err!(OP, "max_period {max_period} for {} must be positive", self.describe(t)));
        }
        self.push_op(DType::F32, [dim as usize, d.ne[0], 1, 1], Op::TimestepEmbedding { dim, max_period }, &[t])
    }
}

#[cfg(test)]
mod tests {
    use crate::{Context, DType, Error};

    #[test]
    fn shapes_and_errors() {
        let mut ctx = Context::new();
        let r = ctx.arange(-1.0, 1.0, 0.3).unwrap();
        assert_eq!(ctx.desc(r).unwrap().ne, [7, 1, 1, 1]);
        assert!(matches!(ctx.arange(1.0, 1.0, 1.0), Err(Error::InvalidOp { op: "ARANGE", .. })));
        assert!(ctx.arange(0.0, 1.0, -1.0).is_err());
        assert!(ctx.arange(0.0, f32::INFINITY, 1.0).is_err());
        let t = ctx.tensor(DType::F32, [5]).unwrap();
        let e = ctx.timestep_embedding(t, 9, 10000).unwrap();
        assert_eq!(ctx.desc(e).unwrap().ne, [9, 5, 1, 1]);
        let m = ctx.tensor(DType::F32, [5, 2]).unwrap();
        assert!(matches!(ctx.timestep_embedding(m, 8, 10000), Err(Error::InvalidOp { op: "TIMESTEP_EMBEDDING", .. })));
        assert!(ctx.timestep_embedding(t, 8, 0).is_err());
    }
}
