//! `gantry embed`: sentence embeddings from a BERT checkpoint folder, and
//! their cosine matrix.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use clap::Args;
use gantry::model::bert::{BertModel, Encoder, EncoderParams};
use gantry::{Context, Error};

use super::common::BackendArgs;

/// Options of `gantry embed`.
#[derive(Args, Debug)]
pub struct EmbedArgs {
    /// The model folder (`config.json`, `model.safetensors`, `tokenizer.json`).
    #[arg(long, short)]
    pub model: PathBuf,
    /// A text to embed (repeat for more).
    #[arg(long = "text", required = true)]
    pub texts: Vec<String>,
    /// Write the embeddings here: little-endian f32, `[n_texts][dim]`.
    #[arg(long, short)]
    pub out: Option<PathBuf>,
    /// Where it computes.
    #[command(flatten)]
    pub devices: BackendArgs,
}

/// Embeds the texts in one batch and prints their cosine matrix.
pub fn run(args: &EmbedArgs) -> ExitCode {
    match run_inner(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gantry embed: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run_inner(args: &EmbedArgs) -> Result<(), Error> {
    if let Some(out) = &args.out {
        super::f32_file::refuse_inputs_as_output("--out", out, &[&args.model])?;
    }
    args.devices.refuse_budget("embed")?;
    let (_registry, backends) = args.devices.open()?;
    let mut ctx = Context::new();
    let model = BertModel::load_with(&args.model, &mut ctx, backends[0].device(), args.devices.mmap())?;
    let texts: Vec<&str> = args.texts.iter().map(String::as_str).collect();
    let batch = model.tokenize(&texts)?;
    let mut encoder = Encoder::new(&mut ctx, &model, &backends, EncoderParams::from_env())?;
    let t0 = Instant::now();
    let embeddings = encoder.embed(&mut ctx, &batch)?;
    let elapsed = t0.elapsed().as_secs_f64();
    let dim = model.config.hidden_size;
    let rows: Vec<&[f32]> = embeddings.chunks(dim).collect();
    // Unit vectors unless the folder's modules.json has no Normalize.
    let dot = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f32>();
    let cosine = |a: &[f32], b: &[f32]| dot(a, b) / (dot(a, a) * dot(b, b)).sqrt().max(f32::MIN_POSITIVE);
    println!("cosine similarity ({} texts, {dim} dimensions):", rows.len());
    for (i, a) in rows.iter().enumerate() {
        let line: Vec<String> = rows.iter().map(|b| format!("{:7.4}", cosine(a, b))).collect();
        println!("  [{i}] {}  {:?}", line.join(" "), texts[i]);
    }
    eprintln!(
        "{} texts in {:.1} ms ({:.1} sentences/s, one batch)",
        rows.len(),
        elapsed * 1e3,
        rows.len() as f64 / elapsed
    );
    if let Some(out) = &args.out {
        super::f32_file::write_f32_file(out, &embeddings, &[&args.model])?;
        eprintln!("wrote {} x {dim} f32 to {}", rows.len(), out.display());
    }
    Ok(())
}
