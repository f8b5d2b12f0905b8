//! A BERT folder through the real loader: `config.json`, `model.safetensors`
//! and `tokenizer.json` of a tiny encoder written from values the fuzzer
//! chooses — each config field as is, missing, zero, huge, negative, a
//! float, a string or null; tensors it may drop, retype or reshape, and
//! safetensors headers whose byte ranges it may bend; a WordPiece
//! tokenizer whose vocabulary, special-token ids and limits it picks;
//! sentence-transformers' `modules.json`, pooling config and
//! `sentence_bert_config.json`, well formed or not —
//! loaded on the CPU by [`BertModel::load`] and, if it loads, embedding
//! one or two short texts.
//!
//! What must hold ([`run`] returns an `Err` naming what broke): a load or an
//! embedding is `Ok` or an error; an embedding has `hidden_size` floats per
//! text. A panic, an abort, a hang or unbounded memory is a finding too
//! (libFuzzer reports them).

use arbitrary::{Result as ArbResult, Unstructured};
use gantry_engine::{Context, SplitMix64};
use half::{bf16, f16};
use serde_json::{Value as Json, json};

use super::Outcome;
use super::host::{Scratch, cpu_backend};
use crate::model::bert::{BertModel, Encoder, EncoderParams};

/// Wild numbers for config fields.
const WILD: [i64; 9] = [0, 1, 3, -1, 1 << 20, 1 << 32, 1 << 40, i64::MAX, i64::MIN];
/// The pieces of the texts embedded.
const TEXT_PIECES: [&str; 12] = ["a", "b", "ab", " ", "##a", "[CLS]", "[SEP]", "é", "中", "\t", "a b a b", "\u{0}"];

/// One tensor of the safetensors file: name, row-major shape, file dtype.
struct PlannedTensor {
    name: String,
    shape: Vec<usize>,
    dtype: &'static str,
}

/// Runs one input; `Err` names the invariant it broke.
pub fn run(data: &[u8]) -> Result<Outcome, String> {
    let mut u = Unstructured::new(data);
    let scratch = Scratch::new("bert");
    let Ok(texts) = build(&mut u, &scratch) else {
        return Ok(Outcome::Refused("the bytes ran out while building".into()));
    };
    let backend = cpu_backend();
    let mut ctx = Context::new();
    let model = match BertModel::load(scratch.dir(), &mut ctx, backend.device()) {
        Ok(m) => m,
        Err(e) => return Ok(Outcome::Refused(e.to_string())),
    };
    let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
    let batch = match model.tokenize(&texts) {
        Ok(b) => b,
        Err(e) => return Ok(Outcome::FailedToRun(e.to_string())),
    };
    let mut encoder = match Encoder::new(&mut ctx, &model, std::slice::from_ref(&backend), EncoderParams::default()) {
        Ok(e) => e,
        Err(e) => return Ok(Outcome::FailedToRun(e.to_string())),
    };
    match encoder.embed(&mut ctx, &batch) {
        Ok(e) if e.len() == texts.len() * model.config.hidden_size => Ok(Outcome::Ran),
        Ok(e) => Err(format!("{} floats for {} texts of width {}", e.len(), texts.len(), model.config.hidden_size)),
        Err(e) => Ok(Outcome::FailedToRun(e.to_string())),
    }
}

/// `default` unless the next byte asks for a mutation: the field left out
/// (`None`), a wild integer, a float, a string, null.
fn field(u: &mut Unstructured<'_>, default: Json) -> ArbResult<Option<Json>> {
    Ok(match u.int_in_range(0u8..=31)? {
        0..=25 => Some(default),
        26 => None,
        27 | 28 => Some(json!(WILD[u.choose_index(WILD.len())?])),
        29 => Some(json!(*u.choose(&[0.5, -0.0, 1e300, f64::MIN_POSITIVE])?)),
        30 => Some(json!("8")),
        _ => Some(Json::Null),
    })
}

/// Writes the folder into `scratch`; the texts to embed.
fn build(u: &mut Unstructured<'_>, scratch: &Scratch) -> ArbResult<Vec<String>> {
    let n_head = u.int_in_range(1usize..=4)?;
    let hidden = n_head * 2 * u.int_in_range(1usize..=4)?;
    let n_layer = u.int_in_range(1usize..=2)?;
    let ff = u.int_in_range(1usize..=32)?;
    let positions = u.int_in_range(8usize..=16)?;
    let types = u.int_in_range(1usize..=2)?;

    // The tokenizer's vocabulary: the four specials, then word pieces.
    let mut vocab: Vec<&str> = vec!["[PAD]", "[UNK]", "[CLS]", "[SEP]"];
    vocab.extend(["a", "b", "##a", "##b", "é", "中"].iter().take(u.int_in_range(1..=6)?));
    let n_vocab = vocab.len();

    let mut config = serde_json::Map::new();
    for (key, default) in [
        ("model_type", json!("bert")),
        ("vocab_size", json!(n_vocab)),
        ("hidden_size", json!(hidden)),
        ("num_hidden_layers", json!(n_layer)),
        ("num_attention_heads", json!(n_head)),
        ("intermediate_size", json!(ff)),
        ("max_position_embeddings", json!(positions)),
        ("type_vocab_size", json!(types)),
        ("layer_norm_eps", json!(1e-12)),
        ("hidden_act", json!("gelu")),
    ] {
        if let Some(v) = field(u, default)? {
            config.insert(key.into(), v);
        }
    }
    let config = match u.int_in_range(0u8..=31)? {
        31 => "{\"model_type\": \"bert\", ".into(),
        30 => "[]".into(),
        _ => Json::Object(config).to_string(),
    };
    scratch.write("config.json", config.as_bytes());
    scratch.write("tokenizer.json", tokenizer(u, &vocab)?.as_bytes());

    let mut tensors = vec![
        planned("embeddings.word_embeddings.weight", &[n_vocab, hidden]),
        planned("embeddings.position_embeddings.weight", &[positions, hidden]),
        planned("embeddings.token_type_embeddings.weight", &[types, hidden]),
        planned("embeddings.LayerNorm.weight", &[hidden]),
        planned("embeddings.LayerNorm.bias", &[hidden]),
    ];
    if u.arbitrary()? {
        tensors.push(PlannedTensor { name: "embeddings.position_ids".into(), shape: vec![1, positions], dtype: "I64" });
    }
    for l in 0..n_layer {
        let p = format!("encoder.layer.{l}.");
        for (n, out, inp) in [
            ("attention.self.query", hidden, hidden),
            ("attention.self.key", hidden, hidden),
            ("attention.self.value", hidden, hidden),
            ("attention.output.dense", hidden, hidden),
            ("intermediate.dense", ff, hidden),
            ("output.dense", hidden, ff),
        ] {
            tensors.push(planned(&format!("{p}{n}.weight"), &[out, inp]));
            tensors.push(planned(&format!("{p}{n}.bias"), &[out]));
        }
        for n in ["attention.output.LayerNorm", "output.LayerNorm"] {
            tensors.push(planned(&format!("{p}{n}.weight"), &[hidden]));
            tensors.push(planned(&format!("{p}{n}.bias"), &[hidden]));
        }
    }
    let prefix = if u.int_in_range(0u8..=7)? == 7 { "bert." } else { "" };
    let dtype = *u.choose(&["F32", "F32", "F16", "BF16"])?;
    for t in &mut tensors {
        if t.dtype == "F32" {
            t.dtype = dtype;
        }
        t.name.insert_str(0, prefix);
    }
    scratch.write("model.safetensors", &safetensors(u, &mut tensors)?);

    let mut texts = Vec::new();
    for _ in 0..u.int_in_range(1..=2)? {
        let mut text = String::new();
        for _ in 0..u.int_in_range(0..=8)? {
            text.push_str(TEXT_PIECES[u.choose_index(TEXT_PIECES.len())?]);
        }
        texts.push(text);
    }
    // Drawn last, so that the seeds (and every kept input) stay plain folders.
    sentence_transformers(u, scratch, hidden, positions)?;
    Ok(texts)
}

/// sentence-transformers' own files, as the next byte's bits ask:
/// `modules.json` (the pipeline's modules or others, in any order, twice,
/// with paths that escape or name a sub-folder), the pooling module's
/// `config.json` (modes of any JSON type, widths) and
/// `sentence_bert_config.json` (lengths, lowercasing, wrong types).
fn sentence_transformers(
    u: &mut Unstructured<'_>,
    scratch: &Scratch,
    hidden: usize,
    positions: usize,
) -> ArbResult<()> {
    let which = u.int_in_range(0u8..=7)?;
    let any = |u: &mut Unstructured<'_>, choices: &[Json]| -> ArbResult<Option<Json>> {
        let i = u.choose_index(choices.len() + 1)?;
        Ok(choices.get(i).cloned())
    };
    if which & 1 != 0 {
        const MODULES: [(&str, &[&str]); 4] = [
            ("Transformer", &["", "0_BERT"]),
            ("Pooling", &["1_Pooling", "", "..", "2_Other", "a/b"]),
            ("Normalize", &["2_Normalize"]),
            ("Dense", &["2_Dense"]),
        ];
        let mut list = Vec::new();
        // Most often the pipeline's own order; else any modules.
        let order: Vec<usize> = if u.arbitrary()? {
            vec![0, 1, 2]
        } else {
            (0..u.int_in_range(0..=4)?).map(|_| u.choose_index(MODULES.len())).collect::<ArbResult<_>>()?
        };
        for (idx, &m) in order.iter().enumerate() {
            let (kind, paths) = MODULES[m];
            let path = if u.int_in_range(0u8..=7)? == 7 { *u.choose(paths)? } else { paths[0] };
            list.push(json!({"idx": idx, "name": idx.to_string(), "path": path,
                             "type": format!("sentence_transformers.models.{kind}")}));
        }
        let text = match u.int_in_range(0u8..=15)? {
            15 => "{}".to_owned(),
            14 => "[1, null]".to_owned(),
            _ => Json::Array(list).to_string(),
        };
        scratch.write("modules.json", text.as_bytes());
    }
    if which & 2 != 0 {
        let mode = [json!(true), json!(false), json!(1), json!("true"), Json::Null];
        let mut config = serde_json::Map::new();
        if let Some(v) = any(u, &[json!(hidden), json!(hidden + 1), Json::Null, json!("x")])? {
            config.insert("word_embedding_dimension".into(), v);
        }
        for key in ["pooling_mode_mean_tokens", "pooling_mode_cls_token", "pooling_mode_max_tokens"] {
            let default = json!(key == "pooling_mode_mean_tokens");
            let v = if u.int_in_range(0u8..=7)? == 7 { any(u, &mode)? } else { Some(default) };
            if let Some(v) = v {
                config.insert(key.into(), v);
            }
        }
        scratch.write("1_Pooling/config.json", Json::Object(config).to_string().as_bytes());
    }
    if which & 4 != 0 {
        let mut config = serde_json::Map::new();
        let lengths = [json!(positions), json!(0), json!(1), json!(2), json!(3), json!(positions + 1)];
        let wild = [json!(1u64 << 40), json!(-1), json!("256"), json!(2.5), Json::Null];
        let length = if u.arbitrary()? { any(u, &lengths)? } else { any(u, &wild)? };
        if let Some(v) = length {
            config.insert("max_seq_length".into(), v);
        }
        if let Some(v) = any(u, &[json!(true), json!(false), json!(1), Json::Null])? {
            config.insert("do_lower_case".into(), v);
        }
        scratch.write("sentence_bert_config.json", Json::Object(config).to_string().as_bytes());
    }
    Ok(())
}

fn planned(name: &str, shape: &[usize]) -> PlannedTensor {
    PlannedTensor { name: name.into(), shape: shape.to_vec(), dtype: "F32" }
}

/// A WordPiece `tokenizer.json` over `vocab`, with the special tokens' ids,
/// the word length limit, the normalizer and pre-tokenizer chosen.
fn tokenizer(u: &mut Unstructured<'_>, vocab: &[&str]) -> ArbResult<String> {
    let mut id = |default: usize| -> ArbResult<i64> {
        Ok(if u.int_in_range(0u8..=15)? == 15 {
            *u.choose(&[vocab.len() as i64, 1 << 31, -1])?
        } else {
            default as i64
        })
    };
    let (cls, sep) = (id(2)?, id(3)?);
    let unk = if u.int_in_range(0u8..=15)? == 15 { "[MISSING]" } else { "[UNK]" };
    let max_chars = *u.choose(&[100, 0, 1, 3])?;
    let vocab_map: serde_json::Map<String, Json> =
        vocab.iter().enumerate().map(|(i, t)| ((*t).into(), json!(i))).collect();
    let post = match u.int_in_range(0u8..=3)? {
        0 | 1 => json!({"type": "BertProcessing", "sep": ["[SEP]", sep], "cls": ["[CLS]", cls]}),
        2 => json!({"type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                       {"SpecialToken": {"id": "[SEP]", "type_id": *u.choose(&[0, 1, 7])?}}],
            "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {"[CLS]": {"id": "[CLS]", "ids": [cls], "tokens": ["[CLS]"]},
                               "[SEP]": {"id": "[SEP]", "ids": [sep], "tokens": ["[SEP]"]}}}),
        _ => Json::Null,
    };
    let normalizer = if u.arbitrary()? {
        json!({"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true, "strip_accents": null, "lowercase": true})
    } else {
        Json::Null
    };
    let pre = if u.arbitrary()? { json!({"type": "BertPreTokenizer"}) } else { json!({"type": "Whitespace"}) };
    let truncation = if u.int_in_range(0u8..=7)? == 7 {
        json!({"direction": "Right", "max_length": *u.choose(&[0, 1, 2, 1 << 30])?, "strategy": "LongestFirst", "stride": 0})
    } else {
        Json::Null
    };
    let doc = json!({
        "version": "1.0", "truncation": truncation, "padding": null, "added_tokens": [],
        "normalizer": normalizer, "pre_tokenizer": pre, "post_processor": post, "decoder": null,
        "model": {"type": "WordPiece", "unk_token": unk, "continuing_subword_prefix": "##",
                  "max_input_chars_per_word": max_chars, "vocab": vocab_map}
    });
    Ok(doc.to_string())
}

/// The safetensors file of `tensors`, each as planned or mutated (left out,
/// retyped, reshaped, its byte range moved), with small values (norm
/// weights one) so that an embedding stays finite.
fn safetensors(u: &mut Unstructured<'_>, tensors: &mut [PlannedTensor]) -> ArbResult<Vec<u8>> {
    let mut rng = SplitMix64::new(u.arbitrary()?);
    let mut header = serde_json::Map::new();
    if u.arbitrary()? {
        header.insert("__metadata__".into(), json!({"format": "pt"}));
    }
    let mut data = Vec::new();
    for t in tensors.iter_mut() {
        let mut range_shift: Option<(i64, i64)> = None;
        match u.int_in_range(0u8..=63)? {
            60 => continue,
            61 => t.dtype = *u.choose(&["I64", "F64", "U8", "BOOL", "I32", "F8_E4M3", "X"])?,
            62 => {
                let i = u.choose_index(t.shape.len() + 1)?;
                match t.shape.get_mut(i) {
                    Some(d) => *d = *u.choose(&[0, 1, *d + 1, d.saturating_sub(1)])?,
                    None => t.shape.push(u.int_in_range(0..=2)?),
                }
            }
            63 => range_shift = Some((*u.choose(&[0, -1, 1, 4])?, *u.choose(&[0, -4, 4, 1 << 40])?)),
            _ => {}
        }
        let n: usize = t.shape.iter().product();
        let one = if t.name.ends_with("LayerNorm.weight") { 1.0f32 } else { 0.0 };
        let value = |rng: &mut SplitMix64| one + (rng.next_u64() % 2001) as f32 * 2e-5 - 0.02;
        let start = data.len();
        for _ in 0..n {
            let v = value(&mut rng);
            match t.dtype {
                "F32" => data.extend_from_slice(&v.to_le_bytes()),
                "F16" => data.extend_from_slice(&f16::from_f32(v).to_le_bytes()),
                "BF16" => data.extend_from_slice(&bf16::from_f32(v).to_le_bytes()),
                "I64" | "F64" => data.extend_from_slice(&(v as f64).to_le_bytes()),
                "I32" => data.extend_from_slice(&(v as i32).to_le_bytes()),
                _ => data.push(v as u8),
            }
        }
        let end = data.len();
        let (ds, de) = range_shift.unwrap_or((0, 0));
        let offsets = [start as i64 + ds, end as i64 + de];
        header.insert(t.name.clone(), json!({"dtype": t.dtype, "shape": t.shape, "data_offsets": offsets}));
    }
    let mut header = Json::Object(header).to_string();
    // Padded to 8 bytes as the format's writer does (the data then lies aligned), unless the bytes say not to.
    if u.int_in_range(0u8..=15)? != 15 {
        header.push_str(&" ".repeat(header.len().next_multiple_of(8) - header.len()));
    }
    let mut header_len = header.len() as u64;
    if u.int_in_range(0u8..=31)? == 31 {
        header_len = *u.choose(&[0, header_len + 1, header_len.saturating_sub(1), 1 << 40, u64::MAX])?;
    }
    let mut file = Vec::with_capacity(8 + header.len() + data.len());
    file.extend_from_slice(&header_len.to_le_bytes());
    file.extend_from_slice(header.as_bytes());
    file.extend_from_slice(&data);
    Ok(file)
}

/// Inputs the fuzzer starts from, by name (what `fuzz/seeds/bert_folder`
/// holds): valid folders that load and embed.
pub fn seed_inputs() -> Vec<(&'static str, Vec<u8>)> {
    vec![("bert-tiny", Vec::new()), ("bert-two-heads-two-layers", vec![1, 1, 1, 16, 4, 1, 5])]
}
