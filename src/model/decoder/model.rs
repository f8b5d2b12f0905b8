//! A decoder model read from a GGUF file: the family its
//! `general.architecture` names reads the hyperparameters, the shared
//! decoder takes the weights.

use std::path::Path;

use gantry_engine::{Context, Device};

use super::arch_keys::check_arch_keys;
use super::{DecoderHparams, DecoderWeights};
use crate::model::gguf::Gguf;
use crate::model::tokenizer::Tokenizer;
use crate::model::{
    DequantizedFile, LoadOptions, LoadProgress, LoadedWeights, gemma2, gemma3, gpt_oss, llama, load_tensors, phi3,
    qwen2, qwen3, qwen3moe,
};
use crate::{Error, Result};

/// The decoder families Gantry reads from GGUF files, by `general.architecture`.
pub const DECODER_ARCHITECTURES: [&str; 8] =
    ["llama", "qwen2", "qwen3", "qwen3moe", "phi3", "gemma2", "gemma3", "gpt-oss"];

/// A GGUF decoder model loaded into a context: hyperparameters, weights
/// (over the file mapping where the device can read it), and the tokenizer.
pub struct DecoderModel {
    /// The shape.
    pub hp: DecoderHparams,
    /// The weights by role.
    pub weights: DecoderWeights,
    /// The tokenizer from the file's metadata.
    pub tokenizer: Tokenizer,
    /// The loaded tensors and their buffers.
    pub loaded: LoadedWeights,
    /// The file (kept open: weights may point into its mapping).
    pub gguf: Gguf,
}

impl DecoderHparams {
    /// Reads the hyperparameters of a GGUF file of one of the
    /// [`DECODER_ARCHITECTURES`]; another architecture is an error naming the
    /// file and `general.architecture`. So is any `{arch}.*` key the family
    /// does not read, and any value of one it computes only in part (a rope
    /// scaling type the family does not implement, experts, partial rope): never a
    /// model computed without what its file says.
    pub fn from_gguf(gguf: &Gguf) -> Result<Self> {
        let (hp, family_keys) = match gguf.architecture()? {
            "llama" => (llama::hparams_from_gguf(gguf)?, llama::KEYS),
            "qwen2" => (qwen2::hparams_from_gguf(gguf)?, qwen2::KEYS),
            "qwen3" => (qwen3::hparams_from_gguf(gguf)?, qwen3::KEYS),
            "qwen3moe" => (qwen3moe::hparams_from_gguf(gguf)?, qwen3moe::KEYS),
            "phi3" => (phi3::hparams_from_gguf(gguf)?, phi3::KEYS),
            "gemma2" => (gemma2::hparams_from_gguf(gguf)?, gemma2::KEYS),
            "gemma3" => (gemma3::hparams_from_gguf(gguf)?, gemma3::KEYS),
            "gpt-oss" => (gpt_oss::hparams_from_gguf(gguf)?, gpt_oss::KEYS),
            other => {
                return Err(Error::InvalidModel {
                    file: gguf.source().to_owned(),
                    reason: format!(
                        "general.architecture {other:?} is not supported (supported: {})",
                        DECODER_ARCHITECTURES.join(", ")
                    ),
                });
            }
        };
        hp.validate().map_err(|e| Error::InvalidModel { file: gguf.source().to_owned(), reason: e.to_string() })?;
        check_arch_keys(gguf, &hp, family_keys)?;
        Ok(hp)
    }
}

impl DecoderModel {
    /// Opens `path`, reads the hyperparameters and tokenizer, and loads the
    /// weights into `ctx` for `device` (over the file mapping when the device
    /// can read host memory, else copied into its buffers). `progress` sees
    /// the bytes loaded. On error nothing is left in `ctx`.
    ///
    /// On a CPU device the weight matrices are repacked into the layout the
    /// CPU's quantized kernels read (see [`LoadOptions::repack`]; off
    /// through [`DecoderModel::load_with`], with options that may come from
    /// [`LoadOptions::from_env`]: `GANTRY_NO_REPACK=1`, as the `gantry`
    /// command does).
    pub fn load(
        path: impl AsRef<Path>,
        ctx: &mut Context,
        device: &dyn Device,
        progress: Option<&mut dyn FnMut(LoadProgress)>,
    ) -> Result<Self> {
        Self::load_with(path, ctx, device, default_options(progress))
    }

    /// [`DecoderModel::load`] with the loader's options as given. With
    /// `use_mmap` off the file is read into memory ([`Gguf::read`]) instead
    /// of mapped, and the weights are placed over those bytes where the
    /// device can read them (one copy, not two): a file truncated or
    /// rewritten while the model runs then changes nothing, where a mapped
    /// one kills the process with `SIGBUS`.
    pub fn load_with(
        path: impl AsRef<Path>,
        ctx: &mut Context,
        device: &dyn Device,
        options: LoadOptions<'_>,
    ) -> Result<Self> {
        Self::load_file(path.as_ref(), ctx, device, options, false)
    }

    /// [`DecoderModel::load`] with every weight dequantized to F32 first
    /// ([`DequantizedFile`]): the float forward over exactly the quantized
    /// file's weights, without the activations a quantized product rounds
    /// to 8 bits. Takes four times the memory of a 4-bit file or more.
    pub fn load_dequantized(
        path: impl AsRef<Path>,
        ctx: &mut Context,
        device: &dyn Device,
        progress: Option<&mut dyn FnMut(LoadProgress)>,
    ) -> Result<Self> {
        Self::load_dequantized_with(path, ctx, device, default_options(progress))
    }

    /// [`DecoderModel::load_dequantized`] with the loader's options as given:
    /// with `use_mmap` off the file is read into memory instead of mapped,
    /// as [`DecoderModel::load_with`] does, so the tensors that need no
    /// dequantizing (F32 ones, placed over the file's bytes) never read a
    /// mapping that may change underneath.
    pub fn load_dequantized_with(
        path: impl AsRef<Path>,
        ctx: &mut Context,
        device: &dyn Device,
        options: LoadOptions<'_>,
    ) -> Result<Self> {
        Self::load_file(path.as_ref(), ctx, device, options, true)
    }

    /// Opens the file (mapped, or read when `use_mmap` is off), checks its
    /// hyperparameters against its tokenizer, and loads its weights as they
    /// are or dequantized to F32.
    fn load_file(
        path: &Path,
        ctx: &mut Context,
        device: &dyn Device,
        options: LoadOptions<'_>,
        dequantized: bool,
    ) -> Result<Self> {
        let gguf = Gguf::open_with_limits(path, options.use_mmap, &options.limits)?;
        let hp = DecoderHparams::from_gguf(&gguf)?;
        let tokenizer = Tokenizer::from_gguf(&gguf)?;
        check_vocab(&gguf, &hp, &tokenizer)?;
        // The bytes are the process's own now: lending them is safe.
        let options = LoadOptions { use_mmap: true, ..options };
        let loaded = if dequantized {
            load_tensors(&DequantizedFile::new(&gguf)?, ctx, device, options)?
        } else {
            load_tensors(&gguf, ctx, device, options)?
        };
        Self::assemble(hp, tokenizer, loaded, gguf, ctx)
    }

    /// The weights by role from the loaded tensors; on error the tensors are unloaded.
    fn assemble(
        hp: DecoderHparams,
        tokenizer: Tokenizer,
        loaded: LoadedWeights,
        gguf: Gguf,
        ctx: &mut Context,
    ) -> Result<Self> {
        let names = loaded.iter().map(|(n, t)| (n.to_owned(), t)).collect();
        let weights = DecoderWeights::from_names(ctx, gguf.source(), &names, &hp)
            .and_then(|w| check_rope_factors(ctx, gguf.source(), &w).map(|()| w));
        match weights {
            Ok(weights) => Ok(Self { hp, weights, tokenizer, loaded, gguf }),
            Err(e) => {
                loaded.unload(ctx);
                Err(e)
            }
        }
    }
}

/// The loader's defaults for a decoder: tensors too large for one of the
/// device's buffers (a big vocabulary's embeddings on a GPU that caps
/// buffers) stay in host memory, as llama.cpp keeps its input layer on the CPU.
fn default_options(progress: Option<&mut dyn FnMut(LoadProgress)>) -> LoadOptions<'_> {
    LoadOptions { progress, oversize: Some(gantry_backends::cpu::buffer_type()), ..LoadOptions::default() }
}

/// An error naming the file and the value unless every rope frequency factor
/// (`rope_freqs.weight`, Llama 3's) is finite and above zero, as the rope
/// keys must be: a NaN or zero factor turned every head's scores to NaN.
fn check_rope_factors(ctx: &Context, file: &str, w: &DecoderWeights) -> Result<()> {
    let Some(t) = w.rope_freqs else { return Ok(()) };
    let factors = ctx.read_f32(t)?;
    match factors.iter().enumerate().find(|(_, f)| !(f.is_finite() && **f > 0.0)) {
        Some((i, f)) => Err(Error::InvalidModel {
            file: file.to_owned(),
            reason: format!("rope_freqs.weight[{i}] = {f}: rope frequency factors must be finite and above zero"),
        }),
        None => Ok(()),
    }
}

/// An error naming the file unless the tokenizer has a token per embedding
/// row, and naming where the model's vocabulary size came from: the
/// `{arch}.vocab_size` key when the file has one, else the rows of
/// `token_embd.weight`.
fn check_vocab(gguf: &Gguf, hp: &DecoderHparams, tokenizer: &Tokenizer) -> Result<()> {
    if tokenizer.n_vocab() != hp.n_vocab {
        let key = gguf.arch_key("vocab_size")?;
        let size = match gguf.get(&key) {
            Some(_) => format!("{key} = {}", hp.n_vocab),
            None => format!("token_embd.weight has {} rows", hp.n_vocab),
        };
        return Err(Error::InvalidModel {
            file: gguf.source().to_owned(),
            reason: format!("tokenizer.ggml.tokens has {} tokens but {size}", tokenizer.n_vocab()),
        });
    }
    Ok(())
}
