//! A GGUF decoder model through the real loader: a small llama or Gemma 3
//! written with Gantry's own [`GgufWriter`] from metadata the fuzzer
//! chooses (sizes, head counts, rope and norm values, context length,
//! vocabulary, tokenizer, file version and alignment; each value as is,
//! missing, of another type or wild: zero, huge, negative, NaN), with tensors
//! it may drop, retype, reshape, duplicate or describe without data (zero
//! and huge dimensions), loaded on the CPU by [`DecoderModel::load`] and, if
//! it loads, run forward over a few tokens of a short text.
//!
//! What must hold ([`run`] returns an `Err` naming what broke): a load or a
//! forward is `Ok` or an error; a forward gives one logit per token of the
//! vocabulary. A panic, an abort, a hang or unbounded memory is a finding
//! too (libFuzzer reports them).

use arbitrary::{Result as ArbResult, Unstructured};
use gantry_engine::{Context, DType, SplitMix64, quant::quantize_row};
use half::{bf16, f16};

use super::Outcome;
use super::host::{Scratch, cpu_backend};
use crate::model::blocks::Attention;
use crate::model::decoder::{DecoderModel, LogitsFor, Session, SessionParams};
use crate::model::gguf::{Array, GgufWriter, Value};

/// Wild unsigned values for counts and sizes.
const WILD_U32: [u32; 9] = [0, 1, 3, 255, 4097, 65_536, 1 << 24, 1 << 31, u32::MAX];
/// Wild 64-bit values, for keys read as `u32` and for tensor dimensions.
const WILD_U64: [u64; 7] = [0, 1 << 32, 1 << 40, 1 << 62, u64::MAX, u64::MAX / 2, (1 << 32) + 1];
/// Wild floats for rope bases, scales, epsilons and soft-caps.
const WILD_F32: [f32; 10] = [0.0, -0.0, -1.0, 1e-45, 1e-30, 1e30, f32::MAX, f32::NAN, f32::INFINITY, f32::NEG_INFINITY];
/// The types a tensor may be retyped to.
const DTYPES: [DType; 12] = [
    DType::F32,
    DType::F16,
    DType::BF16,
    DType::I32,
    DType::Q8_0,
    DType::Q4_0,
    DType::Q4_K,
    DType::Q6_K,
    DType::Q8_K,
    DType::IQ4_NL,
    DType::IQ4_XS,
    DType::MXFP4,
];
/// The pieces of the texts fed to the tokenizer.
const TEXT_PIECES: [&str; 12] = ["a", "b", "ab", " ", "▁", "\n", "é", "🦙", "<s>", "</s>", "hello", "\u{0}"];

/// One tensor to write: name, dimensions (ggml order), type, and whether it
/// is a norm (ones, so that a forward stays finite).
struct PlannedTensor {
    name: String,
    dims: Vec<usize>,
    dtype: DType,
    norm: bool,
}

/// A model file built from the bytes, and what to run it with.
struct Built {
    file: Vec<u8>,
    text: String,
    extra_token: Option<u32>,
    params: SessionParams,
}

/// Runs one input; `Err` names the invariant it broke.
pub fn run(data: &[u8]) -> Result<Outcome, String> {
    let mut u = Unstructured::new(data);
    let Ok(built) = build(&mut u) else {
        return Ok(Outcome::Refused("the bytes ran out while building".into()));
    };
    let scratch = Scratch::new("model");
    let path = scratch.write("model.gguf", &built.file);
    let backend = cpu_backend();
    let mut ctx = Context::new();
    let model = match DecoderModel::load(&path, &mut ctx, backend.device(), None) {
        Ok(m) => m,
        Err(e) => return Ok(Outcome::Refused(e.to_string())),
    };
    let mut tokens = match model.tokenizer.encode(&built.text, true, true) {
        Ok(t) => t,
        Err(e) => return Ok(Outcome::FailedToRun(format!("tokenizing {:?}: {e}", built.text))),
    };
    let _ = model.tokenizer.decode(&tokens, true, false);
    tokens.truncate(6);
    tokens.extend(built.extra_token);
    if tokens.is_empty() {
        tokens.push(0);
    }
    let mut session =
        match Session::new(&mut ctx, model.hp, model.weights.clone(), std::slice::from_ref(&backend), built.params) {
            Ok(s) => s,
            Err(e) => return Ok(Outcome::FailedToRun(e.to_string())),
        };
    match session.eval(&mut ctx, &tokens, LogitsFor::Last) {
        Ok(logits) if logits.len() == model.hp.n_vocab => Ok(Outcome::Ran),
        Ok(logits) => Err(format!("{} logits for a vocabulary of {}", logits.len(), model.hp.n_vocab)),
        Err(e) => Ok(Outcome::FailedToRun(e.to_string())),
    }
}

/// `default` unless the next byte asks for a mutation: the key left out, a
/// wild number of several types, a string, an array.
fn value(u: &mut Unstructured<'_>, default: Value) -> ArbResult<Option<Value>> {
    Ok(match u.int_in_range(0u8..=31)? {
        0..=25 => Some(default),
        26 => None,
        27 => Some(Value::U32(WILD_U32[u.choose_index(WILD_U32.len())?])),
        28 => Some(Value::F32(WILD_F32[u.choose_index(WILD_F32.len())?])),
        29 => Some(Value::U64(WILD_U64[u.choose_index(WILD_U64.len())?])),
        30 => Some(if u.arbitrary()? { Value::I32(-1) } else { Value::String("7".into()) }),
        _ => Some(Value::Array(Array::U32(vec![1, 2]))),
    })
}

/// A key the model needs, written as `default` or mutated.
fn put(u: &mut Unstructured<'_>, w: &mut GgufWriter, key: &str, default: Value) -> ArbResult<()> {
    if let Some(v) = value(u, default)? {
        w.add(key, v);
    }
    Ok(())
}

/// An optional key: left out unless the next byte says to write it, as
/// `sensible` or mutated.
fn put_opt(u: &mut Unstructured<'_>, w: &mut GgufWriter, key: &str, sensible: Value) -> ArbResult<()> {
    if u.int_in_range(0u8..=3)? == 3 {
        put(u, w, key, sensible)?;
    }
    Ok(())
}

/// A number from `low..=high`, or now and then one of `wild`.
fn size(u: &mut Unstructured<'_>, low: usize, high: usize, wild: &[usize]) -> ArbResult<usize> {
    if u.int_in_range(0u8..=15)? == 15 { Ok(wild[u.choose_index(wild.len())?]) } else { u.int_in_range(low..=high) }
}

fn build(u: &mut Unstructured<'_>) -> ArbResult<Built> {
    let arch = match u.int_in_range(0u8..=15)? {
        0..=7 => "llama",
        8..=13 => "gemma3",
        14 => "mamba",
        _ => "",
    };
    let gemma = arch == "gemma3";
    let head_dim = 2 * u.int_in_range(1usize..=4)?;
    let n_head = u.int_in_range(1usize..=4)?;
    let divisors: Vec<usize> = (1..=n_head).filter(|d| n_head.is_multiple_of(*d)).collect();
    let n_head_kv = divisors[u.choose_index(divisors.len())?];
    // Widths that quantized types can take (multiples of 32 and 256) now and then.
    let n_embd = match u.int_in_range(0u8..=7)? {
        0..=3 => n_head * head_dim,
        4 => 32,
        5 => 64,
        6 => 256,
        _ => u.int_in_range(1..=48)?,
    };
    let n_ff = size(u, 1, 32, &[32, 64, 256])?;
    let n_layer = u.int_in_range(1usize..=3)?;
    let n_ctx_train = size(u, 64, 96, &[0, 1, 2, 1 << 20])?;

    let mut w = GgufWriter::new();
    match u.int_in_range(0u8..=15)? {
        15 => _ = w.set_version(u.int_in_range(0..=4)?),
        14 => _ = w.set_alignment(*u.choose(&[1, 8, 64])?),
        // An alignment key the layout does not follow (the writer would pad to a huge one).
        13 => _ = w.add_u32("general.alignment", *u.choose(&[0, 3, 4096, 1 << 31, u32::MAX])?),
        _ => {}
    }
    put(u, &mut w, "general.architecture", Value::String(arch.into()))?;
    let key = |k: &str| format!("{arch}.{k}");
    let u32v = |n: usize| Value::U32(n as u32);
    put(u, &mut w, &key("embedding_length"), u32v(n_embd))?;
    put(u, &mut w, &key("block_count"), u32v(n_layer))?;
    put(u, &mut w, &key("attention.head_count"), u32v(n_head))?;
    put(u, &mut w, &key("attention.head_count_kv"), u32v(n_head_kv))?;
    put(u, &mut w, &key("attention.key_length"), u32v(head_dim))?;
    put(u, &mut w, &key("feed_forward_length"), u32v(n_ff))?;
    put(u, &mut w, &key("attention.layer_norm_rms_epsilon"), Value::F32(1e-5))?;
    put(u, &mut w, &key("context_length"), u32v(n_ctx_train))?;
    put_opt(u, &mut w, &key("rope.freq_base"), Value::F32(10000.0))?;
    put_opt(u, &mut w, &key("rope.scaling.factor"), Value::F32(2.0))?;
    if gemma {
        let window = u.int_in_range(4..=8)?;
        put(u, &mut w, &key("attention.sliding_window"), u32v(window))?;
        put_opt(u, &mut w, &key("attention.sliding_window_pattern"), u32v(2))?;
        put_opt(u, &mut w, &key("rope.freq_base_swa"), Value::F32(10000.0))?;
        put_opt(u, &mut w, &key("attn_logit_softcapping"), Value::F32(50.0))?;
        put_opt(u, &mut w, &key("final_logit_softcapping"), Value::F32(30.0))?;
    }
    let n_vocab = vocabulary(u, &mut w)?;
    put_opt(u, &mut w, &key("vocab_size"), u32v(n_vocab))?;

    let (q, kv) = (n_head * head_dim, n_head_kv * head_dim);
    let mut tensors =
        vec![planned("token_embd.weight", &[n_embd, n_vocab], false), planned("output_norm.weight", &[n_embd], true)];
    if u.int_in_range(0u8..=3)? == 3 {
        tensors.push(planned("output.weight", &[n_embd, n_vocab], false));
    }
    for l in 0..n_layer {
        let mut layer = vec![
            ("attn_norm", vec![n_embd]),
            ("attn_q", vec![n_embd, q]),
            ("attn_k", vec![n_embd, kv]),
            ("attn_v", vec![n_embd, kv]),
            ("attn_output", vec![q, n_embd]),
            ("ffn_norm", vec![n_embd]),
            ("ffn_gate", vec![n_embd, n_ff]),
            ("ffn_up", vec![n_embd, n_ff]),
            ("ffn_down", vec![n_ff, n_embd]),
        ];
        if gemma {
            layer.extend([
                ("attn_q_norm", vec![head_dim]),
                ("attn_k_norm", vec![head_dim]),
                ("post_attention_norm", vec![n_embd]),
                ("post_ffw_norm", vec![n_embd]),
            ]);
        }
        for (n, dims) in layer {
            tensors.push(planned(&format!("blk.{l}.{n}.weight"), &dims, dims.len() == 1));
        }
    }
    // Matrices in another type, where their rows fit its blocks.
    let matrix_dtype = match u.int_in_range(0u8..=7)? {
        0..=3 => DType::F32,
        4 => DType::F16,
        5 => DType::Q8_0,
        6 => DType::Q4_K,
        _ => *u.choose(&DTYPES)?,
    };
    for t in tensors.iter_mut().filter(|t| !t.norm && t.dims[0].is_multiple_of(matrix_dtype.block_size())) {
        t.dtype = matrix_dtype;
    }
    let mut rng = SplitMix64::new(u.arbitrary()?);
    let fill = u.int_in_range(0u8..=7)?;
    for t in &tensors {
        write_tensor(u, &mut w, t, &mut rng, fill)?;
    }
    for _ in 0..u.int_in_range(0..=2)? {
        let name = match u.int_in_range(0u8..=3)? {
            0 => tensors[u.choose_index(tensors.len())?].name.clone(),
            1 => format!("blk.{n_layer}.attn_q.weight"),
            2 => "rope_freqs.weight".into(),
            _ => String::new(),
        };
        let t = PlannedTensor {
            name,
            dims: vec![u.int_in_range(1..=8)?, u.int_in_range(1..=3)?],
            dtype: DType::F32,
            norm: false,
        };
        write_tensor(u, &mut w, &t, &mut rng, fill)?;
    }
    let mut file = w.to_bytes();
    if u.int_in_range(0u8..=31)? == 31 {
        let cut = u.int_in_range(0..=file.len())?;
        file.truncate(cut);
    }

    let mut text = String::new();
    for _ in 0..u.int_in_range(0..=6)? {
        text.push_str(TEXT_PIECES[u.choose_index(TEXT_PIECES.len())?]);
    }
    let extra_token = match u.int_in_range(0u8..=15)? {
        15 => Some(*u.choose(&[n_vocab as u32, n_vocab as u32 + 1, u32::MAX, 1 << 31])?),
        _ => None,
    };
    let params = SessionParams {
        n_ctx: size(u, 16, 32, &[0, 1, 2, 3, 256, 4096])?,
        kv_dtype: *u.choose(&[DType::F16, DType::F32, DType::Q8_0])?,
        attention: if u.arbitrary()? { Attention::Explicit } else { Attention::Flash },
        ..SessionParams::default()
    };
    Ok(Built { file, text, extra_token, params })
}

fn planned(name: &str, dims: &[usize], norm: bool) -> PlannedTensor {
    PlannedTensor { name: name.into(), dims: dims.to_vec(), dtype: DType::F32, norm }
}

/// Adds `t` to `w`, as planned or mutated: left out, retyped, reshaped, or
/// written as a bare tensor info (dimensions up to 2^64 - 1, zero among
/// them; any type id; an offset in or past the data) without bytes.
fn write_tensor(
    u: &mut Unstructured<'_>,
    w: &mut GgufWriter,
    t: &PlannedTensor,
    rng: &mut SplitMix64,
    fill: u8,
) -> ArbResult<()> {
    let mut dims = t.dims.clone();
    let mut dtype = t.dtype;
    match u.int_in_range(0u8..=63)? {
        60 => return Ok(()),
        61 => dtype = *u.choose(&DTYPES)?,
        62 => {
            let i = u.choose_index(dims.len() + 1)?;
            match (dims.get_mut(i), u.int_in_range(0u8..=3)?) {
                (Some(d), 0) => *d += 1,
                (Some(d), 1) => *d = d.saturating_sub(1),
                (Some(d), 2) => *d = 0,
                (Some(d), _) => *d = 1,
                (None, _) => dims.push(u.int_in_range(0..=2)?),
            }
        }
        63 => {
            let mut raw: Vec<u64> = dims.iter().map(|&d| d as u64).collect();
            for d in &mut raw {
                if u.arbitrary()? {
                    *d = WILD_U64[u.choose_index(WILD_U64.len())?];
                }
            }
            if u.arbitrary()? {
                raw.push(*u.choose(&[0, 1, 2, u64::MAX])?);
            }
            let type_id = if u.arbitrary()? { dtype.ggml_id() } else { u.int_in_range(0..=40)? };
            let offset = *u.choose(&[0, 32, 1 << 20, u64::MAX - 31])?;
            w.add_raw_tensor_info(&t.name, &raw, type_id, offset);
            return Ok(());
        }
        _ => {}
    }
    let n: usize = dims.iter().product();
    let values: Vec<f32> = (0..n)
        .map(|_| match fill {
            7 => f32::NAN,
            6 => 1e30,
            5 => 0.0,
            _ if t.norm => 1.0,
            _ => (rng.next_u64() % 2001) as f32 * 5e-5 - 0.05,
        })
        .collect();
    let bytes: Vec<u8> = match dtype {
        DType::F32 => values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        DType::F16 => values.iter().flat_map(|v| f16::from_f32(*v).to_le_bytes()).collect(),
        DType::BF16 => values.iter().flat_map(|v| bf16::from_f32(*v).to_le_bytes()).collect(),
        DType::I32 => values.iter().flat_map(|v| (*v as i32).to_le_bytes()).collect(),
        q => {
            let row = dims.first().copied().unwrap_or(1);
            let Some(row_bytes) = q.row_size(row) else {
                // Rows that do not fill the type's blocks: the info alone.
                let raw: Vec<u64> = dims.iter().map(|&d| d as u64).collect();
                w.add_raw_tensor_info(&t.name, &raw, q.ggml_id(), 0);
                return Ok(());
            };
            let rows = n.checked_div(row).unwrap_or(0);
            let mut out = vec![0u8; row_bytes * rows];
            for (src, dst) in values.chunks(row.max(1)).zip(out.chunks_mut(row_bytes.max(1))) {
                if quantize_row(q, src, dst).is_err() {
                    dst.fill(0);
                }
            }
            out
        }
    };
    if w.add_tensor(&t.name, &dims, dtype, bytes).is_err() {
        // More dimensions than a tensor may have, say: the info alone.
        let raw: Vec<u64> = dims.iter().map(|&d| d as u64).collect();
        w.add_raw_tensor_info(&t.name, &raw, dtype.ggml_id(), 0);
    }
    Ok(())
}

/// Writes a tokenizer (a SentencePiece vocabulary or a byte-level BPE one
/// with merges), each key as is or mutated; the number of tokens.
fn vocabulary(u: &mut Unstructured<'_>, w: &mut GgufWriter) -> ArbResult<usize> {
    let bpe = u.int_in_range(0u8..=3)? == 3;
    let (model, mut tokens, mut types): (&str, Vec<String>, Vec<i32>) = if bpe {
        // GPT-2's byte alphabet: printable bytes as themselves, the rest shifted past 255.
        let mut shifted = 0u32;
        let tokens = (0..=255u8)
            .map(|b| {
                if (b'!'..=b'~').contains(&b) || (0xa1..=0xac).contains(&b) || (0xae..=0xff).contains(&b) {
                    char::from(b).to_string()
                } else {
                    shifted += 1;
                    char::from_u32(255 + shifted).map_or_else(String::new, String::from)
                }
            })
            .collect();
        ("gpt2", tokens, vec![1; 256])
    } else {
        let specials = ["<unk>", "<s>", "</s>"].map(String::from);
        ("llama", specials.to_vec(), vec![2, 3, 3])
    };
    for piece in ["▁", "a", "b", "ab", "▁a", "he", "hello", "<|end|>"].iter().take(u.int_in_range(1..=8)?) {
        tokens.push((*piece).into());
        types.push(if piece.starts_with('<') { 3 } else { 1 });
    }
    let n = tokens.len();
    put(u, w, "tokenizer.ggml.model", Value::String(model.into()))?;
    if bpe {
        put_opt(u, w, "tokenizer.ggml.pre", Value::String("gpt-2".into()))?;
        let merges = ["h e", "a b", "he l", "Ġ a", "x y"].map(String::from).to_vec();
        put(u, w, "tokenizer.ggml.merges", Value::Array(Array::String(merges)))?;
    } else {
        put(u, w, "tokenizer.ggml.scores", Value::Array(Array::F32(vec![0.0; n])))?;
    }
    if u.int_in_range(0u8..=15)? == 15 {
        // One token more or fewer than the other arrays and the embeddings have.
        if u.arbitrary()? {
            tokens.push("extra".into());
        } else {
            tokens.pop();
        }
    }
    if u.int_in_range(0u8..=15)? == 15 {
        let i = u.choose_index(types.len())?;
        types[i] = *u.choose(&[0, 5, 6, -1, i32::MAX])?;
    }
    put(u, w, "tokenizer.ggml.tokens", Value::Array(Array::String(tokens)))?;
    put(u, w, "tokenizer.ggml.token_type", Value::Array(Array::I32(types)))?;
    if !bpe {
        put_opt(u, w, "tokenizer.ggml.bos_token_id", Value::U32(1))?;
    }
    put_opt(u, w, "tokenizer.ggml.eos_token_id", Value::U32(n as u32 - 1))?;
    put_opt(u, w, "tokenizer.ggml.add_bos_token", Value::Bool(true))?;
    Ok(n)
}

/// Inputs the fuzzer starts from, by name (what `fuzz/seeds/model_loader`
/// holds): valid llama and Gemma 3 models that load and run.
pub fn seed_inputs() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("llama-tiny", Vec::new()),
        // Gemma 3, two heads of 4 over one KV head, width 8.
        ("gemma3-tiny", vec![8, 1, 1, 0]),
        // Llama, four heads of 8 over two KV heads, width 32, three layers.
        ("llama-gqa", vec![0, 3, 3, 1, 0, 4, 2]),
    ]
}
