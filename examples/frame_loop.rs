//! A host's frame loop with a model beside it: one decode step per 16 ms
//! frame, started with `Session::decode_start`, polled with `is_done` once
//! per frame, its logits taken with `decode_finish` — while the "frame" does
//! its own work. Prints how long each frame spent inside Gantry's calls (the
//! longest and the mean), beside the time one synchronous `decode` takes (what
//! a frame would stall for without the asynchronous calls).
//!
//! ```sh
//! cargo run --release --example frame_loop -- [--backends wgpu0,cpu] [--frames 120] [--layers 8]
//! ```
//!
//! The model has SmolLM2-135M's widths with seeded random weights (Q8_0),
//! `--layers` layers and a vocabulary of 8192; its weights and KV cache live
//! in the first backend's memory. On a GPU (wgpu, CUDA) the step computes
//! while the frame runs; the CPU backend computes within `decode_start`, so
//! there the frame holds the whole step.

use std::sync::Arc;
use std::time::{Duration, Instant};

use gantry::model::decoder::{Batch, DecoderHparams, DecoderWeights, Session, SessionParams};
use gantry::{Backend, BufferUsage, Context, DType, Registry, RegistryDefaults, Result};

const FRAME: Duration = Duration::from_millis(16);

struct Args {
    backends: Option<String>,
    frames: usize,
    layers: usize,
}

fn parse_args() -> std::result::Result<Args, String> {
    let mut args = Args { backends: None, frames: 120, layers: 8 };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--backends" => args.backends = Some(value()?),
            "--frames" => args.frames = value()?.parse().map_err(|e| format!("--frames: {e}"))?,
            "--layers" => args.layers = value()?.parse().map_err(|e| format!("--layers: {e}"))?,
            other => return Err(format!("unknown argument {other:?} (--backends LIST, --frames N, --layers N)")),
        }
    }
    Ok(args)
}

fn argmax(v: &[f32]) -> u32 {
    v.iter().enumerate().fold((0, f32::NEG_INFINITY), |b, (i, &x)| if x > b.1 { (i as u32, x) } else { b }).0
}

/// The frame's own work: busy until `until` (a renderer would record and
/// submit its passes here).
fn frame_work(until: Instant) {
    while Instant::now() < until {
        std::hint::spin_loop();
    }
}

fn main() -> std::process::ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("frame_loop: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    match run(&args) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("frame_loop: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run(args: &Args) -> Result<()> {
    let registry = Registry::with_defaults()?;
    let backends: Vec<Arc<dyn Backend>> = match &args.backends {
        Some(list) => registry.backends_by_names(&list.split(',').collect::<Vec<_>>())?,
        None => registry.backends_by_priority()?,
    };
    let names: Vec<&str> = backends.iter().map(|b| b.name()).collect();
    println!("backends (priority order): {}", names.join(", "));

    let hp = DecoderHparams { n_layer: args.layers, n_vocab: 8192, n_ctx_train: 4096, ..DecoderHparams::SMOLLM2_135M };
    let mut ctx = Context::new();
    let weights = DecoderWeights::create(&mut ctx, &hp, DType::Q8_0, DType::Q8_0)?;
    ctx.alloc_tensors(&weights.all(), &backends[0].device().buffer_type(), BufferUsage::Weights)?;
    weights.fill_random(&mut ctx, 0x5eed)?;
    let n_ctx = (args.frames + 64).next_multiple_of(256);
    let mut session = Session::new(&mut ctx, hp, weights, &backends, SessionParams { n_ctx, ..Default::default() })?;

    let prompt: Vec<u32> = (0..16).map(|i| (i * 37 + 11) % hp.n_vocab as u32).collect();
    let mut batch = Batch::new();
    batch.push_prompt(&prompt, 0);
    let mut next = argmax(session.decode(&mut ctx, &batch)?);

    // The synchronous step, for comparison (and to warm the decode graph up).
    let mut sync_ms = Vec::new();
    for _ in 0..8 {
        batch.clear();
        batch.push(next, 0, true);
        let t = Instant::now();
        next = argmax(session.decode(&mut ctx, &batch)?);
        sync_ms.push(t.elapsed().as_secs_f64() * 1e3);
    }
    sync_ms.sort_by(f64::total_cmp);
    let sync_median = sync_ms[sync_ms.len() / 2];

    // The frame loop: poll once per frame, take the logits and start the next step when done.
    batch.clear();
    batch.push(next, 0, true);
    let mut inside = Vec::with_capacity(args.frames);
    // The longest single call of each kind: poll, finish (wait + read the logits), start.
    let mut longest_call = [Duration::ZERO; 3];
    let mut tokens = 0usize;
    let start = Instant::now();
    let t = Instant::now();
    session.decode_start(&mut ctx, &batch)?;
    let mut first_call = t.elapsed();
    for f in 0..args.frames {
        let frame_start = start + FRAME * f as u32;
        let mut in_gantry = std::mem::take(&mut first_call);
        let t = Instant::now();
        let done = session.is_done()?;
        let polled = t.elapsed();
        longest_call[0] = longest_call[0].max(polled);
        in_gantry += polled;
        if done {
            let t = Instant::now();
            next = argmax(session.decode_finish(&mut ctx)?);
            let finished = t.elapsed();
            tokens += 1;
            batch.clear();
            batch.push(next, 0, true);
            let t = Instant::now();
            session.decode_start(&mut ctx, &batch)?;
            let started = t.elapsed();
            longest_call[1] = longest_call[1].max(finished);
            longest_call[2] = longest_call[2].max(started);
            in_gantry += finished + started;
        }
        inside.push(in_gantry.as_secs_f64() * 1e3);
        frame_work(frame_start + FRAME);
    }
    session.decode_finish(&mut ctx)?;
    let longest = inside.iter().copied().fold(0.0, f64::max);
    let mean = inside.iter().sum::<f64>() / inside.len().max(1) as f64;
    let late = inside.iter().filter(|&&ms| ms > FRAME.as_secs_f64() * 1e3).count();
    println!(
        "model: {} layers, width {}, vocab {}, Q8_0 weights on {}",
        hp.n_layer,
        hp.n_embd,
        hp.n_vocab,
        backends[0].name()
    );
    println!("synchronous decode step: {sync_median:.2} ms (median of {})", sync_ms.len());
    println!(
        "frame loop: {} frames of {} ms, {tokens} tokens decoded; time inside Gantry calls per frame: \
         longest {longest:.3} ms, mean {mean:.3} ms; {late} frames over budget",
        args.frames,
        FRAME.as_millis()
    );
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "longest single call: is_done {:.3} ms, decode_finish (wait + read logits) {:.3} ms, decode_start {:.3} ms",
        ms(longest_call[0]),
        ms(longest_call[1]),
        ms(longest_call[2])
    );
    println!("longest in-frame time / synchronous step: {:.2}", longest / sync_median);
    Ok(())
}
