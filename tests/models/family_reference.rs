//! Every decoder family against llama.cpp, without downloading a model:
//! seeded random-weight files of each family in llama.cpp's layout
//! (`gantry::testing::seeded_model`), in F32, Q8_0 and Q4_K (llama also in
//! the lookup-table types IQ4_NL, IQ4_XS and MXFP4, gpt-oss also with MXFP4
//! experts), whose
//! llama.cpp next-token distributions at every position of a 17-token
//! prompt are stored in `tests/data/families/` (made by
//! `tests/data/scripts/family_logits_llamacpp.py` with the `xllamacpp` wheel from the
//! files `examples/write_seeded_models.rs` writes). Mistral's sliding
//! window on a llama file, which llama.cpp's `llama` graph does not apply,
//! is checked the same way against a float64 numpy forward
//! (`tests/data/families_float64/`, `tests/data/scripts/llama_float64_forward.py`),
//! which first matches llama.cpp on the llama files to KL 1.4e-5.
//!
//! At every position: KL(llama.cpp ‖ Gantry) at most 0.001 in F32 and 0.03
//! quantized, and Gantry's most likely token llama.cpp's wherever
//! llama.cpp's two best are at least 0.5 nat apart. On the CPU, and on the
//! first wgpu adapter and the first CUDA device with the CPU behind each,
//! where there is one (each GPU test skips, saying why, where not).
//!
//! The comparison must be able to fail: the same files with each family's
//! own part made a no-op (Llama 3's rope factors all one, Qwen 2's biases
//! zero, Qwen 3's Q/K norms one, Gemma 2's soft-caps and sliding window
//! out of reach, the experts' router zero so every token gets the first
//! experts with equal weights, Mistral's window out of reach; gpt-oss's attention biases zero, window out
//! of reach, sinks too negative to take weight, expert biases zero and
//! YaRN off) land far outside the F32 limit — what an engine that ignored
//! the part would answer.

use std::path::PathBuf;
use std::sync::Arc;

use gantry::backends::cpu::CpuBackend;
use gantry::model::blocks::Attention;
use gantry::model::decoder::{DecoderModel, LogitsFor, Session, SessionParams};
use gantry::model::{HostTensors, LoadOptions};
use gantry::testing::seeded_model::{Part, SEEDED_DTYPES, SEEDED_PROMPT, SEEDED_VOCAB, SeededFamily, SeededModel};
use gantry::{Backend, Context, DType};
use serde_json::Value;

const F32_KL: f64 = 0.001;
const QUANTIZED_KL: f64 = 0.03;
const GREEDY_GAP: f64 = 0.5;

/// Where `family`'s references are: llama.cpp's, or the float64 forward's
/// for what llama.cpp does not compute.
fn data_dir(family: SeededFamily) -> PathBuf {
    let folder = if SeededFamily::FLOAT64_CHECKED.contains(&family) { "families_float64" } else { "families" };
    gantry::testing::reference_dir().join(folder)
}

fn manifest(family: SeededFamily) -> Value {
    let text = std::fs::read_to_string(data_dir(family).join("manifest.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// Every family: those llama.cpp computes, then those the float64 forward does.
fn every_family() -> impl Iterator<Item = SeededFamily> {
    SeededFamily::ALL.into_iter().chain(SeededFamily::FLOAT64_CHECKED)
}

/// The reference log-probabilities of `model`, `[17][vocab]`.
fn reference(model: &SeededModel) -> Vec<f32> {
    let stem = model.stem();
    let bytes = std::fs::read(data_dir(model.family).join(format!("{stem}.logprobs"))).unwrap();
    assert_eq!(bytes.len(), SEEDED_PROMPT.len() * SEEDED_VOCAB * 4, "{stem}.logprobs");
    bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect()
}

fn fnv1a64(bytes: &[u8]) -> String {
    let h = bytes.iter().fold(0xCBF2_9CE4_8422_2325u64, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01B3));
    format!("{h:016x}")
}

/// A fresh file path, the file removed when the guard drops.
fn temp_file(name: &str) -> tempfile::TempPath {
    tempfile::Builder::new().prefix(&format!("gantry-families-{name}-")).tempfile().unwrap().into_temp_path()
}

/// Gantry's logits at every position of the prompt, the model loaded for
/// the first of `backends` (the others behind it).
fn gantry_logits(model: &SeededModel, backends: &[Arc<dyn Backend>]) -> Vec<f32> {
    gantry_logits_with(model, backends, Attention::Flash)
}

/// [`gantry_logits`] with attention computed as `attention` says.
fn gantry_logits_with(model: &SeededModel, backends: &[Arc<dyn Backend>], attention: Attention) -> Vec<f32> {
    gantry_logits_in(model, backends, attention, SEEDED_PROMPT.len())
}

/// [`gantry_logits_with`], the prompt fed in batches of at most `batch`
/// tokens, each after the cache holds the ones before it.
fn gantry_logits_in(
    model: &SeededModel,
    backends: &[Arc<dyn Backend>],
    attention: Attention,
    batch: usize,
) -> Vec<f32> {
    gantry_logits_placed(model, backends, (attention, batch), HostTensors::NONE, |_, _| {})
}

/// [`gantry_logits_in`] with `host` weights kept in host memory, `look`
/// shown the loaded model first.
fn gantry_logits_placed(
    model: &SeededModel,
    backends: &[Arc<dyn Backend>],
    (attention, batch): (Attention, usize),
    host: HostTensors,
    look: impl FnOnce(&Context, &DecoderModel),
) -> Vec<f32> {
    let path = temp_file(&format!("{}-{:?}-{host:?}.gguf", model.stem(), model.neutral));
    std::fs::write(&path, model.to_gguf().unwrap()).unwrap();
    let mut ctx = Context::new();
    let device = backends[0].device();
    let options = LoadOptions {
        oversize: Some(gantry::backends::cpu::buffer_type()),
        host_tensors: host,
        ..LoadOptions::default()
    };
    let loaded = DecoderModel::load_with(&path, &mut ctx, device, options);
    let loaded = loaded.unwrap_or_else(|e| panic!("{}: {e}", model.stem()));
    look(&ctx, &loaded);
    let params = SessionParams { n_ctx: 64, attention, ..SessionParams::default() };
    let mut s = Session::new(&mut ctx, loaded.hp, loaded.weights.clone(), backends, params).unwrap();
    let mut logits = Vec::with_capacity(SEEDED_PROMPT.len() * SEEDED_VOCAB);
    for chunk in SEEDED_PROMPT.chunks(batch) {
        logits.extend_from_slice(s.eval(&mut ctx, chunk, LogitsFor::All).unwrap());
    }
    logits
}

fn log_softmax(row: &[f32]) -> Vec<f64> {
    let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
    let sum: f64 = row.iter().map(|&x| (x as f64 - max).exp()).sum();
    row.iter().map(|&x| x as f64 - max - sum.ln()).collect()
}

/// The worst position's KL(reference ‖ engine), and the positions where the
/// engine's top token is not the reference's although its gap is wide.
fn compare(engine: &[f32], reference: &[f32]) -> (f64, usize, Vec<usize>) {
    let (mut worst, mut worst_at, mut wrong) = (0f64, 0, Vec::new());
    for (p, (e, r)) in engine.chunks(SEEDED_VOCAB).zip(reference.chunks(SEEDED_VOCAB)).enumerate() {
        let e = log_softmax(e);
        let kl: f64 = r.iter().zip(&e).map(|(&lr, &le)| (lr as f64).exp() * (lr as f64 - le)).sum();
        if kl > worst {
            (worst, worst_at) = (kl, p);
        }
        let best = (0..SEEDED_VOCAB).max_by(|&a, &b| r[a].total_cmp(&r[b])).unwrap_or(0);
        let second = (0..SEEDED_VOCAB).filter(|&i| i != best).map(|i| r[i]).fold(f32::NEG_INFINITY, f32::max);
        let gap = f64::from(r[best] - second);
        let top = (0..SEEDED_VOCAB).max_by(|&a, &b| e[a].total_cmp(&e[b])).unwrap_or(0);
        if gap >= GREEDY_GAP && top != best {
            wrong.push(p);
        }
    }
    (worst, worst_at, wrong)
}

fn limit(dtype: DType) -> f64 {
    if dtype == DType::F32 { F32_KL } else { QUANTIZED_KL }
}

/// Checks every family and type on `backends`; a failure lists every case.
fn check_all(backends: &[Arc<dyn Backend>], on: &str) {
    let mut failures = Vec::new();
    for family in every_family() {
        let manifest = manifest(family);
        let prompt: Vec<u64> = manifest["prompt"].as_array().unwrap().iter().filter_map(Value::as_u64).collect();
        assert_eq!(prompt, SEEDED_PROMPT.map(u64::from), "the stored references are of another prompt");
        for &dtype in SEEDED_DTYPES.iter().chain(family.extra_dtypes()) {
            let model = SeededModel::new(family, dtype);
            let stem = model.stem();
            let bytes = model.to_gguf().unwrap();
            let want = &manifest["files"][&stem];
            assert_eq!(
                (Some(bytes.len() as u64), want["fnv1a64"].as_str()),
                (want["bytes"].as_u64(), Some(fnv1a64(&bytes).as_str())),
                "{stem}: the seeded file is not the one the reference ran on (rerun the scripts)"
            );
            let (kl, at, wrong) = compare(&gantry_logits(&model, backends), &reference(&model));
            eprintln!("{on} {stem}: worst KL {kl:.6} at position {at}; top-1 differs at {wrong:?}");
            if kl > limit(dtype) || !wrong.is_empty() {
                failures
                    .push(format!("{stem}: KL {kl:.5} at {at} (limit {}), top-1 differs at {wrong:?}", limit(dtype)));
            }
        }
    }
    assert!(failures.is_empty(), "{on}: {failures:#?}");
}

fn cpu() -> Arc<dyn Backend> {
    Arc::new(CpuBackend::with_threads(2).unwrap())
}

#[test]
fn every_family_matches_llama_cpp_on_the_cpu() {
    check_all(&[cpu()], "cpu");
}

#[cfg(feature = "wgpu")]
#[test]
fn every_family_matches_llama_cpp_on_wgpu_and_the_cpu() {
    use gantry::Device;
    let platform = gantry::backends::wgpu::WgpuPlatform::new();
    let Some(dev) = platform.wgpu_devices().first() else {
        eprintln!("skipped: no wgpu adapter on this machine");
        return;
    };
    check_all(&[dev.init_backend(None).unwrap(), cpu()], "wgpu+cpu");
}

/// `--n-cpu-moe 1`: the first layer's experts stay in host memory (repacked
/// for the CPU where their type has a repacked layout), the rest goes to
/// the GPU, and the logits still match llama.cpp's.
#[cfg(feature = "wgpu")]
#[test]
fn experts_kept_in_host_memory_match_llama_cpp_on_wgpu_and_the_cpu() {
    use gantry::Device;
    let platform = gantry::backends::wgpu::WgpuPlatform::new();
    let Some(dev) = platform.wgpu_devices().first() else {
        eprintln!("skipped: no wgpu adapter on this machine");
        return;
    };
    let backends = [dev.init_backend(None).unwrap(), cpu()];
    for family in [SeededFamily::Qwen3Moe, SeededFamily::Mixtral] {
        for dtype in [DType::F32, DType::Q4_K] {
            let model = SeededModel::new(family, dtype);
            let stem = model.stem();
            let look = |ctx: &Context, m: &DecoderModel| {
                let home = |name: &str| {
                    let t = m.loaded.get(name).unwrap();
                    ctx.tensor_buffer(t).unwrap().0.buffer_type.name().to_owned()
                };
                let host = if dtype == DType::F32 { "CPU" } else { "CPU_REPACK" };
                assert_eq!(home("blk.0.ffn_up_exps.weight"), host, "{stem}");
                assert_eq!(home("blk.0.ffn_down_exps.weight"), host, "{stem}");
                assert_ne!(home("blk.1.ffn_up_exps.weight"), host, "{stem}: only the first layer's experts");
                assert_ne!(home("blk.0.attn_q.weight"), host, "{stem}: attention goes to the GPU");
            };
            let whole = (Attention::Flash, SEEDED_PROMPT.len());
            let logits = gantry_logits_placed(&model, &backends, whole, HostTensors::experts_of_first_layers(1), look);
            let (kl, at, wrong) = compare(&logits, &reference(&model));
            eprintln!("wgpu+cpu --n-cpu-moe 1 {stem}: worst KL {kl:.6} at position {at}; top-1 differs at {wrong:?}");
            assert!(kl <= limit(dtype) && wrong.is_empty(), "{stem}: KL {kl} at {at}, top-1 differs at {wrong:?}");
        }
    }
}

#[cfg(feature = "cuda")]
#[test]
fn every_family_matches_llama_cpp_on_cuda_and_the_cpu() {
    use gantry::Device;
    let platform = gantry::backends::cuda::CudaPlatform::new();
    let Some(dev) = platform.cuda_devices().first() else {
        eprintln!("skipped: no CUDA device ({})", platform.unavailable().unwrap_or("none found"));
        return;
    };
    check_all(&[dev.init_backend(None).unwrap(), cpu()], "cuda+cpu");
}

/// Attention sinks join the explicit soft max too (SOFT_MAX with sinks,
/// which every backend has, where flash attention with sinks is the CPU's
/// alone): gpt-oss through explicit attention matches llama.cpp as closely,
/// on the CPU and on the first wgpu adapter with the CPU behind it.
#[test]
fn gpt_oss_matches_llama_cpp_with_explicit_attention() {
    let cpu_only: (Vec<Arc<dyn Backend>>, &str) = (vec![cpu()], "cpu");
    #[cfg(feature = "wgpu")]
    let runs = {
        use gantry::Device;
        let platform = gantry::backends::wgpu::WgpuPlatform::new();
        match platform.wgpu_devices().first() {
            Some(dev) => vec![cpu_only, (vec![dev.init_backend(None).unwrap(), cpu()], "wgpu+cpu")],
            None => {
                eprintln!("wgpu part skipped: no wgpu adapter on this machine");
                vec![cpu_only]
            }
        }
    };
    #[cfg(not(feature = "wgpu"))]
    let runs = vec![cpu_only];
    for (backends, on) in &runs {
        for dtype in [DType::F32, DType::Q8_0] {
            let model = SeededModel::new(SeededFamily::GptOss, dtype);
            let engine = gantry_logits_with(&model, backends, Attention::Explicit);
            let (kl, at, wrong) = compare(&engine, &reference(&model));
            eprintln!("{on} explicit {}: worst KL {kl:.6} at position {at}; top-1 differs at {wrong:?}", model.stem());
            assert!(
                kl <= limit(dtype) && wrong.is_empty(),
                "{on} {}: KL {kl} at {at}, top-1 at {wrong:?}",
                model.stem()
            );
        }
        // And the sinks are what this path adds: without them it lands far off.
        let model = SeededModel { neutral: Some(Part::Sinks), ..SeededModel::new(SeededFamily::GptOss, DType::F32) };
        let engine = gantry_logits_with(&model, backends, Attention::Explicit);
        let (kl, at, _) = compare(&engine, &reference(&model));
        eprintln!("{on} explicit gpt-oss without sinks: worst KL {kl:.4} at {at}");
        assert!(kl > 20.0 * F32_KL, "{on}: explicit attention without sinks: KL only {kl}");
    }
}

/// gpt-oss decoded a token at a time, as llama.cpp's references were (its
/// server continues the cached prefix): each query's sliding window and
/// sinks over cached keys, not the batch's own, land as close.
#[test]
fn gpt_oss_matches_llama_cpp_token_by_token() {
    for attention in [Attention::Flash, Attention::Explicit] {
        let model = SeededModel::new(SeededFamily::GptOss, DType::F32);
        let engine = gantry_logits_in(&model, &[cpu()], attention, 1);
        let (kl, at, wrong) = compare(&engine, &reference(&model));
        eprintln!(
            "cpu {attention:?} token by token {}: worst KL {kl:.6} at {at}; top-1 differs at {wrong:?}",
            model.stem()
        );
        assert!(kl <= F32_KL && wrong.is_empty(), "{attention:?}: KL {kl} at {at}, top-1 at {wrong:?}");
    }
}

/// Each family's own part, made a no-op, moves the logits far past the F32
/// limit: the comparison above would catch an engine that ignored it.
#[test]
fn a_family_part_left_out_fails_the_comparison() {
    for family in every_family() {
        for &part in family.parts() {
            let model = SeededModel { neutral: Some(part), ..SeededModel::new(family, DType::F32) };
            let (kl, at, wrong) = compare(&gantry_logits(&model, &[cpu()]), &reference(&model));
            eprintln!("{} without {part:?}: worst KL {kl:.4} at {at}; top-1 differs at {wrong:?}", family.name());
            assert!(kl > 20.0 * F32_KL, "{} without {part:?}: KL only {kl}", family.name());
        }
    }
}
