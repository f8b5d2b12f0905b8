//! Graph builders: one `impl Context` block per family of ops. Each builder
//! infers the result's shape and dtype and validates its inputs the way ggml
//! does, returning an error that names the op and its tensors instead of
//! asserting.

mod attention;
mod conv;
mod delta_net;
mod elementwise;
mod experts;
mod generate;
mod layout;
mod linear_attn;
mod masks;
mod matmul;
mod norm;
mod pad;
mod pool;
mod reduce;
mod rel_pos;
mod rope;
mod rows;
mod solve_tri;
mod sort;
mod ssm;
mod window;

pub use generate::arange_len;

use gantry_arenas::TensorId;

use crate::{Context, DType, Error, Result, TensorDesc};

impl Context {
    /// The description of `t`, copied, for validation.
    pub(crate) fn src(&self, op: &'static str, t: TensorId) -> Result<TensorDesc> {
        self.desc(t).copied().map_err(|_| Error::InvalidOp { op, reason: format!("source {t:?} is a stale tensor id") })
    }

    pub(crate) fn expect_dtype(&self, op: &'static str, t: TensorId, allowed: &[DType]) -> Result<TensorDesc> {
        let d = self.src(op, t)?;
        if !allowed.contains(&d.dtype) {
            let names: Vec<&str> = allowed.iter().map(|t| t.name()).collect();
            return Err(Error::InvalidOp {
                op,
                reason: format!("{} has dtype {}, expected one of {}", self.describe(t), d.dtype, names.join(", ")),
            });
        }
        Ok(d)
    }

    pub(crate) fn expect_contiguous_rows(&self, op: &'static str, t: TensorId, d: &TensorDesc) -> Result<()> {
        if d.is_contiguous_rows() {
            Ok(())
        } else {
            Err(Error::InvalidOp { op, reason: format!("{} must have contiguous rows", self.describe(t)) })
        }
    }

    pub(crate) fn expect_contiguous(&self, op: &'static str, t: TensorId, d: &TensorDesc) -> Result<()> {
        if d.is_contiguous() {
            Ok(())
        } else {
            Err(Error::InvalidOp { op, reason: format!("{} must be contiguous", self.describe(t)) })
        }
    }
}

/// Float dtypes computed element by element.
pub(crate) const FLOATS: &[DType] = &[DType::F32, DType::F16, DType::BF16];
