//! `gantry chat`: talk to an instruct model. Each turn renders the whole
//! conversation with the model's chat template; the tokens the KV cache
//! already holds (the common prefix with the last turn) are not run again.
//! Ctrl-C stops a reply; Ctrl-D or `/exit` leaves.

use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use clap::Args;
use gantry::model::chat_template::{ChatMessage, ChatTemplate};
use gantry::model::decoder::{LogitsFor, Session, SessionParams};
use gantry::model::sampler::Sampler;
use gantry::{Context, Error};

/// The longest line of standard input a turn may be (16 MiB: past any context).
const MAX_LINE_BYTES: u64 = 16 << 20;

use super::broken_pipe::to_stdout;
use super::budget::{FitRequest, load_fitted, reserve_within};
use super::common::{BackendArgs, ContextArgs, SamplingArgs, load_decoder_with_bar, with_load_bar};

/// Tokens of one turn the memory budgets are reserved for (a longer turn
/// plans more compute memory, within the budgets or an error).
const CHAT_BATCH: usize = 512;

/// Options of `gantry chat`.
#[derive(Args, Debug)]
pub struct ChatArgs {
    /// The model (a GGUF file with `tokenizer.chat_template`, or see `--chat-template`).
    #[arg(long, short)]
    pub model: PathBuf,
    /// A system prompt.
    #[arg(long)]
    pub system: Option<String>,
    /// A Jinja chat template file, instead of the model's.
    #[arg(long)]
    pub chat_template: Option<PathBuf>,
    /// Most tokens per reply.
    #[arg(short = 'n', long = "n-predict", default_value_t = 512)]
    pub n_predict: usize,
    /// Where it computes.
    #[command(flatten)]
    pub devices: BackendArgs,
    /// How tokens are chosen.
    #[command(flatten)]
    pub sampling: SamplingArgs,
    /// The KV cache (default 4096 tokens).
    #[command(flatten)]
    pub context: ContextArgs,
}

/// Set by Ctrl-C; the reply being generated stops at the next token.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// Ctrl-C sets [`INTERRUPTED`] instead of ending the process (a handler
/// that cannot be installed, e.g. a second one, leaves Ctrl-C as it was).
fn catch_interrupts() {
    let _ = ctrlc::set_handler(|| INTERRUPTED.store(true, Ordering::SeqCst));
}

/// Runs the conversation on standard input and output.
pub fn run(args: &ChatArgs) -> ExitCode {
    match run_inner(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let (status, report) = super::broken_pipe::exit_status(&e);
            if report {
                eprintln!("gantry chat: {e}");
            }
            status
        }
    }
}

fn run_inner(args: &ChatArgs) -> Result<(), Error> {
    let (_registry, backends) = args.devices.open()?;
    let mut ctx = Context::new();
    let n_ctx = args.context.n_ctx(if args.context.ctx_size == 0 { 4096 } else { 0 })?;
    let kv_dtype = args.context.kv_dtype()?;
    let budgets = args.devices.budgets(&backends)?;
    let model = match &budgets {
        Some(budgets) => {
            let fit = FitRequest { n_ctx, kv_dtype, n_batch: CHAT_BATCH };
            with_load_bar(|progress| {
                load_fitted(&args.model, &mut ctx, &backends, budgets, fit, args.devices.placement(), Some(progress))
            })?
        }
        None => load_decoder_with_bar(&args.model, &mut ctx, &backends, args.devices.placement())?,
    };
    let tok = &model.tokenizer;
    let template = match &args.chat_template {
        Some(path) => {
            let piece =
                |id: Option<u32>| id.and_then(|id| tok.token(id).ok()).map_or_else(String::new, |t| t.text.clone());
            ChatTemplate::from_file(path, &piece(tok.bos()), &piece(tok.eos()))?
        }
        None => ChatTemplate::from_gguf(&model.gguf, tok)?.ok_or_else(|| Error::InvalidModel {
            file: model.gguf.source().to_owned(),
            reason: "tokenizer.chat_template is missing; pass --chat-template FILE".into(),
        })?,
    };
    let bos_text = tok.bos().and_then(|id| tok.token(id).ok()).map(|t| t.text.clone());
    let params = SessionParams { n_ctx, kv_dtype, ..SessionParams::from_env() };
    let mut session = Session::new(&mut ctx, model.hp, model.weights.clone(), &backends, params)?;
    if let Some(budgets) = &budgets {
        reserve_within(&mut session, &mut ctx, &backends, budgets, CHAT_BATCH)?;
    }
    let mut sampler = Sampler::new(args.sampling.params());
    catch_interrupts();

    let mut messages = Vec::new();
    if let Some(system) = &args.system {
        messages.push(ChatMessage::new("system", system));
    }
    // The tokens the KV cache holds, in order.
    let mut cached: Vec<u32> = Vec::new();
    let stdin = std::io::stdin();
    let mut out = std::io::stdout().lock();
    eprintln!(
        "gantry chat: {} ({} layers); Ctrl-C stops a reply, Ctrl-D or /exit leaves",
        model.hp.arch, model.hp.n_layer
    );
    loop {
        to_stdout(write!(out, "\n> "))?;
        to_stdout(out.flush())?;
        let mut line = String::new();
        // A line is read up to a bound: `chat < /dev/zero` must not take the machine's memory.
        let read = std::io::Read::take(stdin.lock(), MAX_LINE_BYTES + 1)
            .read_line(&mut line)
            .map_err(|source| Error::Io { context: "reading standard input".into(), source })?;
        if read == 0 {
            break;
        }
        if read as u64 > MAX_LINE_BYTES {
            return Err(Error::Model(format!(
                "a line of standard input longer than {MAX_LINE_BYTES} bytes (a message must fit in the context)"
            )));
        }
        let line = line.trim_end_matches(['\n', '\r']);
        if line == "/exit" {
            break;
        }
        if line.trim().is_empty() {
            continue;
        }
        messages.push(ChatMessage::new("user", line));
        let prompt = template.render(&messages, true)?;
        let add_bos = !bos_text.as_deref().is_some_and(|b| !b.is_empty() && prompt.starts_with(b));
        let tokens = tok.encode(&prompt, add_bos, true)?;
        if tokens.is_empty() {
            return Err(Error::Model(
                "the chat template rendered an empty prompt for this conversation (nothing to run)".into(),
            ));
        }
        // Only what differs from the cache is run.
        let keep = cached.iter().zip(&tokens).take_while(|(a, b)| a == b).count().min(tokens.len() - 1);
        session.truncate_seq(0, keep);
        cached.truncate(keep);
        if tokens.len() + 1 > session.n_ctx() {
            return Err(Error::Model(format!(
                "the conversation ({} tokens) no longer fits --ctx-size {}",
                tokens.len(),
                session.n_ctx()
            )));
        }
        let t0 = Instant::now();
        let new = &tokens[keep..];
        for &t in new {
            sampler.accept(t);
        }
        let mut next = sampler.sample(session.eval(&mut ctx, new, LogitsFor::Last)?);
        cached.extend_from_slice(new);
        let prompt_time = t0.elapsed();
        INTERRUPTED.store(false, Ordering::SeqCst);
        let mut decoder = tok.stream_decoder(false);
        let mut reply_tokens = Vec::new();
        let t1 = Instant::now();
        let mut stopped = false;
        while !tok.is_eog(next) && reply_tokens.len() < args.n_predict && session.n_used() < session.n_ctx() {
            if INTERRUPTED.swap(false, Ordering::SeqCst) {
                stopped = true;
                break;
            }
            to_stdout(write!(out, "{}", decoder.push(next)?))?;
            to_stdout(out.flush())?;
            reply_tokens.push(next);
            sampler.accept(next);
            let logits = session.eval(&mut ctx, &[next], LogitsFor::Last)?;
            cached.push(next);
            next = sampler.sample(logits);
        }
        to_stdout(writeln!(out, "{}", decoder.finish()))?;
        let reply = tok.decode_string(&reply_tokens, false, false)?;
        messages.push(ChatMessage::new("assistant", reply.trim()));
        eprintln!(
            "[{} prompt tokens ({keep} reused from the cache) in {:.0} ms; {} reply tokens at {:.1} tok/s{}]",
            tokens.len(),
            prompt_time.as_secs_f64() * 1e3,
            reply_tokens.len(),
            reply_tokens.len() as f64 / t1.elapsed().as_secs_f64().max(1e-9),
            if stopped { "; stopped" } else { "" }
        );
    }
    Ok(())
}
