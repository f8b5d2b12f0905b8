//! What the subcommands share: choosing backends, threads, remote servers,
//! loading a model over the backends, a progress bar.

use std::path::Path;
use std::sync::Arc;

use gantry::backends::default_registry;
use gantry::model::LoadProgress;
use gantry::model::llama::LlamaModel;
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

/// Loads a llama model for `backends`: with its layers spread over the
/// non-CPU backends when there are several (llama.cpp's layer split), else
/// into the first backend's memory.
pub fn load_llama(
    path: &Path,
    ctx: &mut Context,
    backends: &[Arc<dyn Backend>],
    progress: Option<&mut dyn FnMut(LoadProgress)>,
) -> gantry::Result<LlamaModel> {
    let devices: Vec<&dyn Device> =
        backends.iter().map(|b| b.device()).filter(|d| d.device_type() != DeviceType::Cpu).collect();
    match devices.len() {
        0 | 1 => LlamaModel::load(path, ctx, backends[0].device(), progress),
        _ => LlamaModel::load_across(path, ctx, &devices, progress),
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
