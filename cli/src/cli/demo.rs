//! `gantry` with no arguments: the built-in default workload. A llama-shaped
//! model with seeded random weights (no files needed) runs over every device
//! found, and is checked against a CPU-only run.

use std::collections::HashMap;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use clap::Args;
use gantry::SplitMix64;
use gantry::backends::cpu;
use gantry::model::decoder::{DecoderHparams, DecoderWeights, LogitsFor, Session, SessionParams};
use gantry::{Backend, BufferUsage, Context, DType, Error};

use super::common::{backends, bytes};

/// Options of the default workload.
#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Backends in priority order, CPU last (default: every device found).
    #[arg(long)]
    pub backends: Option<String>,
    /// Threads of the CPU backend (default: every core).
    #[arg(long, short)]
    pub threads: Option<usize>,
    /// Transformer blocks of the model.
    #[arg(long, default_value_t = 8)]
    pub layers: usize,
    /// Weight type of the matrices (f32, f16, q8_0, q4_0, ...).
    #[arg(long, default_value = "q8_0")]
    pub dtype: String,
    /// Prompt tokens.
    #[arg(long, default_value_t = 32)]
    pub prompt: usize,
    /// Tokens to generate.
    #[arg(short = 'n', long, default_value_t = 16)]
    pub n_predict: usize,
}

impl Default for DemoArgs {
    fn default() -> Self {
        Self { backends: None, threads: None, layers: 8, dtype: "q8_0".into(), prompt: 32, n_predict: 16 }
    }
}

/// A model with SmolLM2's widths, fewer layers and a smaller vocabulary.
fn demo_hparams(layers: usize) -> DecoderHparams {
    DecoderHparams { n_layer: layers, n_vocab: 8192, n_ctx_train: 4096, ..DecoderHparams::SMOLLM2_135M }
}

/// What one run produced.
struct RunResult {
    prompt_logits: Vec<f32>,
    generated: Vec<u32>,
    prompt_ms: f64,
    decode_ms_per_token: f64,
}

/// Builds the seeded model on `backends` (weights in the first backend's
/// memory) and runs the prompt then greedy decoding.
fn run_model(
    hp: &DecoderHparams,
    dtype: DType,
    backends: &[Arc<dyn Backend>],
    prompt: &[u32],
    n_predict: usize,
    describe: bool,
) -> Result<RunResult, Error> {
    let mut ctx = Context::new();
    // Quantized models keep their embeddings in Q8_0 (as SmolLM2's GGUF does).
    let embd_dtype = if dtype.is_quantized() { DType::Q8_0 } else { dtype };
    let weights = DecoderWeights::create(&mut ctx, hp, dtype, embd_dtype)?;
    // Fill the weights in host memory, then place them on the first backend.
    let host = cpu::buffer_type();
    let staging = ctx.alloc_tensors(&weights.all(), &host, BufferUsage::Weights)?;
    weights.fill_random(&mut ctx, 0x5eed)?;
    let first = &backends[0];
    let weights =
        if first.device().buffer_type().is_host() { weights } else { move_weights(&mut ctx, &weights, first)? };
    if !first.device().buffer_type().is_host() {
        ctx.free_tensor_buffers(&staging)?;
    }
    let n_ctx = (prompt.len() + n_predict).next_multiple_of(256);
    let mut session =
        Session::new(&mut ctx, *hp, weights, backends, SessionParams { n_ctx, ..SessionParams::from_env() })?;

    let t0 = Instant::now();
    let prompt_logits = session.eval(&mut ctx, prompt, LogitsFor::All)?.to_vec();
    let prompt_ms = t0.elapsed().as_secs_f64() * 1e3;
    if describe {
        let sched = session.scheduler();
        let mut per_backend: HashMap<&str, usize> = HashMap::new();
        let mut copies = 0;
        for (i, s) in sched.splits().iter().enumerate() {
            *per_backend.entry(sched.backends()[s.backend.get()].name()).or_default() += 1;
            copies += sched.split_inputs(i).len();
        }
        let mut counts: Vec<String> = per_backend.iter().map(|(b, n)| format!("{b}: {n}")).collect();
        counts.sort();
        println!("placement: {} splits ({}), {copies} input copies", sched.n_splits(), counts.join(", "));
        let sizes: Vec<String> = sched
            .backends()
            .iter()
            .zip(sched.buffer_sizes())
            .map(|(b, n)| format!("{} {}", b.name(), bytes(n)))
            .collect();
        println!(
            "compute buffers: {}; KV cache {} on {}",
            sizes.join(", "),
            bytes(session.kv_bytes(&ctx)),
            first.name()
        );
    }
    let vocab = hp.n_vocab;
    let last = &prompt_logits[(prompt.len() - 1) * vocab..];
    let mut next = argmax(last);
    let mut generated = vec![next];
    let t1 = Instant::now();
    for _ in 1..n_predict {
        let logits = session.eval(&mut ctx, &[next], LogitsFor::Last)?;
        next = argmax(logits);
        generated.push(next);
    }
    let decode_ms_per_token = t1.elapsed().as_secs_f64() * 1e3 / (n_predict.max(2) - 1) as f64;
    Ok(RunResult { prompt_logits, generated, prompt_ms, decode_ms_per_token })
}

/// Copies the weights into a buffer of `backend`'s memory.
fn move_weights(ctx: &mut Context, w: &DecoderWeights, backend: &Arc<dyn Backend>) -> Result<DecoderWeights, Error> {
    let all = w.all();
    let mut map = HashMap::new();
    let mut fresh = Vec::with_capacity(all.len());
    for &t in &all {
        let mut d = *ctx.desc(t)?;
        d.flags = gantry::TensorFlags::NONE;
        let copy = ctx.insert(d);
        map.insert(t, copy);
        fresh.push(copy);
    }
    ctx.alloc_tensors(&fresh, &backend.device().buffer_type(), BufferUsage::Weights)?;
    for &t in &all {
        ctx.copy_tensor(t, map[&t])?;
    }
    Ok(w.map(|t| map[&t]))
}

fn argmax(v: &[f32]) -> u32 {
    v.iter().enumerate().fold((0, f32::NEG_INFINITY), |b, (i, &x)| if x > b.1 { (i as u32, x) } else { b }).0
}

/// Runs the default workload.
pub fn run(args: &DemoArgs) -> ExitCode {
    match run_inner(args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("gantry: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run_inner(args: &DemoArgs) -> Result<bool, Error> {
    let (registry, all) = backends(args.backends.as_deref(), args.threads, None)?;
    println!("gantry: the default workload — a llama-shaped model with seeded random weights\n");
    println!("devices:");
    for (_, d) in registry.devices() {
        let m = d.memory();
        println!(
            "  {:<12} {:<5} {} ({} free of {})",
            d.name(),
            d.device_type().name(),
            d.description(),
            bytes(m.free),
            bytes(m.total)
        );
    }
    let dtype = DType::from_name(&args.dtype).ok_or_else(|| Error::Model(format!("unknown dtype {:?}", args.dtype)))?;
    let hp = demo_hparams(args.layers);
    hp.validate()?;
    // The prompt is a `Vec` of that many tokens and the cache holds it and
    // the reply: each bounded, so neither the vector nor the sum overflows.
    let max = gantry::Limits::DEFAULT.max_context;
    if args.prompt.saturating_add(args.n_predict) > max {
        return Err(Error::Model(format!(
            "--prompt {} and -n {} need a KV cache of more than the {max} tokens allowed",
            args.prompt, args.n_predict
        )));
    }
    println!(
        "\nmodel: {} layers, width {}, {} heads ({} KV), FFN {}, vocab {}, {} weights",
        hp.n_layer, hp.n_embd, hp.n_head, hp.n_head_kv, hp.n_ff, hp.n_vocab, dtype
    );
    let names: Vec<&str> = all.iter().map(|b| b.name()).collect();
    println!("backends (priority order): {}", names.join(", "));
    let mut rng = SplitMix64::new(7);
    let prompt: Vec<u32> = (0..args.prompt.max(1)).map(|_| (rng.next_u64() % hp.n_vocab as u64) as u32).collect();
    let n_predict = args.n_predict.max(1);

    let multi = run_model(&hp, dtype, &all, &prompt, n_predict, true)?;
    println!(
        "prompt: {} tokens in {:.1} ms ({:.0} tok/s); decode: {:.2} ms/token ({:.1} tok/s)",
        prompt.len(),
        multi.prompt_ms,
        prompt.len() as f64 / multi.prompt_ms * 1e3,
        multi.decode_ms_per_token,
        1e3 / multi.decode_ms_per_token
    );

    // The same model and tokens on the CPU alone.
    let cpu_only: Vec<Arc<dyn Backend>> =
        all.iter().filter(|b| b.device().device_type() == gantry::DeviceType::Cpu).take(1).cloned().collect();
    let reference = run_model(&hp, dtype, &cpu_only, &prompt, n_predict, false)?;
    let max_diff =
        multi.prompt_logits.iter().zip(&reference.prompt_logits).map(|(a, b)| (a - b).abs()).fold(0.0, f32::max);
    let scale = reference.prompt_logits.iter().map(|v| v.abs()).fold(0.0, f32::max).max(1e-6);
    let same_tokens = multi.generated.iter().zip(&reference.generated).take_while(|(a, b)| a == b).count();
    let ok = max_diff <= 1e-2 * scale && multi.prompt_logits.iter().all(|v| v.is_finite());
    println!(
        "check against a CPU-only run: max |Δ logit| {:.2e} (logits up to {:.1}), {}/{} greedy tokens equal — {}",
        max_diff,
        scale,
        same_tokens,
        n_predict,
        if ok { "OK" } else { "MISMATCH" }
    );
    Ok(ok)
}
