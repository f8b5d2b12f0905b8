//! `gantry bench`: llama-bench's table for Gantry. Rows `pp<N>` (a prompt of
//! N tokens), `tg<N>` (N tokens decoded one at a time), and with
//! `--parallel` `tg<N> x<S>` (S sequences decoding together, one token each
//! per batch; the rate is all sequences' tokens together). Each row is the
//! mean ± standard deviation of `-r` repetitions after a warm-up. A BERT
//! folder gives `embed b<B>` rows in sentences per second.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use clap::{Args, ValueEnum};
use gantry::model::bert::{BertModel, EncodedBatch, Encoder, EncoderParams};
use gantry::model::decoder::{Batch, DecoderModel, LogitsFor, Session, SessionParams};
use gantry::{Backend, Context, DType, Error, SplitMix64};

use super::common::{BackendArgs, bytes, load_decoder};

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
    /// Repetitions of each test.
    #[arg(short = 'r', long, default_value_t = 5)]
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
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value = "md")]
    pub output: Output,
}

/// One row of the table.
struct Row {
    test: String,
    /// Rate of each repetition (tokens or sentences per second).
    samples: Vec<f64>,
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
    let (_registry, backends) = args.devices.open()?;
    let threads = args.devices.threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let backend = backends.iter().map(|b| b.name().to_owned()).collect::<Vec<_>>().join(",");
    let reps = args.repetitions.max(1);
    let print = |header: &Header, row: &Row, first: bool| print_row(args.output, header, row, first);
    if args.model.is_dir() {
        bench_encoder(&args.model, &backends, &args.embed_batch, reps, threads, backend, print)?;
        if args.output == Output::Json {
            println!("]");
        }
        return Ok(());
    }
    let mut ctx = Context::new();
    let model = load_decoder(&args.model, &mut ctx, &backends, None)?;
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
    let longest = args.n_prompt.iter().chain(&args.n_gen).copied().max().unwrap_or(0);
    let parallel_cells =
        args.parallel.iter().map(|&s| s * (args.parallel_prompt + args.n_gen.iter().max().unwrap_or(&0))).max();
    let n_ctx = longest.max(parallel_cells.unwrap_or(0)).max(1).next_multiple_of(256);
    let params = SessionParams { n_ctx, kv_dtype, ..SessionParams::default() };
    let mut session = Session::new(&mut ctx, model.hp, model.weights.clone(), &backends, params)?;
    let mut rng = SplitMix64::new(1234);
    let n_vocab = model.hp.n_vocab as u64;
    let mut random_tokens = |n: usize| -> Vec<u32> { (0..n).map(|_| (rng.next_u64() % n_vocab) as u32).collect() };
    let mut first = true;
    for &p in args.n_prompt.iter().filter(|&&p| p > 0) {
        let prompt = random_tokens(p);
        let mut row = Row { test: format!("pp{p}"), samples: Vec::new() };
        for rep in 0..=reps {
            session.clear(&ctx)?;
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
        let mut row = Row { test: format!("tg{n}"), samples: Vec::new() };
        for rep in 0..=reps {
            session.clear(&ctx)?;
            let t0 = Instant::now();
            for &t in &tokens {
                session.eval(&mut ctx, &[t], LogitsFor::Last)?;
            }
            if rep > 0 {
                row.samples.push(n as f64 / t0.elapsed().as_secs_f64());
            }
        }
        print(&header, &row, std::mem::take(&mut first));
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
    if args.output == Output::Json {
        println!("]");
    }
    Ok(())
}

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
    let mut row = Row { test: format!("tg{n_gen} x{n_seq}"), samples: Vec::new() };
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

/// `embed b<B>` rows: sentences per second for batches of `B` sentences.
fn bench_encoder(
    dir: &Path,
    backends: &[Arc<dyn Backend>],
    batch_sizes: &[usize],
    reps: usize,
    threads: usize,
    backend: String,
    print: impl Fn(&Header, &Row, bool),
) -> Result<(), Error> {
    let mut ctx = Context::new();
    let model = BertModel::load(dir, &mut ctx, backends[0].device())?;
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
    let mut encoder = Encoder::new(&mut ctx, &model, backends, EncoderParams::default())?;
    let mut first = true;
    for &b in batch_sizes.iter().filter(|&&b| b > 0) {
        let texts: Vec<&str> = (0..b).map(|i| SENTENCES[i % SENTENCES.len()]).collect();
        let batch: EncodedBatch = model.tokenize(&texts)?;
        let mut row = Row { test: format!("embed b{b}"), samples: Vec::new() };
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
            println!("{}{obj}", if first { "[\n" } else { ",\n" });
        }
    }
}
