//! What the subcommands share: choosing backends, threads, remote servers,
//! loading a model over the backends, a progress bar.

use std::path::Path;
use std::sync::Arc;

use gantry::backends::default_registry;
use gantry::model::decoder::{DecoderModel, LayerCounts};
use gantry::model::{HostTensors, LoadOptions, LoadProgress};
use gantry::{Backend, Context, Device, DeviceType, Registry, SetThreadCount, platform_extension};

/// The registry with every platform compiled in: the remote servers are
/// those of `--remote` (`host:port,...`) when given, else `GANTRY_REMOTE`'s.
pub fn registry(remote: Option<&str>) -> gantry::Result<Registry> {
    #[cfg(feature = "remote")]
    if let Some(list) = remote {
        use gantry::backends::remote::{RemoteConfig, client::parse_servers};
        let config = RemoteConfig::for_servers(parse_servers(list))?;
        return Ok(gantry::backends::registry_with_remote(&config)?);
    }
    #[cfg(not(feature = "remote"))]
    if remote.is_some() {
        return Err(gantry::Error::Engine(gantry::engine::Error::Unsupported(
            "--remote: this gantry was built without the `remote` feature".into(),
        )));
    }
    Ok(default_registry()?)
}

/// Bytes sent and received so far over every remote server of `registry`
/// (`None` without remote devices).
pub fn wire_bytes(registry: &Registry) -> Option<(u64, u64)> {
    #[cfg(feature = "remote")]
    {
        use gantry::backends::remote::WireStats;
        let stats = registry.platforms().iter().find_map(|p| platform_extension::<WireStats>(p.as_ref()))?;
        let b = stats.bytes();
        Some((b.sent, b.received))
    }
    #[cfg(not(feature = "remote"))]
    {
        let _ = registry;
        None
    }
}

/// Loads a decoder model for `backends`: with its layers spread over the
/// non-CPU backends when there are several (llama.cpp's layer split), else
/// into the first backend's memory.
pub fn load_decoder(
    path: &Path,
    ctx: &mut Context,
    backends: &[Arc<dyn Backend>],
    placement: WeightPlacement,
    progress: Option<&mut dyn FnMut(LoadProgress)>,
) -> gantry::Result<DecoderModel> {
    let first = backends.first().ok_or_else(|| gantry::Error::Model("no backends to load the model for".into()))?;
    let devices: Vec<&dyn Device> =
        backends.iter().map(|b| b.device()).filter(|d| d.device_type() != DeviceType::Cpu).collect();
    let options = load_options(progress, placement);
    match devices.len() {
        0 | 1 => DecoderModel::load_with(path, ctx, first.device(), options),
        _ => {
            let counts = LayerCounts::even(DecoderModel::layer_count(path)?, devices.len());
            DecoderModel::load_split_with(path, ctx, &devices, &counts, options)
        }
    }
}

/// The loader's options for a decoder model, as [`DecoderModel::load`] and
/// [`DecoderModel::load_split`] take them (tensors too large for a device's
/// buffers stay in host memory), with the environment's `GANTRY_NO_REPACK`
/// ([`LoadOptions::from_env`]); the file mapped unless `--no-mmap`, the
/// experts `--n-cpu-moe` names in host memory.
pub fn load_options(progress: Option<&mut dyn FnMut(LoadProgress)>, placement: WeightPlacement) -> LoadOptions<'_> {
    LoadOptions {
        progress,
        oversize: Some(gantry::backends::cpu::buffer_type()),
        use_mmap: placement.mmap,
        host_tensors: placement.host_tensors,
        ..LoadOptions::from_env()
    }
}

/// How a decoder's weights are read and where some of them stay, from the
/// command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WeightPlacement {
    /// Map the file (no `--no-mmap`).
    pub mmap: bool,
    /// Weights kept in host memory (`--n-cpu-moe`, `--cpu-moe`).
    pub host_tensors: HostTensors,
}

/// Where a model command computes: the CPU's threads, the backends, remote
/// servers (one set of flags for run, chat, bench, embed and logits).
#[derive(clap::Args, Debug, Clone)]
pub struct BackendArgs {
    /// Threads of the CPU backend (default: every core).
    #[arg(long, short)]
    pub threads: Option<usize>,
    /// Backends in priority order, CPU last: device or platform names, comma-separated (default: all found).
    /// With several non-CPU backends the model's layers are split evenly over them.
    #[arg(long)]
    pub backends: Option<String>,
    /// Remote servers, `host:port,...` (default: `GANTRY_REMOTE`); their devices are `remote0`, `remote1`, ...
    #[arg(long)]
    pub remote: Option<String>,
    /// Memory budgets per device, `DEVICE=SIZE,...` (e.g. `wgpu0=2G,cpu=4G`): each device takes as many
    /// layers as fit (weights, KV cache, compute memory), the rest go to the next; an error names a device
    /// whose budget is too small. `run` and `chat` only.
    #[arg(long)]
    pub budget: Option<String>,
    /// Read the model file into memory instead of mapping it. A mapped file that is truncated or rewritten
    /// while the model runs kills the process (SIGBUS) or changes its weights underneath; with this flag
    /// the file may change freely, at the cost of reading it whole first (and its size in memory).
    #[arg(long)]
    pub no_mmap: bool,
    /// Keep the expert weights of the first N layers of a mixture-of-experts model in host memory, computed by
    /// the CPU, while the rest of the model goes to the GPU (llama.cpp's option of the same name).
    #[arg(long, value_name = "N", conflicts_with = "cpu_moe")]
    pub n_cpu_moe: Option<usize>,
    /// Keep every layer's expert weights in host memory (`--n-cpu-moe` for all layers).
    #[arg(long)]
    pub cpu_moe: bool,
}

impl BackendArgs {
    /// Whether the model file is mapped (no `--no-mmap`).
    pub fn mmap(&self) -> bool {
        !self.no_mmap
    }

    /// How a decoder's weights are loaded: mapped or read, and the experts
    /// kept in host memory.
    pub fn placement(&self) -> WeightPlacement {
        let host_tensors = match (self.cpu_moe, self.n_cpu_moe) {
            (true, _) => HostTensors::ALL_EXPERTS,
            (false, Some(n)) => HostTensors::experts_of_first_layers(n),
            (false, None) => HostTensors::NONE,
        };
        WeightPlacement { mmap: self.mmap(), host_tensors }
    }

    /// The registry and the backends these flags name (see [`backends`]).
    pub fn open(&self) -> gantry::Result<(Registry, Vec<Arc<dyn Backend>>)> {
        backends(self.backends.as_deref(), self.threads, self.remote.as_deref())
    }

    /// The `--budget` per backend of `backends` (`None` without the flag).
    pub fn budgets(&self, backends: &[Arc<dyn Backend>]) -> gantry::Result<Option<Vec<Option<usize>>>> {
        self.budget.as_deref().map(|list| super::budget::budgets_for(list, backends)).transpose()
    }

    /// Refuses `--budget` for a command that does not fit layers (`what`).
    pub fn refuse_budget(&self, what: &str) -> gantry::Result<()> {
        match self.budget {
            Some(_) => Err(gantry::Error::Model(format!("--budget: `gantry {what}` does not take memory budgets"))),
            None => Ok(()),
        }
    }
}

/// The registry (see [`registry`]) and backends in priority order: the
/// `--backends` list (device or platform names, CPU last), or every device
/// found (GPUs first).
pub fn backends(
    list: Option<&str>,
    threads: Option<usize>,
    remote: Option<&str>,
) -> gantry::Result<(Registry, Vec<Arc<dyn Backend>>)> {
    let registry = registry(remote)?;
    let backends = match list {
        Some(list) => registry.backends_by_names(&list.split(',').collect::<Vec<_>>())?,
        None => registry.backends_by_priority()?,
    };
    if let Some(n) = threads {
        set_threads(&registry, &backends, n)?;
    }
    Ok((registry, backends))
}

/// Sets the thread count of every CPU backend through the CPU platform's extension.
pub fn set_threads(registry: &Registry, backends: &[Arc<dyn Backend>], n: usize) -> gantry::Result<()> {
    let ext = registry.platforms().iter().find_map(|p| platform_extension::<SetThreadCount>(p.as_ref()).copied());
    for b in backends.iter().filter(|b| b.device().device_type() == DeviceType::Cpu) {
        if let Some(SetThreadCount(set)) = ext {
            set(b.as_ref(), n)?;
        }
    }
    Ok(())
}

/// Human-readable bytes.
pub fn bytes(n: usize) -> String {
    gantry::sched::describe::fmt_bytes(n)
}

/// The model-load progress bar: bytes placed or copied of the total, drawn
/// on stderr only when it is a terminal (in a log file or a pipe it stays
/// silent; the load's `tracing` event says how it went).
pub fn load_progress_bar() -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::with_draw_target(None, indicatif::ProgressDrawTarget::stderr());
    let style = indicatif::ProgressStyle::with_template("{msg} [{bar:30}] {bytes}/{total_bytes} ({eta})")
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar());
    bar.set_style(style.progress_chars("#>."));
    bar.set_message("loading");
    bar
}

/// Loads a decoder model (llama, gemma3) from a GGUF file for `backends`
/// (see [`load_decoder`]), with the load progress bar.
pub fn load_decoder_with_bar(
    path: &Path,
    ctx: &mut Context,
    backends: &[Arc<dyn Backend>],
    placement: WeightPlacement,
) -> gantry::Result<DecoderModel> {
    with_load_bar(|progress| load_decoder(path, ctx, backends, placement, Some(progress)))
}

/// Runs `load` with the load progress bar drawn from what it reports.
pub fn with_load_bar<T>(load: impl FnOnce(&mut dyn FnMut(LoadProgress)) -> T) -> T {
    let bar = load_progress_bar();
    let mut progress = |p: LoadProgress| {
        bar.set_length(p.bytes_total as u64);
        bar.set_position(p.bytes_done as u64);
    };
    let loaded = load(&mut progress);
    bar.finish_and_clear();
    loaded
}

/// Parses a number in `[LO, HI]`: NaN, infinities and numbers outside
/// are refused (a NaN temperature would sample garbage without a word).
fn in_range<const LO: i32, const HI: i32>(text: &str) -> Result<f32, String> {
    let value: f32 = text.trim().parse().map_err(|e| format!("{e}"))?;
    if value.is_finite() && (LO as f32..=HI as f32).contains(&value) {
        Ok(value)
    } else {
        Err(format!("expected a number from {LO} to {HI}"))
    }
}

/// Parses `--repeat-penalty`: in `(0, 100]`. Zero is refused, as serve
/// refuses it: dividing by it is no penalty, and the sampler would quietly
/// treat it as off.
fn repeat_penalty(text: &str) -> Result<f32, String> {
    match in_range::<0, 100>(text)? {
        0.0 => Err("expected a number above 0, at most 100 (1 = off)".into()),
        value => Ok(value),
    }
}

/// The sampling options llama.cpp users expect (`--temp`, `--top-k`,
/// `--top-p`, `--min-p`, `--repeat-penalty`, `--repeat-last-n`, `--seed`).
#[derive(clap::Args, Debug, Clone)]
pub struct SamplingArgs {
    /// Sampling temperature (0 = greedy; at most 100).
    #[arg(long, default_value_t = 0.8, value_parser = in_range::<0, 100>)]
    pub temp: f32,
    /// Sample among the K most likely tokens (0 = all).
    #[arg(long, default_value_t = 40)]
    pub top_k: usize,
    /// Keep the most likely tokens whose probabilities add up to P (1 = all).
    #[arg(long, default_value_t = 0.95, value_parser = in_range::<0, 1>)]
    pub top_p: f32,
    /// Drop tokens less likely than P times the most likely one (0 = off).
    #[arg(long, default_value_t = 0.05, value_parser = in_range::<0, 1>)]
    pub min_p: f32,
    /// Penalise tokens seen among the last `--repeat-last-n` (1 = off; above 0, at most 100).
    #[arg(long, default_value_t = 1.0, value_parser = repeat_penalty)]
    pub repeat_penalty: f32,
    /// How many of the last tokens the repetition penalty looks at.
    #[arg(long, default_value_t = 64)]
    pub repeat_last_n: usize,
    /// Random seed.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
}

impl SamplingArgs {
    /// The sampler's parameters.
    pub fn params(&self) -> gantry::model::sampler::SamplerParams {
        gantry::model::sampler::SamplerParams {
            temperature: self.temp,
            top_k: self.top_k,
            top_p: self.top_p,
            min_p: self.min_p,
            repeat_penalty: self.repeat_penalty,
            repeat_last_n: self.repeat_last_n,
            seed: self.seed,
        }
    }
}

/// The context options (`--ctx-size`, `--kv-type`).
#[derive(clap::Args, Debug, Clone)]
pub struct ContextArgs {
    /// Tokens the KV cache holds (0 = what the run needs, rounded up to 256).
    #[arg(short = 'c', long = "ctx-size", default_value_t = 0)]
    pub ctx_size: usize,
    /// KV cache element type: f16, f32 or q8_0.
    #[arg(long = "kv-type", default_value = "f16")]
    pub kv_type: String,
}

impl ContextArgs {
    /// The KV cache's dtype.
    pub fn kv_dtype(&self) -> gantry::Result<gantry::DType> {
        gantry::DType::from_name(&self.kv_type)
            .filter(|d| gantry::model::decoder::KV_DTYPES.contains(d))
            .ok_or_else(|| gantry::Error::Model(format!("--kv-type {:?}: expected f16, f32 or q8_0", self.kv_type)))
    }

    /// Cells of the KV cache: `--ctx-size`, or `needed` rounded up to 256;
    /// more than [`gantry::Limits::max_context`] is an error naming the flag
    /// (`needed` comes from `-n` and the prompt, so it saturates, not wraps).
    pub fn n_ctx(&self, needed: usize) -> gantry::Result<usize> {
        let max = gantry::Limits::DEFAULT.max_context;
        let (n, what) = if self.ctx_size > 0 {
            (self.ctx_size, "-c/--ctx-size")
        } else {
            (needed.max(1).checked_next_multiple_of(256).unwrap_or(usize::MAX), "the prompt and -n/--n-predict")
        };
        if n > max {
            return Err(gantry::Error::Model(format!("{what} need a KV cache of {n} tokens, more than {max}")));
        }
        Ok(n)
    }
}
