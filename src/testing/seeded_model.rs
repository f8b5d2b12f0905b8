//! Seeded random-weight GGUF files of each decoder family, in llama.cpp's
//! layout for it (tensor names, metadata keys), written with Gantry's own
//! GGUF writer and quantizer. llama.cpp's logits on the same files are
//! stored under `tests/data/families/` (`tests/data/scripts/family_logits_llamacpp.py`),
//! so a family is checked against an independent engine without downloading
//! a model. The same `SeededModel` always gives the same bytes.
//!
//! Weights are scaled so that every part visibly moves the logits: biases,
//! Q/K norms, rope factors, soft-caps, windows and experts' routers far
//! from neutral, the logits spread over several nats.
//! [`SeededModel::neutral`] writes one part neutral instead (biases and
//! routers zero, norms and factors one), to show that the comparison would
//! catch an engine that ignored it.

use gantry_engine::{DType, SplitMix64, quant::quantize_row};

use crate::model::gguf::{Array, GgufWriter};
use crate::model::tokenizer::byte_to_char;
use crate::{Error, Result};

/// The families the seeded models cover, by how llama.cpp lays them out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SeededFamily {
    /// `llama`: RMS norms, adjacent-pair rope, SwiGLU, an untied output matrix.
    Llama,
    /// `llama` with Llama 3's rope frequency factors (`rope_freqs.weight`).
    Llama3,
    /// `qwen2`: biases on the Q/K/V projections, neox rope, tied output.
    Qwen2,
    /// `qwen3`: RMS norms on each query and key head, a head width that is
    /// not the model width over the heads, neox rope, tied output.
    Qwen3,
    /// `gemma2`: scaled embeddings, norms after attention and the
    /// feed-forward network, alternating sliding-window layers, attention
    /// and final logits soft-capped, GeGLU, tied output.
    Gemma2,
    /// `phi3`: one fused Q/K/V matrix, the gate stacked into the up
    /// projection, neox rope, an untied output; a sliding window in the
    /// metadata that llama.cpp does not apply.
    Phi3,
    /// `qwen3moe`: Qwen 3's attention, and in every layer a mixture of
    /// [`SEEDED_EXPERTS`] SwiGLU experts, [`SEEDED_EXPERTS_USED`] per token,
    /// their weights normalized; an F32 router (as llama.cpp's quantizer
    /// leaves it), tied output.
    Qwen3Moe,
    /// `llama` with experts (Mixtral's layout): llama's attention and
    /// untied output, each layer's network a mixture of experts as wide
    /// as `feed_forward_length`, routed as in `Qwen3Moe`.
    Mixtral,
    /// `gpt-oss`: biases on the Q/K/V and output projections, attention
    /// sinks, YaRN rope (neox pairs) on every layer, even layers over a
    /// sliding window, and in every layer [`SEEDED_EXPERTS`] experts with
    /// a biased router, expert biases, softmax over the chosen logits and
    /// gpt-oss's clamped SwiGLU; the pre-FFN norm named
    /// `post_attention_norm`, an untied output. Also written with MXFP4
    /// experts and the rest in F32, as gpt-oss ships.
    GptOss,
    /// `llama` with Mistral 7B's sliding-window attention on every layer
    /// (`llama.attention.sliding_window`), otherwise `Llama`'s file to the
    /// weight. llama.cpp's `llama` graph has no window, so its reference
    /// is a float64 forward (`tests/data/families_float64/`), itself checked
    /// against llama.cpp on `Llama`'s files.
    Mistral,
}

/// A part of a model that [`SeededModel::neutral`] can make a no-op.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Part {
    /// `rope_freqs.weight`: all ones.
    RopeFactors,
    /// `attn_{q,k,v}.bias`: all zeros.
    AttnBias,
    /// `attn_{q,k}_norm.weight`: all ones.
    QkNorm,
    /// The soft-caps (`{arch}.attn_logit_softcapping`,
    /// `.final_logit_softcapping`): so high that they cap nothing.
    Softcaps,
    /// `{arch}.attention.sliding_window`: wider than the prompt.
    SlidingWindow,
    /// `ffn_gate_inp.weight` (the experts' router): all zeros, so every
    /// expert is equally likely and each token gets the first ones.
    Router,
    /// `attn_sinks.weight`: so negative that no sink takes any weight.
    Sinks,
    /// `ffn_gate_inp.bias` and `ffn_{gate,up,down}_exps.bias`: all zeros.
    ExpertBiases,
    /// YaRN: the file says no rope scaling at all.
    Yarn,
}

/// The token ids every seeded model's reference is computed on (no BOS;
/// some ids repeat, so attention sees equal keys at different positions).
pub const SEEDED_PROMPT: [u32; 17] = [300, 72, 101, 270, 111, 32, 263, 119, 180, 114, 300, 100, 33, 290, 311, 72, 58];

/// The matrix types each family's references are stored for.
pub const SEEDED_DTYPES: [DType; 3] = [DType::F32, DType::Q8_0, DType::Q4_K];

/// The lookup-table weight types (the llama family's references are stored
/// for them too): their products and row reads against llama.cpp's.
pub const SEEDED_LOOKUP_DTYPES: [DType; 3] = [DType::IQ4_NL, DType::IQ4_XS, DType::MXFP4];

/// Vocabulary size of every seeded model: 256 byte tokens, merges, two specials.
pub const SEEDED_VOCAB: usize = 320;

/// Experts per layer of the mixture-of-experts families.
pub const SEEDED_EXPERTS: usize = 4;

/// Experts each token uses in the mixture-of-experts families.
pub const SEEDED_EXPERTS_USED: usize = 2;

/// Hidden width of each expert (one 256-wide K-quant block per row of the
/// down projection).
const N_FF_EXP: usize = 256;

/// gpt-oss's YaRN: the factor, and an original context shorter than the
/// prompt's reach, so that the interpolated pairs turn visibly slower
/// within 17 positions (and YaRN's magnitude scale grows every score).
const YARN_FACTOR: f32 = 4.0;
const YARN_ORIGINAL_CONTEXT: u32 = 16;

/// The value a neutral sink gets: its share of each softmax underflows to 0.
const NO_SINK: f32 = -1.0e9;

impl SeededFamily {
    /// Every family, in a fixed order.
    pub const ALL: [Self; 9] = [
        Self::Llama,
        Self::Llama3,
        Self::Qwen2,
        Self::Qwen3,
        Self::Gemma2,
        Self::Phi3,
        Self::Qwen3Moe,
        Self::Mixtral,
        Self::GptOss,
    ];

    /// The families whose references come from the float64 forward rather
    /// than llama.cpp (which does not compute them).
    pub const FLOAT64_CHECKED: [Self; 1] = [Self::Mistral];

    /// A short name for files and messages (`llama3`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Llama => "llama",
            Self::Llama3 => "llama3",
            Self::Qwen2 => "qwen2",
            Self::Qwen3 => "qwen3",
            Self::Gemma2 => "gemma2",
            Self::Phi3 => "phi3",
            Self::Qwen3Moe => "qwen3moe",
            Self::Mixtral => "mixtral",
            Self::GptOss => "gpt-oss",
            Self::Mistral => "mistral",
        }
    }

    /// `general.architecture`.
    pub fn arch(self) -> &'static str {
        match self {
            Self::Llama | Self::Llama3 | Self::Mixtral | Self::Mistral => "llama",
            Self::Qwen2 => "qwen2",
            Self::Qwen3 => "qwen3",
            Self::Gemma2 => "gemma2",
            Self::Phi3 => "phi3",
            Self::Qwen3Moe => "qwen3moe",
            Self::GptOss => "gpt-oss",
        }
    }

    /// The types the family's references are stored for beyond
    /// [`SEEDED_DTYPES`]: llama's lookup-table types, and gpt-oss with
    /// MXFP4 experts (the type it is released in).
    pub fn extra_dtypes(self) -> &'static [DType] {
        match self {
            Self::Llama => &SEEDED_LOOKUP_DTYPES,
            Self::GptOss => &[DType::MXFP4],
            _ => &[],
        }
    }

    /// The seed the stored references use. Mixtral's is its own: a token
    /// whose second and third experts score within rounding of each other
    /// runs whichever one each engine's rounding ranks higher, a jump in
    /// its logits (KL 0.29 in F32 with the common seed, 0.16 in Q8_0 with
    /// the next one); this seed's routing is clear of rounding in all three
    /// types, on the CPU and through wgpu.
    fn seed(self) -> u64 {
        if self == Self::Mixtral { 0x5EED_0039 } else { 0x5EED_0037 }
    }

    /// Whether each layer's feed-forward network is a mixture of experts.
    fn has_experts(self) -> bool {
        matches!(self, Self::Qwen3Moe | Self::Mixtral | Self::GptOss)
    }

    /// `feed_forward_length`: the dense network's width, or the experts'
    /// where llama.cpp reads their width from it (llama).
    fn n_ff(self) -> usize {
        if matches!(self, Self::Mixtral | Self::GptOss) { N_FF_EXP } else { N_FF }
    }

    /// The parts of this family beyond plain llama's.
    pub fn parts(self) -> &'static [Part] {
        match self {
            Self::Llama => &[],
            Self::Llama3 => &[Part::RopeFactors],
            Self::Qwen2 => &[Part::AttnBias],
            Self::Qwen3 => &[Part::QkNorm],
            Self::Gemma2 => &[Part::Softcaps, Part::SlidingWindow],
            Self::Phi3 => &[],
            Self::Qwen3Moe => &[Part::QkNorm, Part::Router],
            Self::Mixtral => &[Part::Router],
            Self::Mistral => &[Part::SlidingWindow],
            Self::GptOss => &[Part::AttnBias, Part::SlidingWindow, Part::Sinks, Part::ExpertBiases, Part::Yarn],
        }
    }

    fn head_dim(self) -> usize {
        if matches!(self, Self::Qwen3 | Self::Qwen3Moe) { 128 } else { 64 }
    }

    /// The BPE pre-tokenizer of the family's vocabulary; `None`: a
    /// SentencePiece vocabulary (Phi 3's files have one, and llama.cpp
    /// refuses a Phi 3 file with a BPE vocabulary).
    fn pre_tokenizer(self) -> Option<&'static str> {
        match self {
            Self::Llama | Self::Mixtral | Self::Mistral => Some("smollm"),
            Self::Llama3 => Some("llama-bpe"),
            Self::Qwen2 | Self::Qwen3 | Self::Qwen3Moe => Some("qwen2"),
            // Gemma's vocabulary is SentencePiece; the logits do not depend on it.
            Self::Gemma2 | Self::GptOss => Some("gpt-2"),
            Self::Phi3 => None,
        }
    }

    fn rope_base(self) -> f32 {
        match self {
            Self::Llama | Self::Mistral => 10_000.0,
            Self::Llama3 => 500_000.0,
            Self::Qwen2 | Self::Qwen3 | Self::Qwen3Moe | Self::Mixtral => 1_000_000.0,
            Self::Gemma2 | Self::Phi3 => 10_000.0,
            Self::GptOss => 150_000.0,
        }
    }
}

/// The sizes every seeded model shares: every matrix row a whole number of
/// 256-wide K-quant blocks.
const N_EMBD: usize = 256;
const N_LAYER: usize = 2;
const N_HEAD: usize = 4;
const N_HEAD_KV: usize = 2;
const N_FF: usize = 512;

/// One seeded model file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SeededModel {
    /// The family.
    pub family: SeededFamily,
    /// Type of every matrix (embeddings and output included); norms, biases
    /// and rope factors are F32.
    pub dtype: DType,
    /// Seeds the weights.
    pub seed: u64,
    /// A part written neutral, or `None`.
    pub neutral: Option<Part>,
}

impl SeededModel {
    /// The model of `family` in `dtype` with the seed the stored references use.
    pub fn new(family: SeededFamily, dtype: DType) -> Self {
        Self { family, dtype, seed: family.seed(), neutral: None }
    }

    /// The file's stem for this model (`qwen2-q8_0`), as the references are named.
    pub fn stem(&self) -> String {
        format!("{}-{}", self.family.name(), self.dtype.to_string().to_lowercase())
    }

    /// The GGUF file's bytes.
    pub fn to_gguf(&self) -> Result<Vec<u8>> {
        let f = self.family;
        let arch = f.arch();
        let hd = f.head_dim();
        let neutral = |p: Part| self.neutral == Some(p);
        let mut w = GgufWriter::new();
        w.add_str("general.architecture", arch);
        w.add_str("general.name", &format!("seeded {}", self.stem()));
        let key = |s: &str| format!("{arch}.{s}");
        w.add_u32(&key("context_length"), 512);
        w.add_u32(&key("embedding_length"), N_EMBD as u32);
        w.add_u32(&key("block_count"), N_LAYER as u32);
        w.add_u32(&key("feed_forward_length"), f.n_ff() as u32);
        w.add_u32(&key("attention.head_count"), N_HEAD as u32);
        w.add_u32(&key("attention.head_count_kv"), N_HEAD_KV as u32);
        w.add_f32(&key("attention.layer_norm_rms_epsilon"), 1e-6);
        w.add_f32(&key("rope.freq_base"), f.rope_base());
        w.add_u32(&key("rope.dimension_count"), hd as u32);
        w.add_u32(&key("vocab_size"), SEEDED_VOCAB as u32);
        // gpt-oss's converter writes the head widths too (its heads are
        // not the model width over the heads).
        if matches!(f, SeededFamily::Qwen3 | SeededFamily::Qwen3Moe | SeededFamily::GptOss) {
            w.add_u32(&key("attention.key_length"), hd as u32);
            w.add_u32(&key("attention.value_length"), hd as u32);
        }
        if f.has_experts() {
            w.add_u32(&key("expert_count"), SEEDED_EXPERTS as u32);
            w.add_u32(&key("expert_used_count"), SEEDED_EXPERTS_USED as u32);
        }
        if matches!(f, SeededFamily::Qwen3Moe | SeededFamily::GptOss) {
            w.add_u32(&key("expert_feed_forward_length"), N_FF_EXP as u32);
        }
        if f == SeededFamily::GptOss {
            // A window of 4 over a prompt of 17, as in Gemma 2's file.
            let window = if neutral(Part::SlidingWindow) { 512 } else { 4 };
            w.add_u32(&key("attention.sliding_window"), window);
            if !neutral(Part::Yarn) {
                // As llama.cpp's converter writes gpt-oss's rope scaling.
                w.add_str(&key("rope.scaling.type"), "yarn");
                w.add_f32(&key("rope.scaling.factor"), YARN_FACTOR);
                w.add_u32(&key("rope.scaling.original_context_length"), YARN_ORIGINAL_CONTEXT);
                w.add_f32(&key("rope.scaling.yarn_beta_fast"), 32.0);
                w.add_f32(&key("rope.scaling.yarn_beta_slow"), 1.0);
            }
        }
        if f == SeededFamily::Phi3 {
            w.add_u32(&key("attention.sliding_window"), 4);
        }
        if f == SeededFamily::Mistral {
            let window = if neutral(Part::SlidingWindow) { 512 } else { 4 };
            w.add_u32(&key("attention.sliding_window"), window);
        }
        if f == SeededFamily::Gemma2 {
            // A window of 4 over a prompt of 17 and caps near the scores'
            // spread: both change every position's result.
            let window = if neutral(Part::SlidingWindow) { 512 } else { 4 };
            w.add_u32(&key("attention.sliding_window"), window);
            let off = neutral(Part::Softcaps);
            w.add_f32(&key("attn_logit_softcapping"), if off { 1.0e4 } else { 2.0 });
            w.add_f32(&key("final_logit_softcapping"), if off { 1.0e4 } else { 8.0 });
        }
        match f.pre_tokenizer() {
            Some(pre) => add_bpe_vocabulary(&mut w, pre),
            None => add_spm_vocabulary(&mut w),
        }

        let mut rng = SplitMix64::new(self.seed);
        let (q, kv) = (N_HEAD * hd, N_HEAD_KV * hd);
        // gpt-oss ships its experts in MXFP4 and the rest unquantized.
        let (dtype, experts_dtype) = if f == SeededFamily::GptOss && self.dtype == DType::MXFP4 {
            (DType::F32, DType::MXFP4)
        } else {
            (self.dtype, self.dtype)
        };
        let mut tensors = Tensors { w: &mut w, rng: &mut rng, dtype, experts_dtype };
        tensors.matrix("token_embd.weight", [N_EMBD, SEEDED_VOCAB], Scale::FanIn(3.0))?;
        // Gemma 2's final soft-cap of 8 shapes logits spread about that far.
        let output_norm = if f == SeededFamily::Gemma2 { Fill::Range(0.8, 1.6) } else { Fill::AroundOne(0.2) };
        tensors.vector("output_norm.weight", N_EMBD, output_norm, false)?;
        if matches!(
            f,
            SeededFamily::Llama
                | SeededFamily::Llama3
                | SeededFamily::Mistral
                | SeededFamily::Phi3
                | SeededFamily::Mixtral
                | SeededFamily::GptOss
        ) {
            tensors.matrix("output.weight", [N_EMBD, SEEDED_VOCAB], Scale::FanIn(3.0))?;
        }
        if f.parts().contains(&Part::RopeFactors) {
            tensors.vector("rope_freqs.weight", hd / 2, Fill::Range(0.25, 4.0), neutral(Part::RopeFactors))?;
        }
        for l in 0..N_LAYER {
            let n = |s: &str| format!("blk.{l}.{s}");
            tensors.vector(&n("attn_norm.weight"), N_EMBD, Fill::AroundOne(0.2), false)?;
            if f == SeededFamily::Phi3 {
                tensors.matrix(&n("attn_qkv.weight"), [N_EMBD, q + 2 * kv], Scale::FanIn(1.0))?;
            } else {
                tensors.matrix(&n("attn_q.weight"), [N_EMBD, q], Scale::FanIn(1.0))?;
                tensors.matrix(&n("attn_k.weight"), [N_EMBD, kv], Scale::FanIn(1.0))?;
                tensors.matrix(&n("attn_v.weight"), [N_EMBD, kv], Scale::FanIn(1.0))?;
            }
            if f.parts().contains(&Part::AttnBias) {
                let zero = neutral(Part::AttnBias);
                tensors.vector(&n("attn_q.bias"), q, Fill::Range(-0.5, 0.5), zero)?;
                tensors.vector(&n("attn_k.bias"), kv, Fill::Range(-0.5, 0.5), zero)?;
                tensors.vector(&n("attn_v.bias"), kv, Fill::Range(-0.5, 0.5), zero)?;
            }
            if f.parts().contains(&Part::QkNorm) {
                let one = neutral(Part::QkNorm);
                tensors.vector(&n("attn_q_norm.weight"), hd, Fill::AroundOne(0.6), one)?;
                tensors.vector(&n("attn_k_norm.weight"), hd, Fill::AroundOne(0.6), one)?;
            }
            tensors.matrix(&n("attn_output.weight"), [q, N_EMBD], Scale::FanIn(3.0))?;
            if f == SeededFamily::GptOss {
                tensors.vector(&n("attn_output.bias"), N_EMBD, Fill::Range(-0.5, 0.5), neutral(Part::AttnBias))?;
                tensors.sinks(&n("attn_sinks.weight"), N_HEAD, neutral(Part::Sinks))?;
            }
            if f == SeededFamily::Gemma2 {
                // After a norm a block adds about unit size to a residual of
                // embeddings scaled by 16: scaled up, it moves the tied logits.
                tensors.vector(&n("post_attention_norm.weight"), N_EMBD, Fill::Range(2.0, 6.0), false)?;
            }
            // gpt-oss's norm before the experts has llama.cpp's name for a post-norm.
            let ffn_norm = if f == SeededFamily::GptOss { "post_attention_norm.weight" } else { "ffn_norm.weight" };
            tensors.vector(&n(ffn_norm), N_EMBD, Fill::AroundOne(0.2), false)?;
            if f.has_experts() {
                // Router logits a few units apart: the choice and the
                // weights of the experts differ from token to token.
                tensors.router(&n("ffn_gate_inp.weight"), [N_EMBD, SEEDED_EXPERTS], 2.0, neutral(Part::Router))?;
                let (ff, e) = (N_FF_EXP, SEEDED_EXPERTS);
                tensors.experts(&n("ffn_gate_exps.weight"), [N_EMBD, ff, e], Scale::FanIn(1.5))?;
                tensors.experts(&n("ffn_up_exps.weight"), [N_EMBD, ff, e], Scale::FanIn(1.5))?;
                tensors.experts(&n("ffn_down_exps.weight"), [ff, N_EMBD, e], Scale::FanIn(3.0))?;
                if f == SeededFamily::GptOss {
                    // A router bias as wide as the router's logits, and
                    // expert biases about a unit: each moves the choice or
                    // the output of the experts.
                    let zero = neutral(Part::ExpertBiases);
                    tensors.vector_nd(&n("ffn_gate_inp.bias"), &[e], Fill::Range(-1.5, 1.5), zero)?;
                    tensors.vector_nd(&n("ffn_gate_exps.bias"), &[ff, e], Fill::Range(-1.0, 1.0), zero)?;
                    tensors.vector_nd(&n("ffn_up_exps.bias"), &[ff, e], Fill::Range(-1.0, 1.0), zero)?;
                    tensors.vector_nd(&n("ffn_down_exps.bias"), &[N_EMBD, e], Fill::Range(-1.0, 1.0), zero)?;
                }
            } else if f == SeededFamily::Phi3 {
                tensors.matrix(&n("ffn_up.weight"), [N_EMBD, 2 * N_FF], Scale::FanIn(1.5))?;
            } else {
                tensors.matrix(&n("ffn_gate.weight"), [N_EMBD, N_FF], Scale::FanIn(1.5))?;
                tensors.matrix(&n("ffn_up.weight"), [N_EMBD, N_FF], Scale::FanIn(1.5))?;
            }
            if !f.has_experts() {
                tensors.matrix(&n("ffn_down.weight"), [N_FF, N_EMBD], Scale::FanIn(3.0))?;
            }
            if f == SeededFamily::Gemma2 {
                tensors.vector(&n("post_ffw_norm.weight"), N_EMBD, Fill::Range(2.0, 6.0), false)?;
            }
        }
        Ok(w.to_bytes())
    }
}

/// How a matrix's uniform values are scaled.
enum Scale {
    /// `±gain · sqrt(3 / fan_in)`: unit variance out for unit variance in, times `gain`.
    FanIn(f32),
}

/// How a vector's values are drawn.
enum Fill {
    /// `1 ± spread`.
    AroundOne(f32),
    /// Uniform in `[lo, hi)`.
    Range(f32, f32),
}

/// Writes tensors in order from one random stream.
struct Tensors<'a> {
    w: &'a mut GgufWriter,
    rng: &'a mut SplitMix64,
    dtype: DType,
    /// The type of the stacked expert matrices.
    experts_dtype: DType,
}

impl Tensors<'_> {
    fn matrix(&mut self, name: &str, [cols, rows]: [usize; 2], scale: Scale) -> Result<()> {
        self.matrix_nd(name, &[cols, rows], scale, self.dtype)
    }

    /// One matrix per expert, stacked: `[cols, rows, n_expert]`.
    fn experts(&mut self, name: &str, shape: [usize; 3], scale: Scale) -> Result<()> {
        self.matrix_nd(name, &shape, scale, self.experts_dtype)
    }

    /// An F32 router `[cols, n_expert]` whatever the file's type (llama.cpp's
    /// quantizer leaves `ffn_gate_inp` in F32), `±gain · sqrt(3 / cols)`;
    /// `neutral`: drawn, then written as zeros.
    fn router(&mut self, name: &str, [cols, rows]: [usize; 2], gain: f32, neutral: bool) -> Result<()> {
        let a = gain * (3.0 / cols as f32).sqrt();
        let mut values: Vec<f32> = (0..cols * rows).map(|_| a * self.rng.uniform()).collect();
        if neutral {
            values.fill(0.0);
        }
        self.w.add_tensor(name, &[cols, rows], DType::F32, bytemuck::cast_slice(&values).to_vec())?;
        Ok(())
    }

    /// A tensor of rows of `shape[0]` values (the other dimensions multiply
    /// into the row count) in `dtype`.
    fn matrix_nd(&mut self, name: &str, shape: &[usize], scale: Scale, dtype: DType) -> Result<()> {
        let Scale::FanIn(gain) = scale;
        let cols = shape[0];
        let rows: usize = shape[1..].iter().product();
        let a = gain * (3.0 / cols as f32).sqrt();
        let values: Vec<f32> = (0..cols * rows).map(|_| a * self.rng.uniform()).collect();
        let bytes = match dtype {
            DType::F32 => bytemuck::cast_slice(&values).to_vec(),
            dt if SEEDED_LOOKUP_DTYPES.contains(&dt) => {
                let mut out = Vec::new();
                for src in values.chunks(cols) {
                    out.extend(super::lookup_blocks::lookup_row(dt, src)?);
                }
                out
            }
            dt if dt.is_quantized() => {
                let row = dt
                    .row_size(cols)
                    .ok_or_else(|| Error::Model(format!("{name}: {cols} columns are not whole {dt} blocks")))?;
                let mut out = vec![0u8; row * rows];
                for (src, dst) in values.chunks(cols).zip(out.chunks_mut(row)) {
                    quantize_row(dt, src, dst)?;
                }
                out
            }
            dt => return Err(Error::Model(format!("seeded models are F32 or quantized, not {dt}"))),
        };
        self.w.add_tensor(name, shape, dtype, bytes)?;
        Ok(())
    }

    /// `neutral`: drawn (so the stream stays the same) but written as the
    /// fill's no-op (zero for a range around zero, else one).
    fn vector(&mut self, name: &str, n: usize, fill: Fill, neutral: bool) -> Result<()> {
        self.vector_nd(name, &[n], fill, neutral)
    }

    /// [`Tensors::vector`] of any shape (per-expert biases, `[n, n_expert]`).
    fn vector_nd(&mut self, name: &str, shape: &[usize], fill: Fill, neutral: bool) -> Result<()> {
        let n: usize = shape.iter().product();
        let mut values: Vec<f32> = (0..n)
            .map(|_| {
                let u = self.rng.uniform();
                match fill {
                    Fill::AroundOne(s) => 1.0 + s * u,
                    Fill::Range(lo, hi) => lo + (hi - lo) * (u + 1.0) / 2.0,
                }
            })
            .collect();
        if neutral {
            let no_op = match fill {
                Fill::Range(lo, _) if lo < 0.0 => 0.0,
                _ => 1.0,
            };
            values.fill(no_op);
        }
        self.w.add_tensor(name, shape, DType::F32, bytemuck::cast_slice(&values).to_vec())?;
        Ok(())
    }

    /// Attention sinks, one logit per head in `[0, 3)`: against scores of
    /// about a unit each takes a good share of a short window's weight.
    /// `neutral`: drawn, then written as [`NO_SINK`].
    fn sinks(&mut self, name: &str, n_head: usize, neutral: bool) -> Result<()> {
        let mut values: Vec<f32> = (0..n_head).map(|_| 1.5 + 1.5 * self.rng.uniform()).collect();
        if neutral {
            values.fill(NO_SINK);
        }
        self.w.add_tensor(name, &[n_head], DType::F32, bytemuck::cast_slice(&values).to_vec())?;
        Ok(())
    }
}

/// Pairs of letters every seeded vocabulary has a token for.
const BIGRAMS: [&str; 36] = [
    "th", "he", "in", "er", "an", "re", "on", "at", "en", "nd", "ti", "es", "or", "te", "of", "ed", "is", "it", "al",
    "ar", "st", "to", "nt", "ng", "se", "ha", "as", "ou", "io", "le", "ve", "co", "me", "de", "hi", "ri",
];

/// A byte-level BPE vocabulary of [`SEEDED_VOCAB`] tokens: GPT-2's 256
/// byte characters, 62 merged pairs, then `<|bos|>` and `<|eos|>`.
fn add_bpe_vocabulary(w: &mut GgufWriter, pre: &str) {
    let mut tokens: Vec<String> = (0..=255u8).map(|b| byte_to_char(b).to_string()).collect();
    let mut merges = Vec::new();
    let space = byte_to_char(b' ');
    for c in 'a'..='z' {
        tokens.push(format!("{space}{c}"));
        merges.push(format!("{space} {c}"));
    }
    for pair in BIGRAMS {
        let mut c = pair.chars();
        let (a, b) = (c.next().unwrap_or('a'), c.next().unwrap_or('a'));
        tokens.push(pair.to_owned());
        merges.push(format!("{a} {b}"));
    }
    let mut types = vec![1i32; tokens.len()];
    tokens.extend(["<|bos|>".to_owned(), "<|eos|>".to_owned()]);
    types.extend([3, 3]);
    debug_assert_eq!(tokens.len(), SEEDED_VOCAB);
    w.add_str("tokenizer.ggml.model", "gpt2");
    w.add_str("tokenizer.ggml.pre", pre);
    w.add_array("tokenizer.ggml.tokens", Array::String(tokens));
    w.add_array("tokenizer.ggml.token_type", Array::I32(types));
    w.add_array("tokenizer.ggml.merges", Array::String(merges));
    w.add_u32("tokenizer.ggml.bos_token_id", SEEDED_VOCAB as u32 - 2);
    w.add_u32("tokenizer.ggml.eos_token_id", SEEDED_VOCAB as u32 - 1);
    w.add_bool("tokenizer.ggml.add_bos_token", false);
}

/// A SentencePiece vocabulary of [`SEEDED_VOCAB`] tokens: `<unk>`, `<s>`,
/// `</s>`, the 256 byte tokens `<0x00>`..`<0xFF>`, 56 pieces with scores
/// (`▁a`..`▁z` and pairs of letters), then Phi 3's five chat tokens.
fn add_spm_vocabulary(w: &mut GgufWriter) {
    let mut tokens: Vec<String> = ["<unk>", "<s>", "</s>"].map(String::from).to_vec();
    let mut types = vec![2i32, 3, 3];
    tokens.extend((0..=255u8).map(|b| format!("<0x{b:02X}>")));
    types.extend([6; 256]);
    let pieces = ('a'..='z').map(|c| format!("\u{2581}{c}")).chain(BIGRAMS.iter().take(30).map(|p| (*p).to_owned()));
    tokens.extend(pieces);
    types.resize(tokens.len(), 1);
    // Phi 3's chat tokens (llama.cpp looks for them in a phi3 vocabulary).
    tokens.extend(["<|endoftext|>", "<|assistant|>", "<|system|>", "<|end|>", "<|user|>"].map(String::from));
    types.resize(tokens.len(), 3);
    let scores: Vec<f32> = (0..tokens.len()).map(|i| if types[i] == 1 { -(i as f32) } else { 0.0 }).collect();
    debug_assert_eq!(tokens.len(), SEEDED_VOCAB);
    w.add_str("tokenizer.ggml.model", "llama");
    w.add_array("tokenizer.ggml.tokens", Array::String(tokens));
    w.add_array("tokenizer.ggml.token_type", Array::I32(types));
    w.add_array("tokenizer.ggml.scores", Array::F32(scores));
    w.add_u32("tokenizer.ggml.bos_token_id", 1);
    w.add_u32("tokenizer.ggml.eos_token_id", 2);
    w.add_bool("tokenizer.ggml.add_bos_token", false);
}
