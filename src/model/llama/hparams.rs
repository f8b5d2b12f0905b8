//! Llama-family hyperparameters.

use crate::Error;

/// The shape of a llama-family model.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LlamaHparams {
    /// Vocabulary size.
    pub n_vocab: usize,
    /// Width of the residual stream.
    pub n_embd: usize,
    /// Number of transformer blocks.
    pub n_layer: usize,
    /// Query heads.
    pub n_head: usize,
    /// Key/value heads (grouped-query attention when fewer than `n_head`).
    pub n_head_kv: usize,
    /// Width of each head.
    pub head_dim: usize,
    /// Hidden width of the feed-forward network.
    pub n_ff: usize,
    /// RMS norm epsilon.
    pub rms_eps: f32,
    /// Rope frequency base.
    pub rope_base: f32,
    /// Rope position scale (1 = none).
    pub rope_freq_scale: f32,
    /// Context length the model was trained with.
    pub n_ctx_train: usize,
}

impl LlamaHparams {
    /// SmolLM2-135M's shape (the default workload and the benches use it).
    pub const SMOLLM2_135M: Self = Self {
        n_vocab: 49152,
        n_embd: 576,
        n_layer: 30,
        n_head: 9,
        n_head_kv: 3,
        head_dim: 64,
        n_ff: 1536,
        rms_eps: 1e-5,
        rope_base: 100000.0,
        rope_freq_scale: 1.0,
        n_ctx_train: 8192,
    };

    /// Checks that the numbers fit together.
    pub fn validate(&self) -> Result<(), Error> {
        let bad = |what: &str| Err(Error::Model(format!("invalid llama hyperparameters: {what} ({self:?})")));
        if [self.n_vocab, self.n_embd, self.n_layer, self.n_head, self.n_head_kv, self.head_dim, self.n_ff].contains(&0)
        {
            return bad("a size is zero");
        }
        if self.n_head % self.n_head_kv != 0 {
            return bad("n_head is not a multiple of n_head_kv");
        }
        if self.head_dim % 2 != 0 {
            return bad("head_dim is odd");
        }
        if !(self.rms_eps > 0.0 && self.rope_base > 0.0 && self.rope_freq_scale > 0.0) {
            return bad("rms_eps, rope base and rope scale must be positive");
        }
        Ok(())
    }
}
