//! A projection `W x (+ b)`.

use gantry_engine::{Context, TensorId};

use crate::Result;

/// `weight · x`, plus `bias` when the model has one. `weight` is
/// `[in, out]` (ggml order), `x` `[in, ...]`, the result `[out, ...]`.
pub fn linear(ctx: &mut Context, weight: TensorId, bias: Option<TensorId>, x: TensorId) -> Result<TensorId> {
    let y = ctx.mul_mat(weight, x)?;
    Ok(match bias {
        Some(b) => ctx.add(y, b)?,
        None => y,
    })
}
