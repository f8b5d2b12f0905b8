//! Feed-forward networks: gated (SwiGLU for llama, GeGLU for Gemma) or
//! plain with an activation (GELU for BERT), projections with optional biases.

use gantry_engine::{Context, TensorId};

use super::linear;
use crate::Result;

/// Which feed-forward network a model uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FeedForwardKind {
    /// `down(silu(gate x) * up x)`.
    Swiglu,
    /// `down(gelu_tanh(gate x) * up x)`.
    Geglu,
    /// `down(gelu_erf(up x))`, exact GELU (BERT).
    Gelu,
}

impl FeedForwardKind {
    /// Whether the network has a gate projection.
    pub fn is_gated(self) -> bool {
        matches!(self, Self::Swiglu | Self::Geglu)
    }
}

/// One feed-forward network's weights.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FeedForward {
    /// The kind.
    pub kind: FeedForwardKind,
    /// Gate projection `[n_embd, n_ff]` (gated kinds); `None` for a gated
    /// kind means the gate's rows are stacked into `up` (Phi 3).
    pub gate: Option<TensorId>,
    /// Up projection `[n_embd, n_ff]`, or `[n_embd, 2 n_ff]` with the gate's
    /// rows first when a gated kind has no `gate`.
    pub up: TensorId,
    /// Up projection's bias `[n_ff]`.
    pub up_bias: Option<TensorId>,
    /// Down projection `[n_ff, n_embd]`.
    pub down: TensorId,
    /// Down projection's bias `[n_embd]`.
    pub down_bias: Option<TensorId>,
}

/// The network applied to `x` (`[n_embd, n_tokens]`).
pub fn feed_forward(ctx: &mut Context, ffn: &FeedForward, x: TensorId) -> Result<TensorId> {
    let up = linear(ctx, ffn.up, ffn.up_bias, x)?;
    let act = match (ffn.kind, ffn.gate) {
        (FeedForwardKind::Gelu, _) => ctx.gelu_erf(up)?,
        (kind, Some(gate)) => {
            let gate = ctx.mul_mat(gate, x)?;
            match kind {
                FeedForwardKind::Swiglu => ctx.swiglu_split(gate, up)?,
                _ => ctx.geglu_split(gate, up)?,
            }
        }
        // One product gives gate and up stacked: the activation of the
        // first half times the second (ggml's single-input SWIGLU / GEGLU).
        (FeedForwardKind::Swiglu, None) => ctx.swiglu(up)?,
        (FeedForwardKind::Geglu, None) => ctx.geglu(up)?,
    };
    linear(ctx, ffn.down, ffn.down_bias, act)
}
