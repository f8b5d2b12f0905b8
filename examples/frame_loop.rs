//! A host's frame loop with a model beside it: one decode step per 16 ms
//! frame while the "frame" does its own work. Each frame polls the step
//! once, takes its logits when it has finished and starts the next one.
//! Prints how long each frame spent inside Gantry's calls (the longest and
//! the mean), beside the time one synchronous `decode` takes (what a frame
//! would stall for without the asynchronous calls).
//!
//! ```sh
//! cargo run --release --example frame_loop -- [--mode worker|session] [--backends wgpu0,cpu]
//!     [--host-threads N] [--frames 120] [--layers 8]
//! ```
//!
//! Two ways to run the steps:
//! - `--mode worker` (the default): a [`DecodeWorker`] owns the session and
//!   computes on a driver of its own (`submit`, `poll`); whichever backend
//!   computes, the frame only hands over a batch and swaps logits.
//! - `--mode session`: the frame calls `Session::decode_start`, `is_done`
//!   and `decode_finish` itself. On a GPU (wgpu, CUDA) the step computes
//!   while the frame runs; the CPU backend computes within `decode_start`, so
//!   there the frame holds the whole step.
//!
//! `--host-threads N` plays a host with a rayon pool of its own: the CPU
//! backend computes on that pool (`CpuBackend::with_pool`) and, in worker
//! mode, the worker's driver runs as a long job on it — Gantry starts no
//! thread at all.
//!
//! The model has SmolLM2-135M's widths with seeded random weights (Q8_0),
//! `--layers` layers and a vocabulary of 8192; its weights and KV cache live
//! in the first backend's memory.

use std::sync::Arc;
use std::time::{Duration, Instant};

use gantry::backends::cpu::{CpuBackend, CpuDevice};
use gantry::model::decoder::{Batch, DecodeWorker, DecoderHparams, DecoderWeights, Session, SessionParams};
use gantry::{Backend, BufferUsage, Context, DType, Registry, RegistryDefaults, Result};

const FRAME: Duration = Duration::from_millis(16);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Worker,
    Session,
}

struct Args {
    mode: Mode,
    backends: Option<String>,
    host_threads: Option<usize>,
    frames: usize,
    layers: usize,
}

fn parse_args() -> std::result::Result<Args, String> {
    let mut args = Args { mode: Mode::Worker, backends: None, host_threads: None, frames: 120, layers: 8 };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--mode" => {
                args.mode = match value()?.as_str() {
                    "worker" => Mode::Worker,
                    "session" => Mode::Session,
                    other => return Err(format!("--mode: {other:?} is neither worker nor session")),
                }
            }
            "--backends" => args.backends = Some(value()?),
            "--host-threads" => {
                let n: usize = value()?.parse().map_err(|e| format!("--host-threads: {e}"))?;
                if n == 0 {
                    return Err("--host-threads: a pool needs at least one thread".into());
                }
                args.host_threads = Some(n);
            }
            "--frames" => args.frames = value()?.parse().map_err(|e| format!("--frames: {e}"))?,
            "--layers" => args.layers = value()?.parse().map_err(|e| format!("--layers: {e}"))?,
            other => {
                return Err(format!(
                    "unknown argument {other:?} (--mode worker|session, --backends LIST, --host-threads N, \
                     --frames N, --layers N)"
                ));
            }
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

/// The decode steps as the frame loop drives them, in either mode.
enum Stepper {
    Worker(DecodeWorker),
    Session(Box<(Context, Session)>),
}

impl Stepper {
    /// Starts a step.
    fn start(&mut self, batch: &Batch) -> Result<()> {
        match self {
            Stepper::Worker(w) => w.submit(batch),
            Stepper::Session(m) => {
                let (ctx, session) = &mut **m;
                session.decode_start(ctx, batch)
            }
        }
    }

    /// Whether the step has finished (the poll each frame makes).
    fn is_done(&mut self) -> Result<bool> {
        match self {
            Stepper::Worker(w) => Ok(w.is_done()),
            Stepper::Session(m) => m.1.is_done(),
        }
    }

    /// The finished step's next token (greedy).
    fn finish(&mut self) -> Result<u32> {
        match self {
            Stepper::Worker(w) => w.wait().map(argmax),
            Stepper::Session(m) => {
                let (ctx, session) = &mut **m;
                session.decode_finish(ctx).map(argmax)
            }
        }
    }
}

fn run(args: &Args) -> Result<()> {
    let registry = Registry::with_defaults()?;
    let mut backends: Vec<Arc<dyn Backend>> = match &args.backends {
        Some(list) => registry.backends_by_names(&list.split(',').collect::<Vec<_>>())?,
        None => registry.backends_by_priority()?,
    };
    let host_pool = match args.host_threads {
        Some(n) => Some(Arc::new(
            rayon::ThreadPoolBuilder::new()
                .num_threads(n)
                .build()
                .map_err(|e| gantry::Error::Model(format!("the host's pool of {n} threads: {e}")))?,
        )),
        None => None,
    };
    if let Some(pool) = &host_pool {
        // The host's CPU backend in place of the registry's: kernels on the host's threads.
        for b in backends.iter_mut().filter(|b| b.as_any().downcast_ref::<CpuBackend>().is_some()) {
            *b = Arc::new(CpuBackend::with_pool(CpuDevice::new(), pool.clone()));
        }
    }
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

    let mut stepper = match (args.mode, &host_pool) {
        (Mode::Worker, Some(pool)) => {
            let (worker, driver) = DecodeWorker::new(ctx, session);
            // The driver as a long job of the host's pool: Gantry starts no thread.
            pool.spawn(move || driver.run());
            Stepper::Worker(worker)
        }
        (Mode::Worker, None) => Stepper::Worker(DecodeWorker::spawn(ctx, session)?),
        (Mode::Session, _) => Stepper::Session(Box::new((ctx, session))),
    };

    // The frame loop: poll once per frame, take the logits and start the next step when done.
    batch.clear();
    batch.push(next, 0, true);
    let mut inside = Vec::with_capacity(args.frames);
    // The longest single call of each kind: poll, finish (take the logits), start.
    let mut longest_call = [Duration::ZERO; 3];
    let mut tokens = 0usize;
    let start = Instant::now();
    let t = Instant::now();
    stepper.start(&batch)?;
    let mut first_call = t.elapsed();
    for f in 0..args.frames {
        let frame_start = start + FRAME * f as u32;
        let mut in_gantry = std::mem::take(&mut first_call);
        let t = Instant::now();
        let done = stepper.is_done()?;
        let polled = t.elapsed();
        longest_call[0] = longest_call[0].max(polled);
        in_gantry += polled;
        if done {
            let t = Instant::now();
            next = stepper.finish()?;
            let finished = t.elapsed();
            tokens += 1;
            batch.clear();
            batch.push(next, 0, true);
            let t = Instant::now();
            stepper.start(&batch)?;
            let started = t.elapsed();
            longest_call[1] = longest_call[1].max(finished);
            longest_call[2] = longest_call[2].max(started);
            in_gantry += finished + started;
        }
        inside.push(in_gantry.as_secs_f64() * 1e3);
        frame_work(frame_start + FRAME);
    }
    stepper.finish()?;
    if let Stepper::Worker(worker) = stepper {
        // Stops the driver (and, on the host's pool, ends its job) and gives the model back.
        drop(worker.into_parts()?);
    }
    let longest = inside.iter().copied().fold(0.0, f64::max);
    let mean = inside.iter().sum::<f64>() / inside.len().max(1) as f64;
    let late = inside.iter().filter(|&&ms| ms > FRAME.as_secs_f64() * 1e3).count();
    let mode = match args.mode {
        Mode::Worker => "worker (DecodeWorker submit / is_done / wait)",
        Mode::Session => "session (decode_start / is_done / decode_finish)",
    };
    let threads = match args.host_threads {
        Some(n) => format!("the host's pool of {n} threads"),
        None => "Gantry's own threads".into(),
    };
    println!(
        "model: {} layers, width {}, vocab {}, Q8_0 weights on {}",
        hp.n_layer,
        hp.n_embd,
        hp.n_vocab,
        backends[0].name()
    );
    println!("mode: {mode}; CPU work on {threads}");
    println!("synchronous decode step: {sync_median:.2} ms (median of {})", sync_ms.len());
    println!(
        "frame loop: {} frames of {} ms, {tokens} tokens decoded; time inside Gantry calls per frame: \
         longest {longest:.3} ms, mean {mean:.3} ms; {late} frames over budget",
        args.frames,
        FRAME.as_millis()
    );
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "longest single call: is_done {:.3} ms, finish (take the logits) {:.3} ms, start {:.3} ms",
        ms(longest_call[0]),
        ms(longest_call[1]),
        ms(longest_call[2])
    );
    println!("longest in-frame time / synchronous step: {:.2}", longest / sync_median);
    Ok(())
}
