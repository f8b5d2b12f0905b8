//! Normalizations over each row: RMS norm (llama), RMS norm scaled by
//! `1 + w` (Gemma's checkpoints store `w`), and LayerNorm with a bias (BERT).

use gantry_engine::{Context, TensorId};

use crate::Result;

/// Which normalization a model uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NormKind {
    /// `x / rms(x) * w`.
    Rms,
    /// `x / rms(x) * (1 + w)`: weights stored as offsets from one (Gemma's
    /// safetensors; its GGUF files have the one added already and use [`NormKind::Rms`]).
    RmsUnitOffset,
    /// `(x - mean) / std(x) * w + b`.
    Layer,
}

/// One normalization's weights.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Norm {
    /// The kind.
    pub kind: NormKind,
    /// Scale, `[width]`.
    pub weight: TensorId,
    /// Bias, `[width]` (LayerNorm).
    pub bias: Option<TensorId>,
    /// Added to the variance or mean square.
    pub eps: f32,
}

/// Normalizes each row of `x` (dimension 0) with `norm`.
pub fn normalize(ctx: &mut Context, x: TensorId, norm: &Norm) -> Result<TensorId> {
    let cur = match norm.kind {
        NormKind::Rms | NormKind::RmsUnitOffset => ctx.rms_norm(x, norm.eps)?,
        NormKind::Layer => ctx.norm(x, norm.eps)?,
    };
    let scaled = ctx.mul(cur, norm.weight)?;
    let scaled = match norm.kind {
        // cur * (1 + w) = cur * w + cur: no tensor of ones needed.
        NormKind::RmsUnitOffset => ctx.add(scaled, cur)?,
        NormKind::Rms | NormKind::Layer => scaled,
    };
    Ok(match norm.bias {
        Some(b) => ctx.add(scaled, b)?,
        None => scaled,
    })
}
