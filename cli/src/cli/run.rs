//! `gantry run`: generate text with a GGUF model.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use clap::Args;
use gantry::model::decoder::{LogitsFor, Session, SessionParams};
use gantry::model::sampler::Sampler;
use gantry::{Context, Error};

use super::broken_pipe::to_stdout;
use super::budget::{FitRequest, load_fitted, reserve_within};
use super::common::{BackendArgs, ContextArgs, SamplingArgs, bytes, load_decoder, load_progress_bar, wire_bytes};

/// Options of `gantry run`.
#[derive(Args, Debug)]
pub struct RunArgs {
    /// The model (a GGUF decoder: llama, gemma3).
    #[arg(long, short)]
    pub model: PathBuf,
    /// The prompt.
    #[arg(long, short)]
    pub prompt: String,
    /// Tokens to generate.
    #[arg(short = 'n', long = "n-predict", default_value_t = 64)]
    pub n_predict: usize,
    /// Where it computes.
    #[command(flatten)]
    pub devices: BackendArgs,
    /// How tokens are chosen.
    #[command(flatten)]
    pub sampling: SamplingArgs,
    /// The KV cache.
    #[command(flatten)]
    pub context: ContextArgs,
    /// Print the placement and timings only, not the text (for benchmarks).
    #[arg(long)]
    pub quiet: bool,
    /// Keep generating past end-of-generation tokens (for benchmarks: always `-n` tokens).
    #[arg(long)]
    pub ignore_eos: bool,
    /// Constrain the continuation to JSON valid under this JSON schema file (through llguidance;
    /// the text after the prompt is then one JSON value).
    #[arg(long)]
    pub json_schema: Option<PathBuf>,
    /// Before timing, run the prompt and one decode step once and clear the KV cache, so
    /// that the timings leave out building the graphs and planning memory (as llama.cpp's
    /// warm-up does).
    #[arg(long)]
    pub warmup: bool,
}

/// The constraint of `--json-schema FILE` for `tokenizer`.
fn json_constraint(
    path: &std::path::Path,
    tokenizer: &gantry::model::tokenizer::Tokenizer,
) -> Result<gantry::model::grammar::Constraint, Error> {
    // A schema of 16 MiB is past any real one; a FIFO or /dev/zero is refused.
    let bytes = gantry::engine::read_small_file(path, 16 << 20)
        .map_err(|source| Error::Io { context: format!("reading --json-schema {}", path.display()), source })?;
    let text = String::from_utf8(bytes)
        .map_err(|e| Error::Model(format!("--json-schema {}: not UTF-8: {e}", path.display())))?;
    let schema: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| Error::Model(format!("--json-schema {}: not JSON: {e}", path.display())))?;
    let vocab = gantry::model::grammar::GrammarVocab::new(std::sync::Arc::new(tokenizer.clone()))?;
    gantry::model::grammar::Constraint::json_schema(&vocab, &schema)
        .map_err(|e| Error::Model(format!("--json-schema {}: {}", path.display(), e.detail())))
}

/// Runs the model on the prompt and streams the continuation.
pub fn run(args: &RunArgs) -> ExitCode {
    match run_inner(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let (status, report) = super::broken_pipe::exit_status(&e);
            if report {
                eprintln!("gantry run: {e}");
            }
            status
        }
    }
}

fn run_inner(args: &RunArgs) -> Result<(), Error> {
    let (registry, backends) = args.devices.open()?;
    let mut ctx = Context::new();
    let bar = load_progress_bar();
    let mut progress = |p: gantry::model::LoadProgress| {
        bar.set_length(p.bytes_total as u64);
        bar.set_position(p.bytes_done as u64);
    };
    let load_wire = wire_bytes(&registry);
    let load_start = Instant::now();
    let budgets = args.devices.budgets(&backends)?;
    // The prompt's bytes bound its tokens (and the KV cache the fit counts).
    let fit = FitRequest {
        n_ctx: args.context.n_ctx(args.prompt.len().saturating_add(2).saturating_add(args.n_predict))?,
        kv_dtype: args.context.kv_dtype()?,
        n_batch: args.prompt.len() + 2,
    };
    let model = match &budgets {
        Some(budgets) => {
            load_fitted(&args.model, &mut ctx, &backends, budgets, fit, args.devices.placement(), Some(&mut progress))
        }
        None => load_decoder(&args.model, &mut ctx, &backends, args.devices.placement(), Some(&mut progress)),
    };
    bar.finish_and_clear();
    let model = model?;
    let load_time = load_start.elapsed();
    let load_wire = match (load_wire, wire_bytes(&registry)) {
        (Some((s0, r0)), Some((s1, r1))) => format!(", {} on the wire", bytes((s1 - s0 + r1 - r0) as usize)),
        _ => String::new(),
    };
    let tokens = model.tokenizer.encode(&args.prompt, true, true)?;
    if tokens.is_empty() {
        return Err(Error::Model("the prompt has no tokens".into()));
    }
    let n_ctx = args.context.n_ctx(tokens.len().saturating_add(args.n_predict))?;
    let params = SessionParams { n_ctx, kv_dtype: args.context.kv_dtype()?, ..SessionParams::from_env() };
    let mut session = Session::new(&mut ctx, model.hp, model.weights.clone(), &backends, params)?;
    if let Some(budgets) = &budgets {
        reserve_within(&mut session, &mut ctx, &backends, budgets, tokens.len())?;
    }
    let mut sampler = Sampler::new(args.sampling.params());
    for &t in &tokens {
        sampler.accept(t);
    }
    let mut constraint = match &args.json_schema {
        Some(path) => Some(json_constraint(path, &model.tokenizer)?),
        None => None,
    };
    let mut masked: Vec<f32> = Vec::new();
    // The next token: sampled, among what the schema allows when there is one.
    let mut choose = |logits: &[f32]| -> Result<u32, Error> {
        let Some(c) = constraint.as_mut() else {
            let token = sampler.sample(logits);
            sampler.accept(token);
            return Ok(token);
        };
        masked.clear();
        masked.extend_from_slice(logits);
        // A schema that asks more than llguidance follows fails partway.
        let failed = |e: Error| {
            let path = args.json_schema.as_deref().unwrap_or(std::path::Path::new("")).display();
            Error::Model(format!("--json-schema {path}: the reply's grammar failed: {}", e.detail()))
        };
        c.mask(&mut masked).map_err(failed)?;
        let token = sampler.sample(&masked);
        sampler.accept(token);
        c.accept(token).map_err(failed)?;
        Ok(token)
    };

    if args.warmup {
        session.eval(&mut ctx, &tokens, LogitsFor::Last)?;
        session.eval(&mut ctx, &tokens[..1], LogitsFor::Last)?;
        session.clear(&ctx)?;
    }
    let t0 = Instant::now();
    let logits = session.eval(&mut ctx, &tokens, LogitsFor::Last)?;
    let mut next = choose(logits)?;
    let prompt_time = t0.elapsed();
    let names: Vec<&str> = backends.iter().map(|b| b.name()).collect();
    eprintln!(
        "backends: {}; {} splits; weights {} ({}, loaded in {:.0} ms{load_wire}); KV cache {}",
        names.join(", "),
        session.scheduler().n_splits(),
        bytes(model.loaded.bytes()),
        if model.loaded.is_mapped() { "mapped" } else { "copied" },
        load_time.as_secs_f64() * 1e3,
        bytes(session.kv_bytes(&ctx))
    );

    let mut out = std::io::stdout().lock();
    let mut decoder = model.tokenizer.stream_decoder(false);
    if !args.quiet {
        to_stdout(write!(out, "{}", args.prompt))?;
    }
    let wire_before = wire_bytes(&registry);
    let t1 = Instant::now();
    let mut generated = 0;
    let mut context_full = false;
    while generated < args.n_predict && (args.ignore_eos || !model.tokenizer.is_eog(next)) {
        if !args.quiet {
            let piece = decoder.push(next)?;
            to_stdout(write!(out, "{piece}"))?;
            to_stdout(out.flush())?;
        }
        generated += 1;
        if generated == args.n_predict {
            break;
        }
        if session.n_past() >= session.n_ctx() {
            context_full = true;
            break;
        }
        let logits = session.eval(&mut ctx, &[next], LogitsFor::Last)?;
        next = choose(logits)?;
    }
    let decode_time = t1.elapsed();
    let wire_after = wire_bytes(&registry);
    if !args.quiet {
        to_stdout(writeln!(out, "{}", decoder.finish()))?;
    }
    if context_full {
        // Fewer tokens than -n asked for, and not because the model ended:
        // say so, rather than leave a short reply unexplained.
        eprintln!(
            "stopped after {generated} of {} tokens: the context of {} tokens is full (raise -c)",
            args.n_predict,
            session.n_ctx()
        );
    }
    if let Some(c) = &constraint
        && !c.is_complete()
    {
        // As serve's finish_reason "length": the reply is a prefix of a valid value, not one.
        eprintln!(
            "the reply is incomplete: it stopped after {generated} tokens, before the --json-schema value was complete \
             (raise -n{})",
            if context_full { " or -c" } else { "" }
        );
    }
    // The first generated token comes from the prompt's step; each later one
    // from a decode step of its own.
    let decode_steps = generated.saturating_sub(1);
    eprintln!(
        "prompt: {} tokens in {:.1} ms ({:.1} tok/s)",
        tokens.len(),
        prompt_time.as_secs_f64() * 1e3,
        tokens.len() as f64 / prompt_time.as_secs_f64()
    );
    if decode_steps == 0 {
        eprintln!("decode: no decode steps ({generated} token(s) generated, from the prompt's step)");
        return Ok(());
    }
    eprintln!(
        "decode: {} tokens in {:.1} ms ({:.1} tok/s)",
        decode_steps,
        decode_time.as_secs_f64() * 1e3,
        decode_steps as f64 / decode_time.as_secs_f64()
    );
    if let (Some((s0, r0)), Some((s1, r1))) = (wire_before, wire_after) {
        let steps = decode_steps as u64;
        eprintln!(
            "wire: {} per decode token ({} sent, {} received)",
            bytes(((s1 - s0 + r1 - r0) / steps) as usize),
            bytes(((s1 - s0) / steps) as usize),
            bytes(((r1 - r0) / steps) as usize)
        );
    }
    Ok(())
}
