//! Rotary position embeddings as a model configures them.

use gantry_engine::{Context, RopeMode, RopeParams, TensorId};

use crate::Result;

/// How one layer rotates its queries and keys.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RopeSpec {
    /// Pairing of rotated dimensions: adjacent (llama) or half a head apart (Gemma, GPT-NeoX).
    pub mode: RopeMode,
    /// Leading dimensions of each head rotated.
    pub n_dims: usize,
    /// Frequency base.
    pub base: f32,
    /// Position scale (1 = none).
    pub freq_scale: f32,
    /// Context length the model was trained with (before YaRN's extension).
    pub n_ctx_orig: usize,
    /// YaRN's extrapolation mix (0 = no YaRN).
    pub ext_factor: f32,
    /// Multiplies the rotated values (YaRN adds its own magnitude scale).
    pub attn_factor: f32,
}

impl RopeSpec {
    /// The op's parameters.
    pub fn params(&self) -> RopeParams {
        RopeParams {
            n_ctx_orig: self.n_ctx_orig,
            freq_scale: self.freq_scale,
            ext_factor: self.ext_factor,
            attn_factor: self.attn_factor,
            ..RopeParams::new(self.n_dims, self.mode, self.base)
        }
    }

    /// Rotates `x` (`[head_dim, n_head, n_tokens]`) at the I32 `positions`;
    /// `factors` (F32 `[n_dims / 2]`), where given, divide each pair's frequency.
    pub fn apply(
        &self,
        ctx: &mut Context,
        x: TensorId,
        positions: TensorId,
        factors: Option<TensorId>,
    ) -> Result<TensorId> {
        Ok(ctx.rope(x, positions, factors, self.params())?)
    }
}
