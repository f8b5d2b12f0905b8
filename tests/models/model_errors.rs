//! Models that cannot be loaded are errors that name the file and the key
//! or tensor, and leave nothing behind in the context: an unknown
//! architecture, a missing tensor, a tensor of the wrong type, metadata or
//! a config that disagrees with the weights, a tokenizer file that does not
//! parse. Tiny GGUF and safetensors files are written for each case; a
//! valid one of each loads and runs, so each error is the mutation's.

use std::path::Path;

use gantry::backends::cpu::CpuDevice;
use gantry::model::bert::{BertModel, Encoder, EncoderParams};
use gantry::model::decoder::{DecoderModel, LogitsFor, Session, SessionParams};
use gantry::model::gguf::{Array, GgufWriter, Value};
use gantry::{Backend, Context, DType, Device};
use safetensors::Dtype;

/// A scratch folder of one test, removed when it drops (pass or fail); it
/// stands for its path.
pub(crate) struct Scratch(tempfile::TempDir);

impl std::ops::Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        self.0.path()
    }
}

impl AsRef<Path> for Scratch {
    fn as_ref(&self) -> &Path {
        self.0.path()
    }
}

pub(crate) fn temp_dir(name: &str) -> Scratch {
    Scratch(tempfile::Builder::new().prefix(&format!("gantry-model-errors-{name}-")).tempdir().unwrap())
}

pub(crate) fn cpu() -> CpuDevice {
    CpuDevice::new()
}

/// Asserts `ctx` holds no tensor and no buffer (nothing half-loaded).
pub(crate) fn assert_empty(ctx: &Context, what: &str) {
    assert_eq!(ctx.tensor_count(), 0, "{what}: tensors left in the context");
    assert_eq!(ctx.buffers().count(), 0, "{what}: buffers left in the context");
}

// ---- GGUF decoders ------------------------------------------------------------

pub(crate) const N_VOCAB: usize = 8;
pub(crate) const N_EMBD: usize = 32;
const N_FF: usize = 64;

/// A one-layer llama GGUF; `change` may edit the metadata or drop, retype or
/// reshape tensors (name, dims, dtype) before they are written.
pub(crate) fn tiny_llama(
    path: &Path,
    arch: &str,
    change: impl Fn(&mut Vec<(String, Vec<usize>, DType)>, &mut GgufWriter),
) {
    tiny_llama_filled(path, arch, change, |_| None);
}

/// [`tiny_llama`], with every value of an F32 tensor for which `fill`
/// gives one set to it.
pub(crate) fn tiny_llama_filled(
    path: &Path,
    arch: &str,
    change: impl Fn(&mut Vec<(String, Vec<usize>, DType)>, &mut GgufWriter),
    fill: impl Fn(&str) -> Option<f32>,
) {
    let mut w = GgufWriter::new();
    w.add_str("general.architecture", arch);
    w.add_u32(&format!("{arch}.embedding_length"), N_EMBD as u32);
    w.add_u32(&format!("{arch}.block_count"), 1);
    w.add_u32(&format!("{arch}.attention.head_count"), 2);
    w.add_u32(&format!("{arch}.feed_forward_length"), N_FF as u32);
    w.add_f32(&format!("{arch}.attention.layer_norm_rms_epsilon"), 1e-5);
    w.add_str("tokenizer.ggml.model", "llama");
    let tokens: Vec<String> = ["<unk>", "<s>", "</s>", "▁", "a", "b", "c", "d"].map(String::from).to_vec();
    w.add_array("tokenizer.ggml.tokens", Array::String(tokens));
    w.add_array("tokenizer.ggml.token_type", Array::I32(vec![2, 3, 3, 1, 1, 1, 1, 1]));
    w.add_array("tokenizer.ggml.scores", Array::F32(vec![0.0; N_VOCAB]));
    let (e, ff) = (N_EMBD, N_FF);
    let mut tensors: Vec<(String, Vec<usize>, DType)> = vec![
        ("token_embd.weight".into(), vec![e, N_VOCAB], DType::F32),
        ("output_norm.weight".into(), vec![e], DType::F32),
    ];
    for (n, dims) in [
        ("attn_norm", vec![e]),
        ("attn_q", vec![e, e]),
        ("attn_k", vec![e, e]),
        ("attn_v", vec![e, e]),
        ("attn_output", vec![e, e]),
        ("ffn_norm", vec![e]),
        ("ffn_gate", vec![e, ff]),
        ("ffn_up", vec![e, ff]),
        ("ffn_down", vec![ff, e]),
    ] {
        tensors.push((format!("blk.0.{n}.weight"), dims, DType::F32));
    }
    change(&mut tensors, &mut w);
    for (name, dims, dtype) in &tensors {
        let n: usize = dims.iter().product();
        let bytes = dtype.row_size(n).unwrap();
        // Small values, norms one: a stable forward pass.
        let data: Vec<u8> = match dtype {
            DType::F32 => (0..n)
                .flat_map(|i| {
                    let value = if dims.len() == 1 { 1.0f32 } else { ((i % 7) as f32 - 3.0) * 0.01 };
                    fill(name).unwrap_or(value).to_le_bytes()
                })
                .collect(),
            _ => vec![0; bytes],
        };
        w.add_tensor(name, dims, *dtype, data).unwrap();
    }
    std::fs::write(path, w.to_bytes()).unwrap();
}

pub(crate) fn load_gguf_err(
    name: &str,
    arch: &str,
    change: impl Fn(&mut Vec<(String, Vec<usize>, DType)>, &mut GgufWriter),
) -> (String, String) {
    let dir = temp_dir("gguf");
    let path = dir.join(format!("{name}.gguf"));
    tiny_llama(&path, arch, change);
    let mut ctx = Context::new();
    let err = match DecoderModel::load(&path, &mut ctx, &cpu(), None) {
        Ok(_) => panic!("{name}: loaded"),
        Err(e) => e.to_string(),
    };
    assert_empty(&ctx, name);
    (err, path.display().to_string())
}

#[test]
fn a_valid_tiny_gguf_loads_and_runs() {
    let dir = temp_dir("gguf");
    let path = dir.join("valid.gguf");
    tiny_llama(&path, "llama", |_, _| {});
    let mut ctx = Context::new();
    let device = cpu();
    let model = DecoderModel::load(&path, &mut ctx, &device, None).unwrap();
    let backend: std::sync::Arc<dyn Backend> = device.init_backend(None).unwrap();
    let mut s = Session::new(
        &mut ctx,
        model.hp,
        model.weights.clone(),
        &[backend],
        SessionParams { n_ctx: 16, ..Default::default() },
    )
    .unwrap();
    let logits = s.eval(&mut ctx, &[1, 4, 5], LogitsFor::Last).unwrap();
    assert!(logits.len() == N_VOCAB && logits.iter().all(|v| v.is_finite()));
}

#[test]
fn gguf_models_that_cannot_load_name_the_file_and_key() {
    let (err, file) = load_gguf_err("unknown_arch", "mamba", |_, _| {});
    assert!(err.contains(&file) && err.contains("general.architecture") && err.contains("mamba"), "{err}");

    let (err, file) = load_gguf_err("missing_tensor", "llama", |t, _| t.retain(|(n, _, _)| n != "blk.0.attn_q.weight"));
    assert!(err.contains(&file) && err.contains("'blk.0.attn_q.weight' is missing"), "{err}");

    let (err, file) = load_gguf_err("mistyped_tensor", "llama", |t, _| {
        t.iter_mut().filter(|(n, _, _)| n == "blk.0.ffn_norm.weight").for_each(|x| x.2 = DType::F16)
    });
    assert!(err.contains(&file) && err.contains("'blk.0.ffn_norm.weight' has type f16"), "{err}");

    // The metadata says FFN width 64; the tensor is 48 wide.
    let (err, file) = load_gguf_err("shape_disagrees", "llama", |t, _| {
        t.iter_mut().filter(|(n, _, _)| n == "blk.0.ffn_up.weight").for_each(|x| x.1 = vec![N_EMBD, 48])
    });
    assert!(err.contains(&file) && err.contains("'blk.0.ffn_up.weight' has shape"), "{err}");

    // One embedding row more than the tokenizer has tokens.
    let (err, file) = load_gguf_err("vocab_disagrees", "llama", |t, _| {
        t.iter_mut().filter(|(n, _, _)| n == "token_embd.weight").for_each(|x| x.1 = vec![N_EMBD, N_VOCAB + 1])
    });
    assert!(err.contains(&file) && err.contains("tokenizer.ggml.tokens") && err.contains("token_embd.weight"), "{err}");

    // Three heads do not divide the width, and no key_length says the head size.
    let (err, file) = load_gguf_err("heads_do_not_divide", "llama", |_, w| {
        w.remove("llama.attention.head_count").add_u32("llama.attention.head_count", 3);
    });
    assert!(
        err.contains(&file) && err.contains("llama.embedding_length") && err.contains("is not a multiple of"),
        "{err}"
    );
    assert!(!err.contains("DecoderHparams"), "no debug dump: {err}");

    // Gemma 3 needs its sliding window in the metadata.
    let (err, file) = load_gguf_err("gemma3_without_window", "gemma3", |_, _| {});
    assert!(err.contains(&file) && err.contains("gemma3.attention.sliding_window"), "{err}");
    // A window of 0 would hide every key, the token's own included.
    for arch in ["gemma3", "gemma2"] {
        let key = format!("{arch}.attention.sliding_window");
        let (err, file) = load_gguf_err(&format!("{arch}_window_0"), arch, |_, w| {
            w.add_u32(&key, 0);
        });
        assert!(err.contains(&file) && err.contains(&format!("{key} = 0: it must be at least 1")), "{err}");
    }

    // Rope factors and epsilons that would give NaN logits, not an error.
    for (key, value) in [
        ("llama.rope.scaling.factor", 0.0),
        ("llama.rope.scaling.factor", f32::NAN),
        ("llama.rope.freq_base", -1.0),
        ("llama.rope.freq_base", f32::INFINITY),
    ] {
        let (err, file) = load_gguf_err("bad_rope", "llama", |_, w| {
            w.add_f32(key, value);
        });
        assert!(err.contains(&file) && err.contains(key) && err.contains("finite number above zero"), "{err}");
    }
}

/// Every tensor and every architecture key of a file is accounted for: one
/// the family would not use, or a key that changes the math and is not
/// implemented, fails the load naming it — never a model computed without it.
#[test]
fn a_file_is_never_computed_without_a_part_it_has() {
    let f32_tensor = |name: &str, dims: Vec<usize>| (name.to_owned(), dims, DType::F32);
    for (case, extra) in [
        ("output_bias", f32_tensor("blk.0.attn_output.bias", vec![N_EMBD])),
        ("layer_past_block_count", f32_tensor("blk.1.attn_norm.weight", vec![N_EMBD])),
        ("another_family", f32_tensor("blk.0.post_ffw_norm.weight", vec![N_EMBD])),
    ] {
        let name = extra.0.clone();
        let (err, file) = load_gguf_err(case, "llama", move |t, _| t.push(extra.clone()));
        assert!(err.contains(&file) && err.contains(&format!("'{name}'")) && err.contains("no role"), "{err}");
    }

    let (err, file) =
        load_gguf_err("short_rope_factors", "llama", |t, _| t.push(f32_tensor("rope_freqs.weight", vec![3])));
    assert!(err.contains(&file) && err.contains("'rope_freqs.weight' has shape"), "{err}");

    let (err, file) = load_gguf_err("qwen2_without_biases", "qwen2", |_, _| {});
    assert!(err.contains(&file) && err.contains("'blk.0.attn_q.bias' is missing"), "{err}");

    for (case, key, value, says) in [
        // llama's window is Mistral's, on every layer: no pattern.
        ("swa_pattern", "llama.attention.sliding_window_pattern", Value::U32(2), "not implemented for llama"),
        ("yarn", "llama.rope.scaling.type", Value::String("yarn".into()), "\"yarn\" is not implemented"),
        ("partial_rope", "llama.rope.dimension_count", Value::U32(8), "rope over 8"),
        ("value_heads", "llama.attention.value_length", Value::U32(32), "value heads of 32"),
        ("softcap", "llama.final_logit_softcapping", Value::F32(30.0), "not implemented for llama"),
    ] {
        let (err, file) = load_gguf_err(case, "llama", move |_, w| {
            w.add(key, value.clone());
        });
        assert!(err.contains(&file) && err.contains(key) && err.contains(says), "{case}: {err}");
    }

    // What the keys say and Gantry computes loads: linear scaling, scaling
    // "none" with a factor it ignores, zero experts, Mistral's window (0: none).
    for (key, value) in [
        ("llama.rope.scaling.type", Value::String("linear".into())),
        ("llama.rope.scaling.type", Value::String("none".into())),
        ("llama.expert_count", Value::U32(0)),
        ("llama.rope.dimension_count", Value::U32(16)),
        ("llama.attention.sliding_window", Value::U32(4096)),
        ("llama.attention.sliding_window", Value::U32(0)),
    ] {
        let window = if key == "llama.attention.sliding_window" { value.as_integer().unwrap_or(0) as u32 } else { 0 };
        let dir = temp_dir("gguf");
        let path = dir.join("keys_that_load.gguf");
        tiny_llama(&path, "llama", move |_, w| {
            w.add(key, value.clone());
            w.add_f32("llama.rope.scaling.factor", 4.0);
        });
        let mut ctx = Context::new();
        let model = DecoderModel::load(&path, &mut ctx, &cpu(), None).unwrap_or_else(|e| panic!("{key}: {e}"));
        let none = key == "llama.rope.scaling.type" && model.hp.rope_freq_scale == 1.0;
        assert!(none || model.hp.rope_freq_scale == 0.25, "{key}: rope scale {}", model.hp.rope_freq_scale);
        assert_eq!(model.hp.sliding_window as u32, window, "{key}");
        assert!((0..model.hp.n_layer).all(|l| model.hp.is_sliding(l) == (window > 0)), "{key}");
    }
}

/// The tiny llama's tensors and keys made a `qwen3moe` of 4 experts,
/// `used` per token, each `ffn` wide (the key; the tensors are 48 wide):
/// Q/K norms, a router and the stacked experts instead of the dense network.
fn as_qwen3moe(t: &mut Vec<(String, Vec<usize>, DType)>, w: &mut GgufWriter, used: u32, ffn: u32) {
    let (e, head) = (N_EMBD, N_EMBD / 2);
    w.add_u32("qwen3moe.expert_count", 4);
    w.add_u32("qwen3moe.expert_used_count", used);
    w.add_u32("qwen3moe.expert_feed_forward_length", ffn);
    let ffn = 48;
    t.retain(|(name, _, _)| !["ffn_gate.", "ffn_up.", "ffn_down."].iter().any(|s| name.contains(s)));
    for (n, dims) in [
        ("attn_q_norm", vec![head]),
        ("attn_k_norm", vec![head]),
        ("ffn_gate_inp", vec![e, 4]),
        ("ffn_gate_exps", vec![e, ffn, 4]),
        ("ffn_up_exps", vec![e, ffn, 4]),
        ("ffn_down_exps", vec![ffn, e, 4]),
    ] {
        t.push((format!("blk.0.{n}.weight"), dims, DType::F32));
    }
}

/// Mixture-of-experts files load where every expert tensor and key fits,
/// and fail naming the key or tensor where not: no expert count, more
/// experts used than there are, a stacked expert tensor of another width,
/// experts in a dense family, the old one-matrix-per-expert layout.
#[test]
fn mixture_of_experts_files_are_checked_by_key_and_tensor() {
    let dir = temp_dir("gguf");
    let path = dir.join("tiny_qwen3moe.gguf");
    tiny_llama(&path, "qwen3moe", |t, w| as_qwen3moe(t, w, 2, 48));
    let mut ctx = Context::new();
    let model = DecoderModel::load(&path, &mut ctx, &cpu(), None).unwrap();
    assert_eq!((model.hp.n_expert, model.hp.n_expert_used, model.hp.n_ff_exp), (4, 2, 48));
    let backends: Vec<std::sync::Arc<dyn Backend>> = vec![cpu().init_backend(None).unwrap()];
    let params = SessionParams { n_ctx: 8, ..SessionParams::default() };
    let mut s = Session::new(&mut ctx, model.hp, model.weights.clone(), &backends, params).unwrap();
    let logits = s.eval(&mut ctx, &[1, 4, 5], LogitsFor::All).unwrap().to_vec();
    assert!(logits.len() == 3 * N_VOCAB && logits.iter().all(|x| x.is_finite()), "{logits:?}");

    let (err, file) = load_gguf_err("qwen3moe_without_experts", "qwen3moe", |_, _| {});
    assert!(err.contains(&file) && err.contains("qwen3moe.expert_count") && err.contains("needs experts"), "{err}");

    let (err, file) = load_gguf_err("more_used_than_experts", "qwen3moe", |t, w| as_qwen3moe(t, w, 5, 48));
    assert!(err.contains(&file) && err.contains("qwen3moe.expert_used_count = 5"), "{err}");

    let (err, file) = load_gguf_err("expert_width", "qwen3moe", |t, w| as_qwen3moe(t, w, 2, 40));
    assert!(err.contains(&file) && err.contains("'blk.0.ffn_gate_exps.weight' has shape"), "{err}");

    let (err, file) = load_gguf_err("experts_in_a_dense_family", "qwen2", |_, w| {
        w.add_u32("qwen2.expert_count", 8);
    });
    assert!(err.contains(&file) && err.contains("qwen2.expert_count") && err.contains("mixture-of-experts"), "{err}");

    let (err, file) = load_gguf_err("llama_experts_without_tensors", "llama", |_, w| {
        w.add_u32("llama.expert_count", 8);
        w.add_u32("llama.expert_used_count", 2);
    });
    assert!(err.contains(&file) && err.contains("'blk.0.ffn_gate_inp.weight' is missing"), "{err}");

    let (err, file) = load_gguf_err("per_expert_tensors", "llama", |t, _| {
        for x in 0..2 {
            t.push((format!("blk.0.ffn_gate.{x}.weight"), vec![N_EMBD, N_FF], DType::F32));
        }
    });
    assert!(err.contains(&file) && err.contains("'blk.0.ffn_gate.0.weight'") && err.contains("old Mixtral"), "{err}");
}

/// The tiny llama's tensors and keys made a `gpt-oss` of 4 experts, 2
/// used per token, 48 wide: biases on every attention projection, sinks,
/// a sliding window, YaRN, the pre-FFN norm named `post_attention_norm`,
/// a biased router and expert biases, an untied output.
fn as_gpt_oss(t: &mut Vec<(String, Vec<usize>, DType)>, w: &mut GgufWriter) {
    as_gpt_oss_window(t, w, true);
}

/// [`as_gpt_oss`], the sliding window's key written or not.
fn as_gpt_oss_window(t: &mut Vec<(String, Vec<usize>, DType)>, w: &mut GgufWriter, window: bool) {
    let (e, ff) = (N_EMBD, 48);
    w.add_u32("gpt-oss.expert_count", 4);
    w.add_u32("gpt-oss.expert_used_count", 2);
    w.add_u32("gpt-oss.expert_feed_forward_length", ff as u32);
    if window {
        w.add_u32("gpt-oss.attention.sliding_window", 2);
    }
    w.add_str("gpt-oss.rope.scaling.type", "yarn");
    w.add_f32("gpt-oss.rope.scaling.factor", 4.0);
    w.add_u32("gpt-oss.rope.scaling.original_context_length", 8);
    t.retain(|(name, _, _)| !["ffn_gate.", "ffn_up.", "ffn_down.", "ffn_norm."].iter().any(|s| name.contains(s)));
    t.push(("output.weight".into(), vec![e, N_VOCAB], DType::F32));
    for (n, dims) in [
        ("attn_q.bias", vec![e]),
        ("attn_k.bias", vec![e]),
        ("attn_v.bias", vec![e]),
        ("attn_output.bias", vec![e]),
        ("attn_sinks.weight", vec![2]),
        ("post_attention_norm.weight", vec![e]),
        ("ffn_gate_inp.weight", vec![e, 4]),
        ("ffn_gate_inp.bias", vec![4]),
        ("ffn_gate_exps.weight", vec![e, ff, 4]),
        ("ffn_gate_exps.bias", vec![ff, 4]),
        ("ffn_up_exps.weight", vec![e, ff, 4]),
        ("ffn_up_exps.bias", vec![ff, 4]),
        ("ffn_down_exps.weight", vec![ff, e, 4]),
        ("ffn_down_exps.bias", vec![e, 4]),
    ] {
        t.push((format!("blk.0.{n}"), dims, DType::F32));
    }
}

/// A gpt-oss file loads and runs where every part fits its keys, and fails
/// naming the key or tensor where a part is missing or says what llama.cpp
/// would not compute: YaRN betas other than llama.cpp's, a YaRN key no
/// gpt-oss model reads, no sinks, no window, no output matrix.
#[test]
fn gpt_oss_files_are_checked_by_key_and_tensor() {
    let dir = temp_dir("gguf");
    let path = dir.join("tiny_gpt_oss.gguf");
    tiny_llama(&path, "gpt-oss", as_gpt_oss);
    let mut ctx = Context::new();
    let model = DecoderModel::load(&path, &mut ctx, &cpu(), None).unwrap();
    let hp = model.hp;
    assert_eq!((hp.n_expert, hp.n_expert_used, hp.n_ff_exp, hp.sliding_window), (4, 2, 48, 2));
    assert!(hp.is_sliding(0) && hp.attn_sinks && hp.expert_biases && hp.rope_ext_factor == 1.0, "{hp:?}");
    assert_eq!((hp.rope_freq_scale, hp.rope_freq_scale_swa, hp.n_ctx_orig_yarn), (0.25, 0.25, 8));
    let backends: Vec<std::sync::Arc<dyn Backend>> = vec![cpu().init_backend(None).unwrap()];
    let params = SessionParams { n_ctx: 8, ..SessionParams::default() };
    let mut s = Session::new(&mut ctx, model.hp, model.weights.clone(), &backends, params).unwrap();
    let logits = s.eval(&mut ctx, &[1, 4, 5], LogitsFor::All).unwrap().to_vec();
    assert!(logits.len() == 3 * N_VOCAB && logits.iter().all(|x| x.is_finite()), "{logits:?}");

    let (err, file) = load_gguf_err("gpt_oss_beta", "gpt-oss", |t, w| {
        as_gpt_oss(t, w);
        w.add_f32("gpt-oss.rope.scaling.yarn_beta_fast", 16.0);
    });
    assert!(err.contains(&file) && err.contains("gpt-oss.rope.scaling.yarn_beta_fast = 16"), "{err}");

    let (err, file) = load_gguf_err("gpt_oss_log_mul", "gpt-oss", |t, w| {
        as_gpt_oss(t, w);
        w.add_f32("gpt-oss.rope.scaling.yarn_log_multiplier", 0.1);
    });
    assert!(err.contains(&file) && err.contains("gpt-oss.rope.scaling.yarn_log_multiplier"), "{err}");

    let (err, file) = load_gguf_err("gpt_oss_without_sinks", "gpt-oss", |t, w| {
        as_gpt_oss(t, w);
        t.retain(|(n, _, _)| !n.contains("attn_sinks"));
    });
    assert!(err.contains(&file) && err.contains("'blk.0.attn_sinks.weight' is missing"), "{err}");

    let (err, file) = load_gguf_err("gpt_oss_without_output", "gpt-oss", |t, w| {
        as_gpt_oss(t, w);
        t.retain(|(n, _, _)| n != "output.weight");
    });
    assert!(err.contains(&file) && err.contains("'output.weight' is missing"), "{err}");

    let (err, file) = load_gguf_err("gpt_oss_without_window", "gpt-oss", |t, w| as_gpt_oss_window(t, w, false));
    assert!(err.contains(&file) && err.contains("'gpt-oss.attention.sliding_window' is missing"), "{err}");

    let (err, file) = load_gguf_err("gpt_oss_without_experts", "gpt-oss", |_, _| {});
    assert!(err.contains(&file) && err.contains("gpt-oss.expert_count") && err.contains("needs experts"), "{err}");
}

// ---- safetensors encoders --------------------------------------------------------

pub(crate) const BERT_H: usize = 8;

pub(crate) fn bert_config(hidden: usize) -> String {
    format!(
        r#"{{"model_type": "bert", "vocab_size": 6, "hidden_size": {hidden}, "num_hidden_layers": 1,
            "num_attention_heads": 2, "intermediate_size": 16, "max_position_embeddings": 8,
            "type_vocab_size": 2, "layer_norm_eps": 1e-12, "hidden_act": "gelu"}}"#
    )
}

pub(crate) const WORDPIECE: &str = r###"{"version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
  "normalizer": null, "pre_tokenizer": {"type": "Whitespace"},
  "post_processor": {"type": "BertProcessing", "sep": ["[SEP]", 3], "cls": ["[CLS]", 2]},
  "decoder": null,
  "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
            "max_input_chars_per_word": 100, "vocab": {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "a": 4, "b": 5}}}"###;

/// The tensors of a one-layer BERT of width 8 (name, dtype, row-major shape).
pub(crate) fn bert_tensors() -> Vec<(String, Dtype, Vec<usize>)> {
    let h = BERT_H;
    let mut t = vec![
        ("embeddings.word_embeddings.weight".to_string(), Dtype::F32, vec![6, h]),
        ("embeddings.position_embeddings.weight".into(), Dtype::F32, vec![8, h]),
        ("embeddings.token_type_embeddings.weight".into(), Dtype::F32, vec![2, h]),
        ("embeddings.LayerNorm.weight".into(), Dtype::F32, vec![h]),
        ("embeddings.LayerNorm.bias".into(), Dtype::F32, vec![h]),
        ("embeddings.position_ids".into(), Dtype::I64, vec![1, 8]),
    ];
    let p = "encoder.layer.0.";
    for (n, out, inp) in [
        ("attention.self.query", h, h),
        ("attention.self.key", h, h),
        ("attention.self.value", h, h),
        ("attention.output.dense", h, h),
        ("intermediate.dense", 16, h),
        ("output.dense", h, 16),
    ] {
        t.push((format!("{p}{n}.weight"), Dtype::F32, vec![out, inp]));
        t.push((format!("{p}{n}.bias"), Dtype::F32, vec![out]));
    }
    for n in ["attention.output.LayerNorm", "output.LayerNorm"] {
        t.push((format!("{p}{n}.weight"), Dtype::F32, vec![h]));
        t.push((format!("{p}{n}.bias"), Dtype::F32, vec![h]));
    }
    t
}

pub(crate) fn write_bert(dir: &Path, config: &str, tokenizer: &str, tensors: &[(String, Dtype, Vec<usize>)]) {
    write_bert_filled(dir, config, tokenizer, tensors, |_| None);
}

/// [`write_bert`], with every value of an F32 tensor for which `fill`
/// gives one set to it.
pub(crate) fn write_bert_filled(
    dir: &Path,
    config: &str,
    tokenizer: &str,
    tensors: &[(String, Dtype, Vec<usize>)],
    fill: impl Fn(&str) -> Option<f32>,
) {
    std::fs::write(dir.join("config.json"), config).unwrap();
    std::fs::write(dir.join("tokenizer.json"), tokenizer).unwrap();
    let data: Vec<Vec<u8>> = tensors
        .iter()
        .map(|(n, d, s)| {
            let count: usize = s.iter().product();
            let one = if n.contains("LayerNorm.weight") { 1.0f32 } else { 0.02 };
            match d {
                Dtype::F32 => (0..count)
                    .flat_map(|i| fill(n).unwrap_or(one * (1.0 + (i % 5) as f32 * 0.1)).to_le_bytes())
                    .collect(),
                _ => vec![0; count * d.bitsize() / 8],
            }
        })
        .collect();
    let views: Vec<(String, safetensors::tensor::TensorView<'_>)> = tensors
        .iter()
        .zip(&data)
        .map(|((n, d, s), b)| (n.clone(), safetensors::tensor::TensorView::new(*d, s.clone(), b).unwrap()))
        .collect();
    std::fs::write(dir.join("model.safetensors"), safetensors::serialize(views, None).unwrap()).unwrap();
}

pub(crate) fn load_bert_err(
    name: &str,
    config: &str,
    tokenizer: &str,
    tensors: &[(String, Dtype, Vec<usize>)],
) -> (String, Scratch) {
    let dir = temp_dir(name);
    write_bert(&dir, config, tokenizer, tensors);
    let mut ctx = Context::new();
    let err = match BertModel::load(&dir, &mut ctx, &cpu()) {
        Ok(_) => panic!("{name}: loaded"),
        Err(e) => e.to_string(),
    };
    assert_empty(&ctx, name);
    (err, dir)
}

#[test]
fn a_valid_tiny_bert_loads_and_embeds() {
    let dir = temp_dir("bert-valid");
    write_bert(&dir, &bert_config(BERT_H), WORDPIECE, &bert_tensors());
    let mut ctx = Context::new();
    let device = cpu();
    let model = BertModel::load(&dir, &mut ctx, &device).unwrap();
    let batch = model.tokenize(&["a b", "b"]).unwrap();
    assert_eq!(batch.ids, [vec![2, 4, 5, 3], vec![2, 5, 3]], "[CLS] ... [SEP]");
    let backend: std::sync::Arc<dyn Backend> = device.init_backend(None).unwrap();
    let mut encoder = Encoder::new(&mut ctx, &model, &[backend], EncoderParams::default()).unwrap();
    let e = encoder.embed(&mut ctx, &batch).unwrap();
    assert_eq!(e.len(), 2 * BERT_H);
    for row in e.chunks(BERT_H) {
        let norm: f32 = row.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-4, "unit length: {norm}");
    }
    // An abort callback that says stop ends the batch with Aborted (polled
    // on the CPU before the first node: nothing is computed); removed, the
    // encoder gives the same vectors again.
    let polls = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = polls.clone();
    encoder.set_abort_callback(Some(std::sync::Arc::new(move || {
        counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        true
    })));
    let err = encoder.embed(&mut ctx, &batch).unwrap_err();
    assert!(matches!(err, gantry::Error::Engine(gantry::engine::Error::Aborted)), "{err}");
    assert!(polls.load(std::sync::atomic::Ordering::Relaxed) > 0);
    encoder.set_abort_callback(None);
    assert_eq!(encoder.embed(&mut ctx, &batch).unwrap(), e);
}

/// Every tensor of a BERT folder has a role, as every tensor of a GGUF
/// does: a layer past `num_hidden_layers` (config.json and the weights
/// disagree) or an unknown tensor was ignored, giving other embeddings with
/// no word. The checkpoint's parts that are not the encoder load.
#[test]
fn a_bert_tensor_without_a_role_is_refused_by_name() {
    let h = BERT_H;
    let mut with_heads = bert_tensors();
    with_heads.push(("pooler.dense.weight".into(), Dtype::F32, vec![h, h]));
    with_heads.push(("pooler.dense.bias".into(), Dtype::F32, vec![h]));
    let dir = temp_dir("bert-pooler");
    write_bert(&dir, &bert_config(BERT_H), WORDPIECE, &with_heads);
    BertModel::load(&dir, &mut Context::new(), &cpu()).unwrap();
    for (extra, name) in [
        (("encoder.layer.1.attention.self.query.weight", vec![h, h]), "bert-layer-past-config"),
        (("encoder.layer.0.attention.output.extra_bias", vec![h]), "bert-unknown-bias"),
        (("zzz.weight", vec![4]), "bert-unknown"),
    ] {
        let mut tensors = bert_tensors();
        tensors.push((extra.0.to_string(), Dtype::F32, extra.1));
        let (err, dir) = load_bert_err(name, &bert_config(BERT_H), WORDPIECE, &tensors);
        let file = dir.join("model.safetensors").display().to_string();
        assert!(
            err.contains(&file)
                && err.contains(&format!("tensor '{}' has no role in a BERT encoder of 1 layers", extra.0)),
            "{name}: {err}"
        );
    }
}

/// A sentence-transformers folder's `sentence_bert_config.json` is followed
/// as sentence-transformers follows it: texts cut to `max_seq_length`
/// tokens (special ones included) and lowercased with `do_lower_case`; a
/// length leaving no room beside `[CLS]` and `[SEP]` is refused by name.
#[test]
fn sentence_bert_config_cuts_and_lowercases_texts() {
    let dir = temp_dir("bert-sentence-config");
    write_bert(&dir, &bert_config(BERT_H), WORDPIECE, &bert_tensors());
    let mut ctx = Context::new();
    let device = cpu();
    let plain = BertModel::load(&dir, &mut ctx, &device).unwrap();
    assert_eq!(plain.tokenize(&["A b a"]).unwrap().ids, [vec![2, 1, 5, 4, 3]], "no lowercasing: A is unknown");
    drop(plain);
    std::fs::write(dir.join("sentence_bert_config.json"), r#"{"max_seq_length": 4, "do_lower_case": true}"#).unwrap();
    let model = BertModel::load(&dir, &mut ctx, &device).unwrap();
    assert_eq!(model.tokenize(&["A b a"]).unwrap().ids, [vec![2, 4, 5, 3]], "lowercased, cut to 4");
    drop(model);
    std::fs::write(dir.join("sentence_bert_config.json"), r#"{"max_seq_length": 2}"#).unwrap();
    let e = BertModel::load(&dir, &mut ctx, &device).map(|_| ()).unwrap_err().to_string();
    assert!(e.contains("max_seq_length = 2 leaves no room"), "{e}");
}

/// A sentence-transformers folder whose `modules.json` lists no `Normalize`
/// (paraphrase-MiniLM-L6-v2's) is embedded as the plain means: the same
/// directions as a plain folder's unit vectors, not of unit length.
#[test]
fn a_folder_without_a_normalize_module_gives_the_plain_means() {
    let dir = temp_dir("bert-no-normalize");
    write_bert(&dir, &bert_config(BERT_H), WORDPIECE, &bert_tensors());
    let mut ctx = Context::new();
    let device = cpu();
    let backend: std::sync::Arc<dyn Backend> = device.init_backend(None).unwrap();
    let embed = |ctx: &mut Context| {
        let model = BertModel::load(&dir, ctx, &device).unwrap();
        let batch = model.tokenize(&["a b", "b"]).unwrap();
        let mut encoder = Encoder::new(ctx, &model, std::slice::from_ref(&backend), EncoderParams::default()).unwrap();
        (model.normalize, encoder.embed(ctx, &batch).unwrap())
    };
    let (normalized, units) = embed(&mut ctx);
    assert!(normalized);
    std::fs::write(
        dir.join("modules.json"),
        r#"[{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]"#,
    )
    .unwrap();
    std::fs::create_dir_all(dir.join("1_Pooling")).unwrap();
    std::fs::write(dir.join("1_Pooling/config.json"), r#"{"pooling_mode_mean_tokens": true}"#).unwrap();
    let (normalized, means) = embed(&mut ctx);
    assert!(!normalized);
    for (unit, mean) in units.chunks(BERT_H).zip(means.chunks(BERT_H)) {
        let norm = mean.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() > 1e-3, "not of unit length: {norm}");
        for (u, m) in unit.iter().zip(mean) {
            assert!((u - m / norm).abs() < 1e-5, "same direction: {u} vs {}", m / norm);
        }
    }
}

#[test]
fn bert_folders_that_cannot_load_name_the_file_and_key() {
    let good = bert_tensors();

    let (err, dir) = load_bert_err("bert-bad-tokenizer", &bert_config(BERT_H), "{\"model\": 42", &good);
    assert!(err.contains(&dir.join("tokenizer.json").display().to_string()), "{err}");

    // A post-processor naming a special token it does not define: the
    // tokenizers crate panicked on every text (and took serve's engines
    // with it); refused at load, by file.
    let template = WORDPIECE.replace(
        r#"{"type": "BertProcessing", "sep": ["[SEP]", 3], "cls": ["[CLS]", 2]}"#,
        r#"{"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "[NOPE]", "type_id": 0}},
            {"Sequence": {"id": "A", "type_id": 0}}], "pair": [], "special_tokens": {}}"#,
    );
    assert_ne!(template, WORDPIECE);
    let (err, dir) = load_bert_err("bert-template-panics", &bert_config(BERT_H), &template, &good);
    assert!(err.contains(&dir.join("tokenizer.json").display().to_string()) && err.contains("cannot encode"), "{err}");

    let (err, dir) =
        load_bert_err("bert-bad-config", &bert_config(BERT_H).replace("\"bert\"", "\"t5\""), WORDPIECE, &good);
    assert!(err.contains(&dir.join("config.json").display().to_string()) && err.contains("model_type"), "{err}");

    let missing: Vec<_> = good.iter().filter(|t| t.0 != "encoder.layer.0.output.dense.bias").cloned().collect();
    let (err, dir) = load_bert_err("bert-missing", &bert_config(BERT_H), WORDPIECE, &missing);
    let st = dir.join("model.safetensors").display().to_string();
    assert!(err.contains(&st) && err.contains("'encoder.layer.0.output.dense.bias' is missing"), "{err}");

    let mut mistyped = good.clone();
    mistyped.iter_mut().filter(|t| t.0 == "embeddings.position_embeddings.weight").for_each(|t| t.1 = Dtype::I64);
    let (err, dir) = load_bert_err("bert-mistyped", &bert_config(BERT_H), WORDPIECE, &mistyped);
    let st = dir.join("model.safetensors").display().to_string();
    assert!(err.contains(&st) && err.contains("'embeddings.position_embeddings.weight' has type I64"), "{err}");

    // config.json says width 16; the weights are 8 wide.
    let (err, dir) = load_bert_err("bert-disagrees", &bert_config(16), WORDPIECE, &good);
    let st = dir.join("model.safetensors").display().to_string();
    assert!(err.contains(&st) && err.contains("'embeddings.word_embeddings.weight' has shape"), "{err}");
}

/// `LoadOptions::limits` holds a file to tighter limits than the defaults:
/// each size beyond its limit is refused naming the file, the key (or
/// tensor) and the limit, before anything is allocated; the same file loads
/// under the defaults.
#[test]
fn tighter_loader_limits_refuse_a_file_by_name() {
    use gantry::Limits;
    use gantry::model::LoadOptions;
    let dir = temp_dir("gguf");
    let path = dir.join("limits.gguf");
    tiny_llama(&path, "llama", |_, _| {});
    let load = |limits: Limits| {
        let mut ctx = Context::new();
        let options = LoadOptions { limits, ..LoadOptions::default() };
        let result = DecoderModel::load_with(&path, &mut ctx, &cpu(), options).map(drop).map_err(|e| e.to_string());
        if result.is_err() {
            assert_empty(&ctx, "limits");
        }
        result
    };
    load(Limits::DEFAULT).unwrap();
    let file = path.display().to_string();
    for (limits, says) in [
        (Limits { max_width: N_EMBD - 1, ..Limits::DEFAULT }, "llama.embedding_length = 32"),
        (Limits { max_vocab: 4, ..Limits::DEFAULT }, "the rows of token_embd.weight = 8"),
        (Limits { max_tensors: 5, ..Limits::DEFAULT }, "the tensor count = 11"),
        (Limits { max_tensor_elements: 1000, ..Limits::DEFAULT }, "more than the 1000 elements"),
    ] {
        let err = load(limits).expect_err(says);
        assert!(err.contains(&file) && err.contains(says), "{says}: {err}");
    }
}
