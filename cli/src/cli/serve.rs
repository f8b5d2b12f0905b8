//! `gantry serve`: an OpenAI-compatible HTTP server (see the `gantry-serve`
//! crate): a GGUF decoder for `/v1/chat/completions` and `/v1/completions`,
//! and optionally a BERT folder for `/v1/embeddings`.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use gantry::model::bert::{BertModel, Encoder, EncoderParams};
use gantry::model::chat_template::ChatTemplate;
use gantry::model::decoder::{Session, SessionParams};
use gantry::{Backend, Context, Error};
use gantry_serve::{DecoderSetup, EmbedderSetup, Loaded, ServeOptions};

use super::budget::{FitRequest, load_fitted, reserve_within};
use super::common::{BackendArgs, ContextArgs, WeightPlacement, load_decoder};

/// Options of `gantry serve`.
#[derive(Args, Debug)]
pub struct ServeArgs {
    /// The decoder (a GGUF file) for /v1/chat/completions and /v1/completions.
    #[arg(long, short, required_unless_present = "embedding_model")]
    pub model: Option<PathBuf>,
    /// A BERT folder (config.json, model.safetensors, tokenizer.json) for /v1/embeddings.
    #[arg(long)]
    pub embedding_model: Option<PathBuf>,
    /// The name requests use for the decoder (default: the file name without `.gguf`).
    #[arg(long)]
    pub alias: Option<String>,
    /// A Jinja chat template file, instead of the model's.
    #[arg(long)]
    pub chat_template: Option<PathBuf>,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: IpAddr,
    /// Port to listen on (0: any free port, printed at start).
    #[arg(long, default_value_t = 8080)]
    pub port: u16,
    /// Sequences decoding together (1 to 1024); each holds --ctx-size / --parallel tokens.
    #[arg(long, short = 'P', default_value_t = 4, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=gantry::model::decoder::MAX_PARALLEL_SEQUENCES as u64))]
    pub parallel: usize,
    /// Most tokens per step: every running sequence's next token plus prompt chunks.
    #[arg(long, short = 'b', default_value_t = 512)]
    pub batch_size: usize,
    /// Requests that may wait for a free sequence; more get 503 with Retry-After (at most 65536).
    #[arg(long, default_value_t = 64, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(0..=65536))]
    pub queue: usize,
    /// Reuse the cells of a finished request's longest common prefix with the next
    /// request (a system prompt, an earlier turn): `on` or `off`.
    #[arg(long, default_value = "on", value_parser = ["on", "off"])]
    pub cache_reuse: String,
    /// Largest request body in bytes (at least 1).
    #[arg(long, default_value_t = 4 << 20, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub max_body: usize,
    /// Largest `max_tokens` a request may ask for (and the default).
    #[arg(long, default_value_t = 4096)]
    pub max_tokens: usize,
    /// Seconds a request may take, from arrival to its last token (at most a day).
    #[arg(long, default_value_t = 600, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub timeout: u64,
    /// Seconds a client has to send a request's headers (a kept-alive connection's next
    /// request's) and then its body (at most an hour).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=3_600))]
    pub header_timeout: u64,
    /// Open connections at once (at most 65536).
    #[arg(long, default_value_t = 1024, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=65536))]
    pub max_connections: usize,
    /// Seconds running requests get to finish after SIGINT/SIGTERM (at most an hour).
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(0..=3_600))]
    pub shutdown_grace: u64,
    /// Require `Authorization: Bearer KEY` (default: `GANTRY_API_KEY` when set).
    #[arg(long, env = "GANTRY_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,
    /// Where it computes.
    #[command(flatten)]
    pub devices: BackendArgs,
    /// The KV cache shared by the sequences (default 4096 tokens).
    #[command(flatten)]
    pub context: ContextArgs,
}

/// Serves until SIGINT or SIGTERM.
pub fn run(args: &ServeArgs) -> ExitCode {
    match run_inner(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gantry serve: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run_inner(args: &ServeArgs) -> Result<(), String> {
    let options = ServeOptions {
        addr: SocketAddr::new(args.host, args.port),
        parallel: args.parallel,
        batch_size: args.batch_size,
        queue: args.queue,
        cache_reuse: args.cache_reuse == "on",
        max_body: args.max_body,
        max_tokens: args.max_tokens,
        request_timeout: Duration::from_secs(args.timeout.max(1)),
        header_timeout: Duration::from_secs(args.header_timeout.max(1)),
        max_connections: args.max_connections,
        shutdown_grace: Duration::from_secs(args.shutdown_grace),
        api_key: args.api_key.clone(),
    };
    let n_ctx = args.context.n_ctx(if args.context.ctx_size == 0 { 4096 } else { 0 }).map_err(|e| e.to_string())?;
    if n_ctx / args.parallel.max(1) < 16 {
        return Err(format!(
            "--ctx-size {n_ctx} over --parallel {} leaves fewer than 16 tokens per sequence",
            args.parallel
        ));
    }
    let kv_dtype = args.context.kv_dtype().map_err(|e| e.to_string())?;
    let (_registry, backends) = args.devices.open().map_err(|e| e.to_string())?;
    let budgets = args.devices.budgets(&backends).map_err(|e| e.to_string())?;
    let plan = LoadPlan {
        model: args.model.clone(),
        embedding_model: args.embedding_model.clone(),
        alias: args.alias.clone(),
        chat_template: args.chat_template.clone(),
        n_ctx,
        kv_dtype,
        batch_size: args.batch_size,
        placement: args.devices.placement(),
        budgets,
        backends,
    };
    let on_listen = |addr: SocketAddr| eprintln!("gantry serve: listening on http://{addr} (loading the model)");
    // Printed once /health answers 200, not when the load returns (the
    // routes learn of the model a moment later).
    let on_ready = || eprintln!("gantry serve: ready");
    gantry_serve::serve_until(options, move || plan.load(), on_listen, on_ready, gantry_serve::shutdown_signal())
        .map_err(|e| e.to_string())
}

/// What to load, on the server's loading thread.
struct LoadPlan {
    model: Option<PathBuf>,
    embedding_model: Option<PathBuf>,
    alias: Option<String>,
    chat_template: Option<PathBuf>,
    n_ctx: usize,
    kv_dtype: gantry::DType,
    batch_size: usize,
    placement: WeightPlacement,
    budgets: Option<Vec<Option<usize>>>,
    backends: Vec<Arc<dyn Backend>>,
}

impl LoadPlan {
    fn load(self) -> gantry::Result<Loaded> {
        let decoder = match &self.model {
            Some(path) => Some(self.load_decoder(path)?),
            None => None,
        };
        let embedder = match &self.embedding_model {
            Some(dir) => Some(self.load_embedder(dir)?),
            None => None,
        };
        Ok(Loaded { decoder, embedder })
    }

    fn load_decoder(&self, path: &Path) -> gantry::Result<DecoderSetup> {
        let mut ctx = Context::new();
        let backends = &self.backends;
        let model = match &self.budgets {
            Some(budgets) => {
                let fit = FitRequest { n_ctx: self.n_ctx, kv_dtype: self.kv_dtype, n_batch: self.batch_size };
                load_fitted(path, &mut ctx, backends, budgets, fit, self.placement, None)?
            }
            None => load_decoder(path, &mut ctx, backends, self.placement, None)?,
        };
        let tok = &model.tokenizer;
        let template = match &self.chat_template {
            Some(file) => {
                let piece =
                    |id: Option<u32>| id.and_then(|id| tok.token(id).ok()).map_or_else(String::new, |t| t.text.clone());
                Some(ChatTemplate::from_file(file, &piece(tok.bos()), &piece(tok.eos()))?)
            }
            None => ChatTemplate::from_gguf(&model.gguf, tok)?,
        };
        if template.is_none() {
            eprintln!("gantry serve: the model has no chat template; /v1/chat/completions will refuse requests");
        }
        let params = SessionParams { n_ctx: self.n_ctx, kv_dtype: self.kv_dtype, ..SessionParams::from_env() };
        let mut session = Session::new(&mut ctx, model.hp, model.weights.clone(), backends, params)?;
        // The largest step's memory is planned now: steps allocate nothing later.
        match &self.budgets {
            Some(budgets) => reserve_within(&mut session, &mut ctx, backends, budgets, self.batch_size)?,
            None => {
                session.reserve(&mut ctx, self.batch_size)?;
            }
        }
        let name = self.alias.clone().unwrap_or_else(|| file_stem(path));
        Ok(DecoderSetup { ctx, session, tokenizer: model.tokenizer, template, name })
    }

    fn load_embedder(&self, dir: &Path) -> gantry::Result<EmbedderSetup> {
        let mut ctx = Context::new();
        let first = self.backends.first().ok_or_else(|| Error::Model("no backends to load the model for".into()))?;
        let model = BertModel::load_with(dir, &mut ctx, first.device(), self.placement.mmap)?;
        let encoder = Encoder::new(&mut ctx, &model, &self.backends, EncoderParams::from_env())?;
        Ok(EmbedderSetup { ctx, model, encoder, name: file_stem(dir) })
    }
}

/// A file's or folder's name without `.gguf`.
fn file_stem(path: &Path) -> String {
    let name = path.file_name().map_or_else(|| "model".into(), |n| n.to_string_lossy().into_owned());
    name.strip_suffix(".gguf").map_or(name.clone(), str::to_owned)
}
