//! `gantry bench`: llama-bench's table for Gantry. Rows `pp<N>` (a prompt of
//! N tokens), `tg<N>` (N tokens decoded one at a time), and with
//! `--parallel` `tg<N> x<S>` (S sequences decoding together, one token each
//! per batch; the rate is all sequences' tokens together). Each row is the
//! mean ± standard deviation of `-r` repetitions after a warm-up. With
//! `-d 0,512` every row is repeated after that many tokens of context
//! (`tg128 @ d512`). A BERT folder gives `embed b<B>` rows in sentences per
//! second.
//!
//! On the CPU alone it adds the memory floor ([`super::memory_floor`]): the
//! weight bytes a decode token reads over the measured read bandwidth, and
//! each `tg` row as a share of it. `--profile` and `--trace` time a few
//! more decode tokens (and, with `--parallel`, decode steps of its most
//! sequences) with a [`gantry::profile::Profiler`] installed.

use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use clap::{Args, ValueEnum};
use gantry::model::bert::{BertModel, EncodedBatch, Encoder, EncoderParams};
use gantry::model::decoder::{Batch, DecoderModel, LogitsFor, Session, SessionParams};
use gantry::profile::Profiler;
use gantry::{Backend, Context, DType, Error, Limits, SplitMix64, TensorId};

use super::common::{BackendArgs, bytes, load_decoder};
use super::memory_floor::{parallel_read_bandwidth, product_weight_bytes};
use super::profile_report::print_profile;

/// Output formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// A Markdown table.
    Md,
    /// One JSON object per row, in an array.
    Json,
}

/// Options of `gantry bench`.
#[derive(Args, Debug)]
pub struct BenchArgs {
    /// The model: a GGUF file, or a BERT folder.
    #[arg(long, short)]
    pub model: PathBuf,
    /// Prompt lengths to time (`pp<N>` rows; 0 for none).
    #[arg(short = 'p', long = "n-prompt", value_delimiter = ',', default_value = "512")]
    pub n_prompt: Vec<usize>,
    /// Tokens to decode (`tg<N>` rows; 0 for none).
    #[arg(short = 'n', long = "n-gen", value_delimiter = ',', default_value = "128")]
    pub n_gen: Vec<usize>,
    /// Repetitions of each test (at least 1).
    #[arg(short = 'r', long, default_value_t = 5, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub repetitions: usize,
    /// Where it computes.
    #[command(flatten)]
    pub devices: BackendArgs,
    /// Sequences decoding together (`tg<N> x<S>` rows), comma-separated: `1,4,16`.
    #[arg(long, value_delimiter = ',')]
    pub parallel: Vec<usize>,
    /// Tokens of context each parallel sequence holds before decoding.
    #[arg(long, default_value_t = 32)]
    pub parallel_prompt: usize,
    /// Batch sizes of a BERT folder's `embed b<B>` rows.
    #[arg(short = 'b', long = "embed-batch", value_delimiter = ',', default_value = "1,32")]
    pub embed_batch: Vec<usize>,
    /// KV cache element type.
    #[arg(long, default_value = "f16")]
    pub kv_type: String,
    /// Tokens of context before each test (`@ d<N>` rows for N > 0), comma-separated: `0,512`.
    #[arg(short = 'd', long = "n-depth", value_delimiter = ',', default_value = "0")]
    pub n_depth: Vec<usize>,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value = "md")]
    pub output: Output,
    /// After the table, time each op of `--profile-tokens` decode tokens: time
    /// per token, share, GB/s and GFLOP/s per op kind (to stderr with `-o json`);
    /// with `--parallel`, then as many steps of the most sequences it names.
    #[arg(long)]
    pub profile: bool,
    /// Write a Chrome trace (Perfetto, chrome://tracing) of the profiled decode
    /// tokens to this file (with `--parallel`, of the profiled parallel steps).
    #[arg(long, value_name = "FILE.json")]
    pub trace: Option<PathBuf>,
    /// Decode tokens `--profile` and `--trace` time (after the first depth's context).
    #[arg(long, default_value_t = 16)]
    pub profile_tokens: usize,
}

/// The memory floor of decoding: weight bytes per token over read bandwidth.
struct MemoryFloor {
    weight_bytes: usize,
    bandwidth: f64,
    threads: usize,
}

impl MemoryFloor {
    /// Tokens per second if decoding only read the weights, at full bandwidth.
    fn tokens_per_s(&self) -> f64 {
        self.bandwidth / self.weight_bytes.max(1) as f64
    }
}

/// One row of the table.
struct Row {
    test: String,
    /// Rate of each repetition (tokens or sentences per second).
    samples: Vec<f64>,
    /// For decode rows on the CPU: the floor's rate, to report the share of.
    floor: Option<f64>,
}

impl Row {
    fn mean(&self) -> f64 {
        self.samples.iter().sum::<f64>() / self.samples.len().max(1) as f64
    }

    fn sd(&self) -> f64 {
        if self.samples.len() < 2 {
            return 0.0;
        }
        let m = self.mean();
        (self.samples.iter().map(|s| (s - m).powi(2)).sum::<f64>() / (self.samples.len() - 1) as f64).sqrt()
    }
}

/// What every row shares.
struct Header {
    model: String,
    size: usize,
    params: usize,
    backend: String,
    threads: usize,
}

/// The most sequences a `--parallel` row decodes together (as `gantry serve`).
const MAX_PARALLEL: usize = gantry::model::decoder::MAX_PARALLEL_SEQUENCES;

/// Runs the benchmark and prints the table.
pub fn run(args: &BenchArgs) -> ExitCode {
    match run_inner(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gantry bench: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run_inner(args: &BenchArgs) -> Result<(), Error> {
    args.devices.refuse_budget("bench")?;
    if let Some(trace) = &args.trace {
        super::f32_file::refuse_inputs_as_output("--trace", trace, &[&args.model])?;
    }
    if let Some(&s) = args.parallel.iter().find(|&&s| s == 0 || s > MAX_PARALLEL) {
        return Err(Error::Model(format!("--parallel {s}: between 1 and {MAX_PARALLEL} sequences")));
    }
    if args.model.is_file()
        && args.parallel.is_empty()
        && args.n_prompt.iter().all(|&p| p == 0)
        && args.n_gen.iter().all(|&n| n == 0)
    {
        return Err(Error::Model("-p 0 -n 0: nothing to measure (give -p or -n a length above 0)".into()));
    }
    let (_registry, backends) = args.devices.open()?;
    let threads = args.devices.threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let backend = backends.iter().map(|b| b.name().to_owned()).collect::<Vec<_>>().join(",");
    let reps = args.repetitions;
    let print = |header: &Header, row: &Row, first: bool| print_row(args.output, header, row, first);
    if args.embed_batch.contains(&0) {
        return Err(Error::Model("-b/--embed-batch 0: a batch holds at least 1 sentence".into()));
    }
    if let Some(&b) = args.embed_batch.iter().find(|&&b| b > Limits::DEFAULT.max_context) {
        // Each batch is a `Vec` of that many sentences.
        return Err(Error::Model(format!("-b/--embed-batch {b}: at most {} sentences", Limits::DEFAULT.max_context)));
    }
    if args.model.is_dir() {
        bench_encoder(args, &backends, reps, threads, backend, print)?;
        if args.output == Output::Json {
            println!("]");
        }
        return Ok(());
    }
    // Before the model is loaded: a length no cache can hold is an error now.
    let n_ctx = context_cells(args)?;
    let mut ctx = Context::new();
    let model = load_decoder(&args.model, &mut ctx, &backends, args.devices.placement(), None)?;
    let header = Header {
        model: describe_model(&model),
        size: model.loaded.bytes(),
        params: model.loaded.iter().filter_map(|(_, t)| ctx.desc(t).ok().map(|d| d.nelements())).sum(),
        backend,
        threads,
    };
    let kv_dtype = DType::from_name(&args.kv_type)
        .filter(|d| gantry::model::decoder::KV_DTYPES.contains(d))
        .ok_or_else(|| Error::Model(format!("--kv-type {:?}: f16, f32 or q8_0", args.kv_type)))?;
    let params = SessionParams { n_ctx, kv_dtype, ..SessionParams::from_env() };
    let mut session = Session::new(&mut ctx, model.hp, model.weights.clone(), &backends, params)?;
    let mut rng = SplitMix64::new(1234);
    let n_vocab = model.hp.n_vocab as u64;
    let mut random_tokens = |n: usize| -> Vec<u32> { (0..n).map(|_| (rng.next_u64() % n_vocab) as u32).collect() };
    let floor = if args.n_gen.iter().any(|&n| n > 0) && all_cpu(&backends) {
        memory_floor(&mut ctx, &mut session, &model, threads)?
    } else {
        None
    };
    let mut first = true;
    let mut floor_shares = Vec::new();
    for &d in &args.n_depth {
        let context = random_tokens(d);
        let at = if d > 0 { format!(" @ d{d}") } else { String::new() };
        for &p in args.n_prompt.iter().filter(|&&p| p > 0) {
            let prompt = random_tokens(p);
            let mut row = Row { test: format!("pp{p}{at}"), samples: Vec::new(), floor: None };
            for rep in 0..=reps {
                fill_context(&mut ctx, &mut session, &context)?;
                let t0 = Instant::now();
                session.eval(&mut ctx, &prompt, LogitsFor::Last)?;
                // The first run is the warm-up: graphs built, memory planned.
                if rep > 0 {
                    row.samples.push(p as f64 / t0.elapsed().as_secs_f64());
                }
            }
            print(&header, &row, std::mem::take(&mut first));
        }
        for &n in args.n_gen.iter().filter(|&&n| n > 0) {
            let tokens = random_tokens(n);
            let mut row = Row {
                test: format!("tg{n}{at}"),
                samples: Vec::new(),
                floor: floor.as_ref().map(|f| f.tokens_per_s()),
            };
            for rep in 0..=reps {
                fill_context(&mut ctx, &mut session, &context)?;
                let t0 = Instant::now();
                for &t in &tokens {
                    session.eval(&mut ctx, &[t], LogitsFor::Last)?;
                }
                if rep > 0 {
                    row.samples.push(n as f64 / t0.elapsed().as_secs_f64());
                }
            }
            print(&header, &row, std::mem::take(&mut first));
            if let Some(f) = row.floor {
                floor_shares.push((row.test.clone(), row.mean() / f));
            }
            if d > 0 {
                continue;
            }
            for &n_seq in args.parallel.iter().filter(|&&s| s > 0) {
                let row = bench_parallel(
                    &mut ctx,
                    &mut session,
                    n_seq,
                    args.parallel_prompt.max(1),
                    n,
                    reps,
                    &mut random_tokens,
                )?;
                print(&header, &row, std::mem::take(&mut first));
            }
        }
    }
    if args.output == Output::Json {
        println!("]");
    }
    if let Some(f) = &floor
        && args.output == Output::Md
    {
        println!();
        println!(
            "memory floor: {} of weights read per decode token / {:.1} GB/s parallel read of that many bytes ({} threads) = {:.1} tok/s",
            bytes(f.weight_bytes),
            f.bandwidth / 1e9,
            f.threads,
            f.tokens_per_s()
        );
        for (test, share) in &floor_shares {
            println!("{test}: {:.0}% of the memory floor", 100.0 * share);
        }
    }
    if args.profile || args.trace.is_some() {
        let depth = random_tokens(args.n_depth.first().copied().unwrap_or(0));
        let tokens = random_tokens(args.profile_tokens.max(1));
        profile_decode(&mut ctx, &mut session, &depth, &tokens, args)?;
        if let Some(n_seq) = parallel_profiled(args) {
            let steps = args.profile_tokens.max(1);
            profile_parallel(
                &mut ctx,
                &mut session,
                n_seq,
                args.parallel_prompt.max(1),
                steps,
                args,
                &mut random_tokens,
            )?;
        }
    }
    Ok(())
}

/// Whether every backend is a CPU (the memory floor is the host's).
fn all_cpu(backends: &[Arc<dyn Backend>]) -> bool {
    backends.iter().all(|b| b.device().device_type() == gantry::DeviceType::Cpu)
}

/// Clears the cache and, for a test at depth, fills it with `context` (untimed).
fn fill_context(ctx: &mut Context, session: &mut Session, context: &[u32]) -> Result<(), Error> {
    session.clear(ctx)?;
    if !context.is_empty() {
        session.eval(ctx, context, LogitsFor::Last)?;
    }
    Ok(())
}

/// Decodes one token to build the decode graph, counts the weight bytes its
/// products read and measures the read bandwidth of that many bytes with
/// `threads` threads.
fn memory_floor(
    ctx: &mut Context,
    session: &mut Session,
    model: &DecoderModel,
    threads: usize,
) -> Result<Option<MemoryFloor>, Error> {
    session.clear(ctx)?;
    session.eval(ctx, &[0], LogitsFor::Last)?;
    let Some(graph) = session.graph() else { return Ok(None) };
    let weights: HashSet<TensorId> = model.loaded.iter().map(|(_, t)| t).collect();
    let weight_bytes = product_weight_bytes(ctx, graph.logits, &weights);
    Ok(parallel_read_bandwidth(threads, weight_bytes).map(|bandwidth| MemoryFloor { weight_bytes, bandwidth, threads }))
}

/// Decodes `tokens` after `depth` tokens of context with a profiler
/// installed, then prints the time per op kind and writes the trace.
fn profile_decode(
    ctx: &mut Context,
    session: &mut Session,
    depth: &[u32],
    tokens: &[u32],
    args: &BenchArgs,
) -> Result<(), Error> {
    fill_context(ctx, session, depth)?;
    // One token unprofiled, so that the decode graph is built and planned.
    session.eval(ctx, &tokens[..1], LogitsFor::Last)?;
    let mut timed = tokens[1..].iter();
    let steps = timed.len();
    // With `--parallel`, the trace is of the parallel steps instead.
    let trace = args.trace.as_deref().filter(|_| parallel_profiled(args).is_none());
    profile_steps(ctx, session, steps, "decode tokens", args, trace, |ctx, session| {
        let t = *timed.next().expect("one token per step");
        session.eval(ctx, &[t], LogitsFor::Last).map(drop)
    })
}

/// Decodes `steps` batches of one token for each of `n_seq` sequences (after
/// `n_prompt` tokens of context each) with a profiler installed: where the
/// time of a `tg<N> x<S>` step goes.
fn profile_parallel(
    ctx: &mut Context,
    session: &mut Session,
    n_seq: usize,
    n_prompt: usize,
    steps: usize,
    args: &BenchArgs,
    random_tokens: &mut dyn FnMut(usize) -> Vec<u32>,
) -> Result<(), Error> {
    session.clear(ctx)?;
    let mut batch = Batch::new();
    for seq in 0..n_seq {
        batch.push_prompt(&random_tokens(n_prompt), seq as u32);
    }
    session.decode(ctx, &batch)?;
    // One step unprofiled, so that the step's graph is built and planned.
    let mut step_batches: Vec<Batch> = (0..=steps)
        .map(|_| {
            let mut b = Batch::new();
            for (seq, t) in random_tokens(n_seq).into_iter().enumerate() {
                b.push(t, seq as u32, true);
            }
            b
        })
        .collect();
    session.decode(ctx, &step_batches.remove(0))?;
    let mut timed = step_batches.iter();
    let unit = format!("steps of {n_seq} sequences");
    profile_steps(ctx, session, steps, &unit, args, args.trace.as_deref(), |ctx, session| {
        session.decode(ctx, timed.next().expect("one batch per step")).map(drop)
    })
}

/// The sequences of the profiled parallel steps: the most `--parallel` asks
/// for, when more than one.
fn parallel_profiled(args: &BenchArgs) -> Option<usize> {
    args.parallel.iter().copied().max().filter(|&s| s > 1)
}

/// Runs `step` `steps` times with a profiler installed, then prints the time
/// per op kind (per step, each step a `unit`) with `--profile`, and writes
/// the trace to `trace`.
fn profile_steps(
    ctx: &mut Context,
    session: &mut Session,
    steps: usize,
    unit: &str,
    args: &BenchArgs,
    trace: Option<&Path>,
    mut step: impl FnMut(&mut Context, &mut Session) -> Result<(), Error>,
) -> Result<(), Error> {
    let profiler = Profiler::new(PROFILE_SLICES_PER_TOKEN);
    session.set_profiler(Some(profiler.clone()));
    let mut slices = Vec::new();
    let mut wall_ns = 0u64;
    let result = (0..steps).try_for_each(|_| {
        let t0 = Instant::now();
        step(ctx, session)?;
        wall_ns += t0.elapsed().as_nanos() as u64;
        profiler.drain(&mut slices);
        Ok::<(), Error>(())
    });
    session.set_profiler(None);
    result?;
    if profiler.dropped() > 0 {
        eprintln!("gantry bench: {} profile slices did not fit and were left out", profiler.dropped());
    }
    if args.profile {
        let mut out: Box<dyn Write> =
            if args.output == Output::Json { Box::new(std::io::stderr()) } else { Box::new(std::io::stdout()) };
        let io = |source| Error::Io { context: "printing the profile".into(), source };
        writeln!(out).map_err(io)?;
        print_profile(&mut *out, &slices, &profiler.processes(), steps, unit, wall_ns).map_err(io)?;
    }
    if let Some(path) = trace {
        gantry::write_chrome_trace(path, &slices, &profiler)?;
        eprintln!("gantry bench: wrote {} trace events to {}", slices.len(), path.display());
    }
    Ok(())
}

/// Slices one profiled decode token may record (drained after each token).
const PROFILE_SLICES_PER_TOKEN: usize = 1 << 16;

/// `n_seq` sequences, each given `n_prompt` tokens of context, then `n_gen`
/// batches of one decode token per sequence.
fn bench_parallel(
    ctx: &mut Context,
    session: &mut Session,
    n_seq: usize,
    n_prompt: usize,
    n_gen: usize,
    reps: usize,
    random_tokens: &mut dyn FnMut(usize) -> Vec<u32>,
) -> Result<Row, Error> {
    let mut row = Row { test: format!("tg{n_gen} x{n_seq}"), samples: Vec::new(), floor: None };
    let mut batch = Batch::new();
    for rep in 0..=reps {
        session.clear(ctx)?;
        batch.clear();
        for seq in 0..n_seq {
            batch.push_prompt(&random_tokens(n_prompt), seq as u32);
        }
        session.decode(ctx, &batch)?;
        let steps: Vec<Vec<u32>> = (0..n_gen).map(|_| random_tokens(n_seq)).collect();
        let t0 = Instant::now();
        for step in &steps {
            batch.clear();
            for (seq, &t) in step.iter().enumerate() {
                batch.push(t, seq as u32, true);
            }
            session.decode(ctx, &batch)?;
        }
        if rep > 0 {
            row.samples.push((n_seq * n_gen) as f64 / t0.elapsed().as_secs_f64());
        }
    }
    Ok(row)
}

/// The KV cells the longest test needs (context, then prompt or decode
/// tokens; or every parallel sequence's pages), each length and the sum
/// checked against [`Limits::max_context`] so that `-p 18446744073709551615`
/// is an error naming the flag, not an overflow.
fn context_cells(args: &BenchArgs) -> Result<usize, Error> {
    let max = Limits::DEFAULT.max_context;
    let flags: [(&str, &[usize]); 6] = [
        ("-p/--n-prompt", &args.n_prompt),
        ("-n/--n-gen", &args.n_gen),
        ("-d/--n-depth", &args.n_depth),
        ("--parallel", &args.parallel),
        ("--parallel-prompt", std::slice::from_ref(&args.parallel_prompt)),
        ("--profile-tokens", std::slice::from_ref(&args.profile_tokens)),
    ];
    for (flag, values) in flags {
        if let Some(&n) = values.iter().find(|&&n| n > max) {
            return Err(Error::Model(format!("{flag} {n}: at most {max} tokens")));
        }
    }
    // Each at most 2^24: the sums and products below fit a `usize`.
    let longest = args.n_prompt.iter().chain(&args.n_gen).copied().max().unwrap_or(0).max(args.profile_tokens + 1);
    let deepest = args.n_depth.iter().copied().max().unwrap_or(0);
    // Each sequence in pages of its own (`KV_PAGE` cells), as the cache hands them out.
    let per_sequence = (args.parallel_prompt + args.n_gen.iter().max().unwrap_or(&0))
        .next_multiple_of(gantry::model::decoder::KV_PAGE);
    let parallel_cells = args.parallel.iter().map(|&s| s * per_sequence).max();
    let n_ctx = (deepest + longest).max(parallel_cells.unwrap_or(0)).max(1).next_multiple_of(256);
    if n_ctx > max {
        return Err(Error::Model(format!(
            "the tests need a KV cache of {n_ctx} tokens (depth + prompt or generation, or the parallel sequences), more than {max}"
        )));
    }
    Ok(n_ctx)
}

/// `embed b<B>` rows: sentences per second for batches of `B` sentences.
fn bench_encoder(
    args: &BenchArgs,
    backends: &[Arc<dyn Backend>],
    reps: usize,
    threads: usize,
    backend: String,
    print: impl Fn(&Header, &Row, bool),
) -> Result<(), Error> {
    let mut ctx = Context::new();
    let model = BertModel::load_with(&args.model, &mut ctx, backends[0].device(), args.devices.mmap())?;
    let header = Header {
        model: format!("bert {}L-{}", model.config.num_hidden_layers, model.config.hidden_size),
        size: model.loaded.bytes(),
        params: model.loaded.iter().filter_map(|(_, t)| ctx.desc(t).ok().map(|d| d.nelements())).sum(),
        backend,
        threads,
    };
    // Sentences of 8 to 16 tokens, as retrieval queries are.
    const SENTENCES: [&str; 4] = [
        "A man is eating food.",
        "A man is eating a piece of bread.",
        "The new movie is awesome, everyone in the theatre loved it.",
        "A monkey is playing drums in the forest.",
    ];
    let mut encoder = Encoder::new(&mut ctx, &model, backends, EncoderParams::from_env())?;
    let mut first = true;
    for &b in &args.embed_batch {
        let texts: Vec<&str> = (0..b).map(|i| SENTENCES[i % SENTENCES.len()]).collect();
        let batch: EncodedBatch = model.tokenize(&texts)?;
        let mut row = Row { test: format!("embed b{b}"), samples: Vec::new(), floor: None };
        for rep in 0..=reps {
            let t0 = Instant::now();
            encoder.embed(&mut ctx, &batch)?;
            if rep > 0 {
                row.samples.push(b as f64 / t0.elapsed().as_secs_f64());
            }
        }
        print(&header, &row, std::mem::take(&mut first));
    }
    Ok(())
}

/// `llama 135M Q4_1`-style: architecture, size label, file type.
fn describe_model(model: &DecoderModel) -> String {
    let label = model.gguf.get_opt::<&str>("general.size_label").ok().flatten().unwrap_or("");
    let quant = model
        .loaded
        .find("blk.0.attn_q.weight")
        .and_then(|_| model.gguf.tensor("blk.0.attn_q.weight").ok())
        .map_or_else(String::new, |t| t.dtype.to_string());
    [model.hp.arch, label, &quant].iter().filter(|s| !s.is_empty()).copied().collect::<Vec<_>>().join(" ")
}

fn human_params(n: usize) -> String {
    if n >= 1_000_000_000 { format!("{:.2} B", n as f64 / 1e9) } else { format!("{:.2} M", n as f64 / 1e6) }
}

fn print_row(output: Output, h: &Header, row: &Row, first: bool) {
    match output {
        Output::Md => {
            if first {
                println!("| model | size | params | backend | threads | test | t/s |");
                println!("| --- | ---: | ---: | --- | ---: | ---: | ---: |");
            }
            println!(
                "| {} | {} | {} | {} | {} | {} | {:.2} ± {:.2} |",
                h.model,
                bytes(h.size),
                human_params(h.params),
                h.backend,
                h.threads,
                row.test,
                row.mean(),
                row.sd()
            );
        }
        Output::Json => {
            let obj = serde_json::json!({
                "model": h.model,
                "size": h.size,
                "params": h.params,
                "backend": h.backend,
                "threads": h.threads,
                "test": row.test,
                "avg_ts": row.mean(),
                "stddev_ts": row.sd(),
                "samples_ts": row.samples,
            });
            let mut obj = obj;
            if let Some(floor) = row.floor {
                obj["floor_ts"] = serde_json::json!(floor);
                obj["floor_share"] = serde_json::json!(row.mean() / floor);
            }
            println!("{}{obj}", if first { "[\n" } else { ",\n" });
        }
    }
}
