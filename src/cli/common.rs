//! What the subcommands share: choosing backends, threads, a progress bar.

use std::sync::Arc;

use gantry::backends::default_registry;
use gantry::{Backend, DeviceType, Registry, SetThreadCount, platform_extension};

/// The registry with every platform compiled in, and backends in priority
/// order: the `--backends` list (device or platform names, CPU last), or
/// every device found (GPUs first).
pub fn backends(list: Option<&str>, threads: Option<usize>) -> gantry::Result<(Registry, Vec<Arc<dyn Backend>>)> {
    let registry = default_registry()?;
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
