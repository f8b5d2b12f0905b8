//! What the subcommands share: choosing backends, threads, a progress bar.

use std::io::Write;
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

/// A one-line progress bar on stderr.
pub struct ProgressBar {
    label: &'static str,
    last: usize,
}

impl ProgressBar {
    /// A bar titled `label`.
    pub fn new(label: &'static str) -> Self {
        Self { label, last: usize::MAX }
    }

    /// Draws `done` of `total`.
    pub fn update(&mut self, done: usize, total: usize) {
        let pct = (done * 100).checked_div(total).unwrap_or(100);
        if pct == self.last {
            return;
        }
        self.last = pct;
        let filled = pct * 30 / 100;
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r{} [{}{}] {pct:3}%", self.label, "#".repeat(filled), ".".repeat(30 - filled));
        if done >= total {
            let _ = writeln!(err);
        }
        let _ = err.flush();
    }
}
