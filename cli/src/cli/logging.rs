//! The command line's log output: `tracing` events to stderr, at the level
//! `GANTRY_LOG` (or else `RUST_LOG`) asks for, `warn` by default, with
//! `GANTRY_SCHED_DEBUG` showing the scheduler's placement. Spans report
//! their time when they close.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::format::FmtSpan;

/// Installs the subscriber. A filter that does not parse is reported and
/// replaced by the default.
pub fn init() {
    let spec = ["GANTRY_LOG", "RUST_LOG"]
        .iter()
        .find_map(|name| std::env::var(name).ok().filter(|v| !v.trim().is_empty()))
        .unwrap_or_else(|| "warn".to_owned());
    let mut filter = EnvFilter::try_new(&spec).unwrap_or_else(|e| {
        eprintln!("gantry: ignoring the log filter {spec:?}: {e}");
        EnvFilter::new("warn")
    });
    // The placement the scheduler prints for GANTRY_SCHED_DEBUG=1 or 2 is an
    // info event of its own target: asking for it is asking to see it.
    if std::env::var("GANTRY_SCHED_DEBUG").is_ok_and(|v| v.trim().parse::<u8>().is_ok_and(|n| n > 0))
        && let Ok(directive) = "gantry::sched=info".parse()
    {
        filter = filter.add_directive(directive);
    }
    let ansi = std::io::stderr().is_terminal();
    // Spans (load, reserve, place, alloc, compute, split) are reported when
    // they close, with their time: `GANTRY_LOG=debug` is a timeline.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi)
        .with_span_events(FmtSpan::CLOSE)
        .try_init();
}
