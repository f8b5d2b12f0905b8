//! A small random llama on the first GPU (wgpu, CUDA) with the CPU behind
//! it, through the session and scheduler, against the same model on the CPU
//! alone: a prompt, then several one-token steps in the same KV bucket (each
//! rebuilds the same graph over the scheduler's input copies). CUDA runs it
//! twice over the same graphs, so the second pass replays captured CUDA
//! graphs. Each test is skipped, with a message, where its GPU is missing.

#![cfg(any(feature = "wgpu", feature = "cuda"))]

use std::sync::Arc;

use gantry::backends::cpu::CpuBackend;
use gantry::model::decoder::{DecoderHparams, DecoderWeights, LogitsFor, Session, SessionParams};
use gantry::{Backend, BufferUsage, Context, DType, Device};

const HP: DecoderHparams = gantry::testing::TINY_LLAMA;

/// Runs the prompt and three more tokens; returns every logit produced.
fn logits_on(backends: &[Arc<dyn Backend>]) -> Vec<f32> {
    let mut ctx = Context::new();
    let w = DecoderWeights::create(&mut ctx, &HP, DType::F16, DType::F32).unwrap();
    let buft = backends[0].device().buffer_type();
    let align = buft.alignment();
    for t in w.all() {
        let size = ctx.desc(t).unwrap().nbytes();
        let buf = ctx.alloc_buffer(&buft, size.next_multiple_of(align), BufferUsage::Weights).unwrap();
        ctx.place(t, buf, 0).unwrap();
    }
    w.fill_random(&mut ctx, 7).unwrap();
    let params = SessionParams { n_ctx: 64, kv_dtype: DType::F16, ..SessionParams::default() };
    let mut s = Session::new(&mut ctx, HP, w, backends, params).unwrap();
    let mut all = s.eval(&mut ctx, &[1, 17, 250, 3, 99], LogitsFor::All).unwrap().to_vec();
    for t in [42, 7, 299] {
        all.extend_from_slice(s.eval(&mut ctx, &[t], LogitsFor::Last).unwrap());
    }
    all
}

#[cfg(feature = "wgpu")]
#[test]
fn session_on_wgpu_and_cpu_matches_the_cpu() {
    let platform = gantry::backends::wgpu::WgpuPlatform::new();
    let Some(dev) = platform.wgpu_devices().first() else {
        eprintln!("skipped: no wgpu adapter on this machine");
        return;
    };
    let cpu: Arc<dyn Backend> = Arc::new(CpuBackend::with_threads(2).unwrap());
    let want = logits_on(std::slice::from_ref(&cpu));
    let got = logits_on(&[dev.init_backend(None).unwrap(), cpu]);
    assert_eq!(got.len(), want.len());
    let worst = got.iter().zip(&want).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
    assert!(worst < 1e-2, "logits differ by up to {worst}");
}

#[cfg(feature = "cuda")]
#[test]
fn session_on_cuda_and_cpu_matches_the_cpu() {
    let platform = gantry::backends::cuda::CudaPlatform::new();
    let Some(dev) = platform.cuda_devices().first() else {
        eprintln!("skipped: no CUDA device ({})", platform.unavailable().unwrap_or("none found"));
        return;
    };
    let cpu: Arc<dyn Backend> = Arc::new(CpuBackend::with_threads(2).unwrap());
    let want = logits_on(std::slice::from_ref(&cpu));
    let gpu = dev.init_backend(None).unwrap();
    for pass in 0..2 {
        let got = logits_on(&[gpu.clone(), cpu.clone()]);
        assert_eq!(got.len(), want.len());
        let worst = got.iter().zip(&want).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
        assert!(worst < 1e-2, "pass {pass}: logits differ by up to {worst}");
    }
    let captured =
        gpu.as_any().downcast_ref::<gantry::backends::cuda::CudaBackend>().map_or(0, |b| b.captured_graphs());
    if std::env::var("GANTRY_CUDA_GRAPHS").as_deref() != Ok("0") {
        assert!(captured > 0, "decode steps repeat their graphs: some must have been captured");
    }
    eprintln!("{captured} CUDA graphs captured");
}
