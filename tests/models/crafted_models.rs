//! Model files whose sizes would size an allocation or a loop before
//! anything checked them (a GGUF's layer count, context, widths, an empty
//! tensor hiding a huge dimension; a BERT config's layer count; a
//! safetensors header's shapes) are errors naming the file and the key or
//! tensor, through the real loaders. Also: a valid Gemma 3 of fewer layers
//! than its sliding pattern loads and runs (it used to fail on an
//! unallocated `kq_mask`), a model read into memory (`--no-mmap`)
//! runs on after its file is truncated underneath, and weights that are
//! not numbers give an error instead of an answer.

use std::path::Path;

use gantry::model::LoadOptions;
use gantry::model::decoder::{DecoderHparams, DecoderModel, LogitsFor, ModelFootprint, Session, SessionParams};
use gantry::model::gguf::{Gguf, Value};
use gantry::{Backend, Context, DType, Device};
use safetensors::Dtype;

use super::model_errors::{
    BERT_H, N_EMBD, N_VOCAB, WORDPIECE, bert_config, bert_tensors, cpu, load_bert_err, load_gguf_err, temp_dir,
    tiny_llama, tiny_llama_filled, write_bert_filled,
};

#[test]
fn gguf_sizes_past_the_limits_are_errors_naming_the_key() {
    let cases = [
        ("llama.block_count", Value::U32(u32::MAX)),
        ("llama.block_count", Value::U64(1 << 40)),
        ("llama.context_length", Value::U64(1 << 40)),
        ("llama.embedding_length", Value::U32(1 << 30)),
        ("llama.attention.head_count", Value::U32(u32::MAX)),
        ("llama.attention.head_count_kv", Value::U32(1 << 31)),
        ("llama.attention.key_length", Value::U32(u32::MAX)),
        ("llama.feed_forward_length", Value::U64(u64::MAX)),
        ("llama.vocab_size", Value::U32(u32::MAX)),
    ];
    for (key, value) in cases {
        let (err, file) = load_gguf_err("huge_size", "llama", |_, w| {
            w.remove(key);
            w.add(key, value.clone());
        });
        assert!(err.contains(&file) && err.contains(key) && err.contains("allowed"), "{key}: {err}");
    }
    let (err, file) = load_gguf_err("huge_window", "gemma3", |_, w| {
        w.add("gemma3.attention.sliding_window", Value::U64(1 << 40));
    });
    assert!(err.contains(&file) && err.contains("gemma3.attention.sliding_window"), "{err}");
}

/// A vocabulary size key that disagrees with the tokens is named as the
/// culprit (the message said "token_embd.weight 5 rows" of a tensor of
/// 300 rows).
#[test]
fn a_vocab_size_key_that_disagrees_with_the_tokens_is_named() {
    let (err, file) = load_gguf_err("vocab_size", "llama", |_, w| {
        w.remove("llama.vocab_size");
        w.add("llama.vocab_size", Value::U32(5));
    });
    assert!(err.contains(&file) && err.contains("llama.vocab_size = 5"), "{err}");
    assert!(!err.contains("token_embd.weight 5 rows"), "{err}");
}

#[test]
fn an_empty_gguf_tensor_may_not_hide_a_huge_dimension() {
    // Zero bytes of data, so the file holds it; 2^40 rows a kernel would walk.
    let (err, file) =
        load_gguf_err("hidden_dim", "llama", |t, _| t.push(("junk".into(), vec![0, 1 << 40], DType::F32)));
    assert!(err.contains(&file) && err.contains("'junk'") && err.contains("spans more than"), "{err}");
}

/// The fit behind `--budget` sizes a table by the layer count: hyperparameters
/// past the limit are an error there too, not an abort, and its sums saturate.
#[test]
fn the_fit_refuses_a_huge_layer_count() {
    let dir = temp_dir("gguf");
    let path = dir.join("fit.gguf");
    tiny_llama(&path, "llama", |_, _| {});
    let gguf = Gguf::open(&path).unwrap();
    let hp = DecoderHparams { n_layer: u32::MAX as usize, ..DecoderHparams::from_gguf(&gguf).unwrap() };
    let err = ModelFootprint::from_gguf(&gguf, &hp, 256, DType::F16).unwrap_err().to_string();
    assert!(err.contains("block_count") && err.contains(&path.display().to_string()), "{err}");
    let hp = DecoderHparams::from_gguf(&gguf).unwrap();
    let footprint = ModelFootprint::from_gguf(&gguf, &hp, usize::MAX, DType::F16).unwrap();
    assert_eq!(footprint.layer_kv, usize::MAX, "a cache too large saturates");
    let huge = DecoderHparams { n_vocab: usize::MAX, ..hp };
    assert_eq!(gantry::model::decoder::compute_estimate(&huge, usize::MAX, usize::MAX), usize::MAX);
}

#[test]
fn bert_sizes_past_the_limits_are_errors_naming_the_key() {
    let good = bert_tensors();
    for (key, value) in [
        ("num_hidden_layers", "18446744073709551615"),
        ("num_hidden_layers", "1000000000"),
        ("max_position_embeddings", "4000000000000"),
        ("vocab_size", "10000000000"),
    ] {
        let config =
            bert_config(BERT_H).replace(&format!("\"{key}\": "), &format!("\"{key}\": {value}, \"x_{key}\": "));
        let (err, dir) = load_bert_err("bert-huge", &config, WORDPIECE, &good);
        let file = dir.join("config.json").display().to_string();
        assert!(err.contains(&file) && err.contains(key) && err.contains("allowed"), "{key}: {err}");
    }
    // Found by fuzzing: positions below BERT's two special tokens made
    // `tokenizers` subtract with overflow.
    let config = bert_config(BERT_H).replace("\"max_position_embeddings\": 8", "\"max_position_embeddings\": 2");
    let (err, dir) = load_bert_err("bert-few-positions", &config, WORDPIECE, &good);
    let file = dir.join("tokenizer.json").display().to_string();
    assert!(err.contains(&file) && err.contains("max_position_embeddings = 2"), "{err}");
    // An empty tensor in the safetensors header with a huge dimension.
    let mut hidden = good.clone();
    hidden.push(("junk".into(), Dtype::F32, vec![0, 1 << 40]));
    let (err, dir) = load_bert_err("bert-hidden-dim", &bert_config(BERT_H), WORDPIECE, &hidden);
    let file = dir.join("model.safetensors").display().to_string();
    assert!(err.contains(&file) && err.contains("'junk'") && err.contains("spans more than"), "{err}");
}

/// A one-layer llama GGUF turned into a Gemma 3 of `n_layer` layers (query
/// and key norms, post-norms, a sliding window of 4, two KV heads, a
/// context of 256) with `swa_pattern` when given.
fn tiny_gemma3(path: &Path, n_layer: u32, swa_pattern: Option<u32>) {
    tiny_llama(path, "gemma3", |t, w| {
        w.remove("gemma3.block_count");
        w.add_u32("gemma3.block_count", n_layer);
        w.add_u32("gemma3.attention.sliding_window", 4);
        w.add_u32("gemma3.context_length", 256);
        w.add_u32("gemma3.attention.head_count_kv", 2);
        if let Some(p) = swa_pattern {
            w.add_u32("gemma3.attention.sliding_window_pattern", p);
        }
        let head_dim = N_EMBD / 2;
        let layer0: Vec<_> = t.iter().filter(|(n, _, _)| n.starts_with("blk.0.")).cloned().collect();
        for l in 0..n_layer {
            if l > 0 {
                t.extend(
                    layer0.iter().map(|(n, d, ty)| (n.replacen("blk.0.", &format!("blk.{l}."), 1), d.clone(), *ty)),
                );
            }
            for (name, dims) in [
                ("attn_q_norm", vec![head_dim]),
                ("attn_k_norm", vec![head_dim]),
                ("post_attention_norm", vec![N_EMBD]),
                ("post_ffw_norm", vec![N_EMBD]),
            ] {
                t.push((format!("blk.{l}.{name}.weight"), dims, DType::F32));
            }
        }
    });
}

fn run_decoder(model: &DecoderModel, ctx: &mut Context, device: &dyn Device, prompt: &[u32]) -> Vec<f32> {
    let backend: std::sync::Arc<dyn Backend> = device.init_backend(None).unwrap();
    let params = SessionParams { n_ctx: 256, ..Default::default() };
    let mut s = Session::new(ctx, model.hp, model.weights.clone(), &[backend], params).unwrap();
    let mut logits = s.eval(ctx, prompt, LogitsFor::Last).unwrap().to_vec();
    // One decode step after the prompt: a graph of another shape.
    logits.extend_from_slice(s.eval(ctx, &[5], LogitsFor::Last).unwrap());
    logits
}

/// Regression: a Gemma 3 with fewer layers than its sliding pattern (every
/// layer slides) failed with "tensor 'kq_mask' (f16 [256, 2, 1, 1]) is not
/// allocated": the global mask was an input no layer read.
#[test]
fn a_tiny_gemma3_whose_layers_all_slide_loads_and_runs() {
    // Two layers of the default pattern (6): both slide. Pattern 2: one of
    // each. Pattern 1: every layer global, no sliding mask.
    for (n_layer, pattern) in [(1, None), (2, None), (2, Some(2)), (2, Some(1))] {
        let dir = temp_dir("gguf");
        let path = dir.join(format!("gemma3-{n_layer}-{pattern:?}.gguf"));
        tiny_gemma3(&path, n_layer, pattern);
        let mut ctx = Context::new();
        let device = cpu();
        let model = DecoderModel::load(&path, &mut ctx, &device, None).unwrap();
        assert_eq!((model.hp.arch, model.hp.n_head_kv, model.hp.n_ctx_train), ("gemma3", 2, 256));
        let logits = run_decoder(&model, &mut ctx, &device, &[1, 4]);
        assert_eq!(logits.len(), 2 * N_VOCAB);
        assert!(logits.iter().all(|v| v.is_finite()), "{n_layer} layers, pattern {pattern:?}: {logits:?}");
    }
}

/// `--no-mmap`: the file is read into memory, so truncating it underneath
/// changes nothing (a mapped file would give SIGBUS on the next read).
#[test]
fn a_model_read_into_memory_runs_on_after_its_file_is_truncated() {
    let dir = temp_dir("gguf");
    let path = dir.join("no-mmap.gguf");
    tiny_llama(&path, "llama", |_, _| {});
    let device = cpu();
    let mut ctx = Context::new();
    let mapped = DecoderModel::load(&path, &mut ctx, &device, None).unwrap();
    assert!(mapped.gguf.is_mapped());
    let want = run_decoder(&mapped, &mut ctx, &device, &[1, 4, 5]);
    // The context's buffers hold the mapping too: nothing of it may be read
    // once the file is truncated.
    drop((mapped, ctx));

    let mut ctx = Context::new();
    let options = LoadOptions { use_mmap: false, ..LoadOptions::default() };
    let model = DecoderModel::load_with(&path, &mut ctx, &device, options).unwrap();
    assert!(!model.gguf.is_mapped(), "use_mmap: false reads the file");
    // The dequantized forward reads the file the same way.
    let mut dq_ctx = Context::new();
    let options = LoadOptions { use_mmap: false, ..LoadOptions::default() };
    let dequantized = DecoderModel::load_dequantized_with(&path, &mut dq_ctx, &device, options).unwrap();
    assert!(!dequantized.gguf.is_mapped(), "use_mmap: false reads the file");
    std::fs::File::options().write(true).open(&path).unwrap().set_len(16).unwrap();
    assert_eq!(run_decoder(&model, &mut ctx, &device, &[1, 4, 5]), want);
    // The tiny model's weights are F32: dequantizing changes none of them.
    assert_eq!(run_decoder(&dequantized, &mut dq_ctx, &device, &[1, 4, 5]), want);
    // Reading the truncated file is an error naming it.
    let err = Gguf::read(&path).unwrap_err().to_string();
    assert!(err.contains(&path.display().to_string()), "{err}");
}

/// Weights holding NaN or infinity (a damaged or badly converted file)
/// give logits and embeddings that are not numbers; a sampler would have
/// picked a token from them and a cosine printed NaN with status 0. Each is
/// an error naming the output, its row and column, and the session's cache
/// keeps nothing of the failed batch.
#[test]
fn weights_that_are_not_numbers_give_an_error_not_an_answer() {
    // NaN in Q, K or the norm before them makes attention scores NaN: the CPU's
    // attention skipped such keys like masked ones, a finite, wrong answer.
    for (tensor, value) in [
        ("blk.0.ffn_down.weight", f32::NAN),
        ("output_norm.weight", f32::INFINITY),
        ("blk.0.attn_q.weight", f32::NAN),
        ("blk.0.attn_k.weight", f32::NAN),
        ("blk.0.attn_norm.weight", f32::NAN),
    ] {
        let dir = temp_dir("gguf");
        let path = dir.join("not-numbers.gguf");
        tiny_llama_filled(&path, "llama", |_, _| {}, |name| (name == tensor).then_some(value));
        let device = cpu();
        let mut ctx = Context::new();
        let model = DecoderModel::load(&path, &mut ctx, &device, None).unwrap();
        let backend: std::sync::Arc<dyn Backend> = device.init_backend(None).unwrap();
        let params = SessionParams { n_ctx: 64, ..Default::default() };
        let mut s = Session::new(&mut ctx, model.hp, model.weights.clone(), &[backend], params).unwrap();
        let err = s.eval(&mut ctx, &[1, 4, 5], LogitsFor::All).unwrap_err().to_string();
        assert!(err.contains("logits are not numbers") && err.contains("at row 0, token id 0"), "{tensor}: {err}");
        assert_eq!(s.n_past(), 0, "{tensor}: the failed batch left tokens in the cache");
    }

    // Rope frequency factors that are not finite numbers above zero are refused at load.
    for (case, value) in [("nan", f32::NAN), ("zero", 0.0), ("inf", f32::INFINITY)] {
        let dir = temp_dir("gguf");
        let path = dir.join(format!("rope-factors-{case}.gguf"));
        let factors = ("rope_freqs.weight".to_owned(), vec![N_EMBD / 4], DType::F32);
        let fill = |name: &str| (name == "rope_freqs.weight").then_some(value);
        tiny_llama_filled(&path, "llama", |t, _| t.push(factors.clone()), fill);
        let mut ctx = Context::new();
        let err = DecoderModel::load(&path, &mut ctx, &cpu(), None).err().unwrap().to_string();
        assert!(err.contains(&format!("rope_freqs.weight[0] = {value}")), "{case}: {err}");
    }

    for tensor in ["encoder.layer.0.output.dense.weight", "encoder.layer.0.attention.self.query.weight"] {
        let dir = temp_dir("bert-not-numbers");
        check_bert_not_numbers(&dir, |name| (name == tensor).then_some(f32::NAN));
    }
}

/// Embeds two texts with a BERT folder whose weights `fill` sets, expecting
/// the error that the embeddings are not numbers.
fn check_bert_not_numbers(dir: &Path, fill: impl Fn(&str) -> Option<f32>) {
    write_bert_filled(dir, &bert_config(BERT_H), WORDPIECE, &bert_tensors(), fill);
    let device = cpu();
    let mut ctx = Context::new();
    let model = gantry::model::bert::BertModel::load(dir, &mut ctx, &device).unwrap();
    let backend: std::sync::Arc<dyn Backend> = device.init_backend(None).unwrap();
    let params = gantry::model::bert::EncoderParams::default();
    let mut encoder = gantry::model::bert::Encoder::new(&mut ctx, &model, &[backend], params).unwrap();
    let batch = model.tokenize(&["a b", "b"]).unwrap();
    let err = encoder.embed(&mut ctx, &batch).unwrap_err().to_string();
    assert!(err.contains("embeddings are not numbers (NaN at row 0, dimension 0)"), "{err}");
}
