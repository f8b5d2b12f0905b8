//! `gantry logits`: every position's logits for a prompt, to a file.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use gantry::model::decoder::{LogitsFor, Session, SessionParams};
use gantry::{Context, Error};

use super::common::{BackendArgs, load_decoder};

/// Options of `gantry logits`.
#[derive(Args, Debug)]
pub struct LogitsArgs {
    /// The model (a llama-family GGUF file).
    #[arg(long, short)]
    pub model: PathBuf,
    /// The prompt.
    #[arg(long, short)]
    pub prompt: String,
    /// Where to write the logits: little-endian f32, `[n_tokens][n_vocab]`.
    #[arg(long, short)]
    pub out: PathBuf,
    /// Where it computes.
    #[command(flatten)]
    pub devices: BackendArgs,
    /// Add the BOS token as the model's metadata says (default: no, as the reference logits).
    #[arg(long)]
    pub add_bos: bool,
}

/// Computes the logits of every prompt position and writes them.
pub fn run(args: &LogitsArgs) -> ExitCode {
    match run_inner(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gantry logits: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The token ids of `prompt` and the logits of every position, `[n][n_vocab]`.
pub fn prompt_logits(
    model_path: &std::path::Path,
    prompt: &str,
    add_bos: bool,
    devices: &BackendArgs,
) -> Result<(Vec<u32>, Vec<f32>), Error> {
    devices.refuse_budget("logits")?;
    let (_registry, backends) = devices.open()?;
    let mut ctx = Context::new();
    let model = load_decoder(model_path, &mut ctx, &backends, devices.placement(), None)?;
    let tokens = model.tokenizer.encode(prompt, add_bos, true)?;
    if tokens.is_empty() {
        return Err(Error::Model("the prompt has no tokens".into()));
    }
    let params = SessionParams { n_ctx: tokens.len().next_multiple_of(256), ..SessionParams::from_env() };
    let mut session = Session::new(&mut ctx, model.hp, model.weights.clone(), &backends, params)?;
    let all = session.eval(&mut ctx, &tokens, LogitsFor::All)?;
    let mut logits = Vec::new();
    logits.try_reserve_exact(all.len()).map_err(|_| {
        Error::Model(format!(
            "no memory for a copy of the logits of {} positions ({} bytes)",
            tokens.len(),
            all.len().saturating_mul(4)
        ))
    })?;
    logits.extend_from_slice(all);
    Ok((tokens, logits))
}

fn run_inner(args: &LogitsArgs) -> Result<(), Error> {
    super::f32_file::refuse_inputs_as_output("--out", &args.out, &[&args.model])?;
    let (tokens, logits) = prompt_logits(&args.model, &args.prompt, args.add_bos, &args.devices)?;
    super::f32_file::write_f32_file(&args.out, &logits, &[&args.model])?;
    println!("{}", tokens.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(" "));
    eprintln!("wrote {} positions x {} logits to {}", tokens.len(), logits.len() / tokens.len(), args.out.display());
    Ok(())
}
