//! A llama-family model read from a GGUF file.

use std::path::Path;

use gantry_engine::{Context, Device};

use super::{LlamaHparams, LlamaWeights};
use crate::model::gguf::Gguf;
use crate::model::tokenizer::Tokenizer;
use crate::model::{LoadOptions, LoadProgress, LoadedWeights, load_tensors};
use crate::{Error, Result};

/// A GGUF llama-family model loaded into a context: hyperparameters, weights
/// (over the file mapping where the device can read it), and the tokenizer.
pub struct LlamaModel {
    /// The shape.
    pub hp: LlamaHparams,
    /// The weights by role.
    pub weights: LlamaWeights,
    /// The tokenizer from the file's metadata.
    pub tokenizer: Tokenizer,
    /// The loaded tensors and their buffers.
    pub loaded: LoadedWeights,
    /// The file (kept open: weights may point into its mapping).
    pub gguf: Gguf,
}

impl LlamaHparams {
    /// Reads the hyperparameters of a `llama` GGUF file.
    pub fn from_gguf(gguf: &Gguf) -> Result<Self> {
        let arch = gguf.architecture()?;
        if arch != "llama" {
            return Err(Error::Model(format!(
                "{}: architecture {arch:?} is not supported (supported: llama)",
                gguf.source()
            )));
        }
        let n_embd: u32 = gguf.get_arch("embedding_length")?;
        let n_head: u32 = gguf.get_arch("attention.head_count")?;
        let n_head_kv: u32 = gguf.get_arch_opt("attention.head_count_kv")?.unwrap_or(n_head);
        let head_dim: u32 = match gguf.get_arch_opt("attention.key_length")? {
            Some(d) => d,
            None if n_head > 0 => n_embd / n_head,
            None => 0,
        };
        let n_vocab = match gguf.get_arch_opt::<u32>("vocab_size")? {
            Some(n) => n as usize,
            None => gguf.tensor("token_embd.weight")?.dims().get(1).copied().unwrap_or(0),
        };
        let hp = Self {
            n_vocab,
            n_embd: n_embd as usize,
            n_layer: gguf.get_arch::<u32>("block_count")? as usize,
            n_head: n_head as usize,
            n_head_kv: n_head_kv as usize,
            head_dim: head_dim as usize,
            n_ff: gguf.get_arch::<u32>("feed_forward_length")? as usize,
            rms_eps: gguf.get_arch("attention.layer_norm_rms_epsilon")?,
            rope_base: gguf.get_arch_opt("rope.freq_base")?.unwrap_or(10000.0),
            rope_freq_scale: gguf.get_arch_opt::<f32>("rope.scaling.factor")?.map_or(1.0, |f| 1.0 / f),
            n_ctx_train: gguf.get_arch_opt::<u32>("context_length")?.unwrap_or(2048) as usize,
        };
        hp.validate()?;
        Ok(hp)
    }
}

impl LlamaModel {
    /// Opens `path`, reads the hyperparameters and tokenizer, and loads the
    /// weights into `ctx` for `device` (over the file mapping when the device
    /// can read host memory, else copied into its buffers). `progress` sees
    /// the bytes loaded.
    pub fn load(
        path: impl AsRef<Path>,
        ctx: &mut Context,
        device: &dyn Device,
        progress: Option<&mut dyn FnMut(LoadProgress)>,
    ) -> Result<Self> {
        let gguf = Gguf::open(path.as_ref())?;
        let hp = LlamaHparams::from_gguf(&gguf)?;
        let tokenizer = Tokenizer::from_gguf(&gguf)?;
        if tokenizer.n_vocab() != hp.n_vocab {
            return Err(Error::Model(format!(
                "{}: the tokenizer has {} tokens but the embeddings {}",
                gguf.source(),
                tokenizer.n_vocab(),
                hp.n_vocab
            )));
        }
        let loaded = load_tensors(&gguf, ctx, device, LoadOptions { use_mmap: true, progress })?;
        let names = loaded.iter().map(|(n, t)| (n.to_owned(), t)).collect();
        let weights = LlamaWeights::from_names(ctx, &names, &hp)?;
        Ok(Self { hp, weights, tokenizer, loaded, gguf })
    }
}
