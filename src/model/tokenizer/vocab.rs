//! The vocabulary: tokens, their attributes and scores, special token ids
//! and the add-BOS/EOS rules, read from `tokenizer.ggml.*` metadata with the
//! defaults and fix-ups llama.cpp applies.

// hashbrown's default hasher is several times faster than SipHash on the
// short keys (token texts, id pairs) looked up for every byte encoded.
use hashbrown::HashMap;

use crate::{Error, Result};

use super::TokenId;
use super::pretokenize::PreTokenizer;
use crate::model::gguf::{Array, Gguf};

/// Token attributes (llama.cpp's `llama_token_attr` bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct TokenAttr(pub u16);

impl TokenAttr {
    /// No attribute (type 0 or an unknown type).
    pub const UNDEFINED: Self = Self(0);
    /// The unknown token.
    pub const UNKNOWN: Self = Self(1 << 0);
    /// A token the model never produces.
    pub const UNUSED: Self = Self(1 << 1);
    /// An ordinary token.
    pub const NORMAL: Self = Self(1 << 2);
    /// A control token (BOS, EOS, chat markers).
    pub const CONTROL: Self = Self(1 << 3);
    /// A user-defined token, always split out of text before tokenizing.
    pub const USER_DEFINED: Self = Self(1 << 4);
    /// A byte-fallback token `<0xNN>`.
    pub const BYTE: Self = Self(1 << 5);
    /// Spaces before it are removed when it is split out of text.
    pub const LSTRIP: Self = Self(1 << 7);
    /// Spaces after it are removed when it is split out of text.
    pub const RSTRIP: Self = Self(1 << 8);

    /// Whether any bit of `other` is set.
    pub const fn intersects(self, other: Self) -> bool {
        self.0 & other.0 != 0
    }

    /// These attributes plus `other`.
    pub const fn with(self, other: Self) -> Self {
        Self(self.0 | other.0)
    }

    /// These attributes without `other`.
    pub const fn without(self, other: Self) -> Self {
        Self(self.0 & !other.0)
    }

    /// The attribute of GGUF token type `ty` (`tokenizer.ggml.token_type`).
    pub const fn from_token_type(ty: i32) -> Self {
        match ty {
            1 => Self::NORMAL,
            2 => Self::UNKNOWN,
            3 => Self::CONTROL,
            4 => Self::USER_DEFINED,
            5 => Self::UNUSED,
            6 => Self::BYTE,
            _ => Self::UNDEFINED,
        }
    }
}

/// One vocabulary entry.
#[derive(Debug, Clone, PartialEq)]
pub struct Token {
    /// The token's text as stored (GPT-2 byte characters for byte-level BPE,
    /// `▁` for spaces in SentencePiece).
    pub text: String,
    /// Merge priority for SentencePiece (higher first); 0 when absent.
    pub score: f32,
    /// Attributes.
    pub attr: TokenAttr,
}

/// The tokenizer family (`tokenizer.ggml.model`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VocabKind {
    /// GPT-2 style byte-level BPE (`gpt2`) with a pre-tokenizer.
    Bpe(PreTokenizer),
    /// SentencePiece style (`llama`): score-ordered merges, byte fallback.
    Spm,
}

/// Special token ids (`None` where the vocabulary has none).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SpecialTokens {
    /// Beginning of sequence.
    pub bos: Option<TokenId>,
    /// End of sequence.
    pub eos: Option<TokenId>,
    /// End of turn.
    pub eot: Option<TokenId>,
    /// End of message.
    pub eom: Option<TokenId>,
    /// Unknown.
    pub unk: Option<TokenId>,
    /// Separator.
    pub sep: Option<TokenId>,
    /// Padding.
    pub pad: Option<TokenId>,
    /// Mask.
    pub mask: Option<TokenId>,
    /// Fill-in-the-middle prefix.
    pub fim_pre: Option<TokenId>,
    /// Fill-in-the-middle suffix.
    pub fim_suf: Option<TokenId>,
    /// Fill-in-the-middle middle.
    pub fim_mid: Option<TokenId>,
    /// Fill-in-the-middle padding.
    pub fim_pad: Option<TokenId>,
    /// Fill-in-the-middle repository.
    pub fim_rep: Option<TokenId>,
    /// Fill-in-the-middle file separator.
    pub fim_sep: Option<TokenId>,
}

/// Everything read from the metadata.
pub(crate) struct Vocab {
    pub kind: VocabKind,
    pub tokens: Vec<Token>,
    pub token_to_id: HashMap<String, TokenId>,
    /// BPE merges by the ids of their two parts: (rank, id of the merged token).
    pub merges: HashMap<(TokenId, TokenId), (u32, Option<TokenId>)>,
    pub special: SpecialTokens,
    pub eog: Vec<TokenId>,
    pub add_bos: bool,
    pub add_eos: bool,
    pub add_space_prefix: bool,
    pub clean_spaces: bool,
    pub ignore_merges: bool,
}

/// Picks one special token id out of [`SpecialTokens`].
type Slot = fn(&mut SpecialTokens) -> &mut Option<TokenId>;

fn invalid(gguf: &Gguf, reason: String) -> Error {
    Error::InvalidModel { file: gguf.source().to_owned(), reason }
}

/// Element `i` of an integer or float array, as f32 (for scores).
fn score_at(array: &Array, i: usize) -> f32 {
    match array {
        Array::F32(v) => v[i],
        Array::I32(v) => v[i] as f32,
        _ => 0.0,
    }
}

pub(crate) fn load(gguf: &Gguf) -> Result<Vocab> {
    let model = gguf.get_str("tokenizer.ggml.model")?;
    if !matches!(model, "llama" | "gpt2") {
        return Err(invalid(gguf, format!("tokenizer model '{model}' (tokenizer.ggml.model) is not supported")));
    }
    let pre_name: &str = gguf.get_opt("tokenizer.ggml.pre")?.unwrap_or("");

    let texts = gguf.get_slice::<String>("tokenizer.ggml.tokens")?;
    let n = texts.len();
    if n == 0 || u32::try_from(n).is_err() {
        return Err(invalid(gguf, format!("tokenizer.ggml.tokens has {n} tokens")));
    }
    // The file's size bounds the array; the limit keeps the tables built
    // from it (a `String` and a map entry per token) to a real vocabulary's.
    let limits = *gguf.limits();
    limits.check_count("tokenizer.ggml.tokens", n as u64, limits.max_vocab).map_err(|e| invalid(gguf, e))?;
    let scores = match gguf.get_opt::<&Array>("tokenizer.ggml.scores")? {
        None => None,
        Some(a @ (Array::F32(_) | Array::I32(_))) if a.len() >= n => Some(a),
        Some(a) => {
            return Err(invalid(
                gguf,
                format!(
                    "tokenizer.ggml.scores is an array of {} {}, {n} f32 or i32 expected",
                    a.len(),
                    a.element_type()
                ),
            ));
        }
    };
    let types = match gguf.get_opt::<&Array>("tokenizer.ggml.token_type")? {
        None => None,
        Some(Array::I32(v)) if v.len() >= n => Some(v),
        Some(a) => {
            return Err(invalid(
                gguf,
                format!("tokenizer.ggml.token_type is an array of {} {}, {n} i32 expected", a.len(), a.element_type()),
            ));
        }
    };

    let mut tokens = Vec::with_capacity(n);
    let mut token_to_id = HashMap::with_capacity(n);
    for (i, text) in texts.iter().enumerate() {
        let text = if text.is_empty() { format!("[EMPTY_{i}]") } else { text.clone() };
        // Later duplicates win, as in llama.cpp.
        token_to_id.insert(text.clone(), i as TokenId);
        let score = scores.map_or(0.0, |a| score_at(a, i));
        let attr = types.map_or(TokenAttr::NORMAL, |t| TokenAttr::from_token_type(t[i]));
        tokens.push(Token { text, score, attr });
    }

    let mut special = SpecialTokens::default();
    let (kind, mut add_bos, mut add_space_prefix, clean_spaces, ignore_merges);
    let mut merges = HashMap::new();
    match model {
        "llama" => {
            kind = VocabKind::Spm;
            (special.bos, special.eos, special.unk) = (Some(1), Some(2), Some(0));
            (add_bos, add_space_prefix, clean_spaces, ignore_merges) = (true, true, false, false);
        }
        "gpt2" => {
            let config = PreTokenizer::from_name(pre_name, gguf.source())?;
            kind = VocabKind::Bpe(config.pre);
            (special.bos, special.eos) = (Some(11), Some(11));
            (add_bos, add_space_prefix, clean_spaces, ignore_merges) =
                (config.add_bos, false, config.clean_spaces, config.ignore_merges);
            let list = gguf.get_slice::<String>("tokenizer.ggml.merges")?;
            limits
                .check_count("tokenizer.ggml.merges", list.len() as u64, limits.max_vocab)
                .map_err(|e| invalid(gguf, e))?;
            merges.reserve(list.len());
            for (rank, merge) in list.iter().enumerate() {
                // Split at the first space after the first byte (a part may start with one).
                let split = merge.as_bytes().iter().skip(1).position(|&b| b == b' ').map(|p| p + 1);
                let (first, second) = match split {
                    Some(p) => (&merge[..p], &merge[p + 1..]),
                    None => ("", ""),
                };
                let (Some(&a), Some(&b)) = (token_to_id.get(first), token_to_id.get(second)) else {
                    continue; // parts outside the vocabulary can never meet
                };
                let merged = token_to_id.get(&format!("{first}{second}")).copied();
                // The first rank of a repeated pair wins, as in llama.cpp.
                merges.entry((a, b)).or_insert((rank as u32, merged));
            }
        }
        other => {
            return Err(invalid(gguf, format!("tokenizer model '{other}' (tokenizer.ggml.model) is not supported")));
        }
    }
    if let Some(v) = gguf.get_opt::<bool>("tokenizer.ggml.add_space_prefix")? {
        add_space_prefix = v;
    }

    // Defaults outside the vocabulary are dropped; ids from the file replace
    // them when in range.
    let n_ids = n as TokenId;
    for id in [&mut special.bos, &mut special.eos, &mut special.unk] {
        *id = id.filter(|&i| i < n_ids);
    }
    let keys: [(&str, Slot); 17] = [
        ("bos_token_id", |s| &mut s.bos),
        ("eos_token_id", |s| &mut s.eos),
        ("eot_token_id", |s| &mut s.eot),
        ("eom_token_id", |s| &mut s.eom),
        ("unknown_token_id", |s| &mut s.unk),
        ("seperator_token_id", |s| &mut s.sep),
        ("padding_token_id", |s| &mut s.pad),
        ("mask_token_id", |s| &mut s.mask),
        ("fim_pre_token_id", |s| &mut s.fim_pre),
        ("fim_suf_token_id", |s| &mut s.fim_suf),
        ("fim_mid_token_id", |s| &mut s.fim_mid),
        ("fim_pad_token_id", |s| &mut s.fim_pad),
        ("fim_rep_token_id", |s| &mut s.fim_rep),
        ("fim_sep_token_id", |s| &mut s.fim_sep),
        ("prefix_token_id", |s| &mut s.fim_pre),
        ("suffix_token_id", |s| &mut s.fim_suf),
        ("middle_token_id", |s| &mut s.fim_mid),
    ];
    for (key, slot) in keys {
        let Some(id) = gguf.get_opt::<u32>(&format!("tokenizer.ggml.{key}"))? else { continue };
        if id < n_ids {
            *slot(&mut special) = Some(id);
        } else {
            // llama.cpp keeps its default for a bad id, and says so: a BOS
            // that is not the file's changes every prompt.
            let default = *slot(&mut special);
            tracing::warn!(
                file = gguf.source(),
                "tokenizer.ggml.{key} = {id} is outside the {n} tokens: using {}",
                default.map_or_else(|| "none".to_owned(), |d| format!("the default id {d}"))
            );
        }
    }
    if let Some(v) = gguf.get_opt::<bool>("tokenizer.ggml.add_bos_token")? {
        add_bos = v;
    }
    let add_eos = gguf.get_opt::<bool>("tokenizer.ggml.add_eos_token")?.unwrap_or(false);
    if add_bos && special.bos.is_none() {
        return Err(invalid(gguf, "the tokenizer adds a BOS token but has none".into()));
    }
    if add_eos && special.eos.is_none() {
        return Err(invalid(gguf, "the tokenizer adds an EOS token but has none".into()));
    }

    let eog = mark_special_by_text(&mut tokens, &mut special);
    apply_model_attributes(gguf, &mut tokens, &token_to_id)?;

    Ok(Vocab {
        kind,
        tokens,
        token_to_id,
        merges,
        special,
        eog,
        add_bos,
        add_eos,
        add_space_prefix,
        clean_spaces,
        ignore_merges,
    })
}

/// Finds end-of-turn, end-of-message and fill-in-the-middle tokens by their
/// text where the metadata does not name them, marks them (and every
/// end-of-generation token) as control tokens, marks control tokens named
/// "unused" as unused, and returns the end-of-generation ids, as llama.cpp does.
fn mark_special_by_text(tokens: &mut [Token], special: &mut SpecialTokens) -> Vec<TokenId> {
    let by_text: [(Slot, &[&str]); 8] = [
        (
            |s| &mut s.eot,
            &[
                "<|eot_id|>",
                "<|im_end|>",
                "<|end|>",
                "<end_of_turn>",
                "<|endoftext|>",
                "<|end_of_text|>",
                "<EOT>",
                "_<EOT>",
                "[EOT]",
                "<｜end▁of▁sentence｜>",
                "<end_of_utterance>",
            ],
        ),
        (|s| &mut s.eom, &["<|eom_id|>"]),
        (
            |s| &mut s.fim_pre,
            &[
                "<|fim_prefix|>",
                "<fim-prefix>",
                "<fim_prefix>",
                "<｜fim▁begin｜>",
                "<PRE>",
                "▁<PRE>",
                "<|code_prefix|>",
                "<|prefix|>",
            ],
        ),
        (
            |s| &mut s.fim_suf,
            &[
                "<|fim_suffix|>",
                "<fim-suffix>",
                "<fim_suffix>",
                "<｜fim▁hole｜>",
                "<SUF>",
                "▁<SUF>",
                "<|code_suffix|>",
                "<|suffix|>",
            ],
        ),
        (
            |s| &mut s.fim_mid,
            &[
                "<|fim_middle|>",
                "<fim-middle>",
                "<fim_middle>",
                "<｜fim▁end｜>",
                "<MID>",
                "▁<MID>",
                "<|code_middle|>",
                "<|middle|>",
            ],
        ),
        (|s| &mut s.fim_pad, &["<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"]),
        (|s| &mut s.fim_rep, &["<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"]),
        (|s| &mut s.fim_sep, &["<|file_sep|>"]),
    ];
    for (slot, texts) in by_text {
        if slot(special).is_some() {
            continue;
        }
        if let Some(id) = tokens.iter().position(|t| texts.contains(&t.text.as_str())) {
            *slot(special) = Some(id as TokenId);
            tokens[id].attr = tokens[id].attr.with(TokenAttr::CONTROL);
        }
    }
    for t in tokens.iter_mut() {
        if t.attr.intersects(TokenAttr::CONTROL) && t.text.contains("unused") {
            t.attr = t.attr.with(TokenAttr::UNUSED);
        }
    }

    const EOG_TEXTS: [&str; 22] = [
        "<|eot_id|>",
        "<|im_end|>",
        "<|end|>",
        "<|return|>",
        "<|call|>",
        "<|flush|>",
        "<|calls|>",
        "<end_of_turn>",
        "<|endoftext|>",
        "</s>",
        "<|eom_id|>",
        "<EOT>",
        "_<EOT>",
        "[EOT]",
        "[EOS]",
        "<|end_of_text|>",
        "<end_of_utterance>",
        "<eos>",
        "<turn|>",
        "<|tool_response>",
        "<｜end▁of▁sentence｜>",
        "[e~[",
    ];
    let mut eog: Vec<TokenId> = [special.fim_pad, special.fim_rep, special.fim_sep].into_iter().flatten().collect();
    for (id, t) in tokens.iter_mut().enumerate() {
        if EOG_TEXTS.contains(&t.text.as_str()) {
            eog.push(id as TokenId);
            t.attr = t.attr.with(TokenAttr::CONTROL);
        }
    }
    eog.extend([special.eos, special.eot, special.eom].into_iter().flatten());
    eog.sort_unstable();
    eog.dedup();
    eog
}

/// Per-model attribute fix-ups llama.cpp applies by model name: Phi-3's
/// special tokens swallow the spaces after them.
fn apply_model_attributes(gguf: &Gguf, tokens: &mut [Token], ids: &HashMap<String, TokenId>) -> Result<()> {
    let name = gguf.get_opt::<&str>("general.name")?.unwrap_or("").to_lowercase();
    if name.contains("phi-3") || name.contains("phi3") {
        let special = TokenAttr::CONTROL.with(TokenAttr::USER_DEFINED).with(TokenAttr::UNKNOWN);
        for t in tokens.iter_mut().filter(|t| t.attr.intersects(special)) {
            t.attr = t.attr.with(TokenAttr::RSTRIP);
        }
        let mut set = |text: &str, on: bool| {
            if let Some(&id) = ids.get(text) {
                let t = &mut tokens[id as usize];
                t.attr = if on { t.attr.with(TokenAttr::RSTRIP) } else { t.attr.without(TokenAttr::RSTRIP) };
            }
        };
        set("</s>", true);
        for text in ["<unk>", "<s>", "<|endoftext|>"] {
            set(text, false);
        }
    }
    Ok(())
}
