//! `gantry test-ops`: the conformance suite from the command line.
//!
//! The CPU backend is checked against the f64 scalar reference; any other
//! backend against the CPU backend. Ends with the line `N passed, N failed`.

use std::process::ExitCode;

use clap::{Args, ValueEnum};
use gantry::backends::cpu;
use gantry_conformance::{self as conformance, Filter, Mode, Reference};

use super::common::registry;

/// Options of `gantry test-ops`.
#[derive(Args, Debug)]
pub struct TestOpsArgs {
    /// Device to test (case-insensitive, as `gantry` lists them).
    #[arg(long, default_value = "CPU")]
    backend: String,
    /// Only these ops (ggml names, comma-separated: `ADD,MUL_MAT`).
    #[arg(long)]
    op: Option<String>,
    /// Only cases whose name contains this text.
    #[arg(long)]
    name: Option<String>,
    /// Check results, or time the perf cases.
    #[arg(long, value_enum, default_value = "test")]
    mode: ModeArg,
    /// Threads of the CPU backend(s); default: every core.
    #[arg(long)]
    threads: Option<usize>,
    /// Remote servers, `host:port,...` (default: `GANTRY_REMOTE`): test `--backend remote0`.
    #[arg(long)]
    remote: Option<String>,
}

/// `--mode`.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum ModeArg {
    /// Compare with the reference.
    Test,
    /// Time larger cases.
    Perf,
}

/// Runs the suite; the exit code is failure when a case failed or the
/// backend could not be started.
pub fn run(args: &TestOpsArgs) -> ExitCode {
    match run_inner(args) {
        Ok(summary) if summary.failed == 0 => ExitCode::SUCCESS,
        Ok(_) => ExitCode::FAILURE,
        Err(e) => {
            let (status, report) = super::broken_pipe::exit_status(&e);
            if report {
                eprintln!("gantry test-ops: {e}");
            }
            status
        }
    }
}

fn run_inner(args: &TestOpsArgs) -> gantry::Result<conformance::Summary> {
    let registry = registry(args.remote.as_deref())?;
    let params = args.threads.map(|n| format!("threads={n}"));
    let backend = registry.init_by_name(&args.backend, params.as_deref())?;
    if args.op.as_deref().is_some_and(|op| op.split(',').all(|o| o.trim().is_empty())) {
        return Err(gantry::Error::Model("--op names no op (leave it out to run every case)".into()));
    }
    let mut filter = args.op.as_deref().map_or_else(Filter::all, Filter::ops);
    let unknown = filter.unknown_ops();
    if !unknown.is_empty() {
        let mut known: Vec<&str> = conformance::cases().iter().map(|c| c.op).collect();
        known.sort_unstable();
        known.dedup();
        return Err(gantry::Error::Model(format!(
            "--op {}: no case of the suite tests it (ggml's op names: {})",
            unknown.join(","),
            known.join(", ")
        )));
    }
    if let Some(name) = &args.name {
        filter = filter.with_name(name);
    }
    let mode = match args.mode {
        ModeArg::Test => Mode::Test,
        ModeArg::Perf => Mode::Perf,
    };
    let is_cpu = backend.as_any().downcast_ref::<cpu::CpuBackend>().is_some();
    let cpu_reference;
    let reference = if is_cpu {
        Reference::Scalar
    } else {
        cpu_reference = registry.init_by_name("CPU", params.as_deref())?;
        Reference::Backend(cpu_reference.as_ref())
    };
    // The report is the command's output: one that could not be written is an error.
    let mut out = super::broken_pipe::CheckedWriter::new(std::io::stdout().lock());
    let summary = conformance::run(backend.as_ref(), reference, &filter, mode, &mut out);
    out.finish()?;
    if summary.passed + summary.failed + summary.skipped == 0 {
        // Nothing checked is not a pass.
        return Err(gantry::Error::Model("no case of the suite matches --op and --name".into()));
    }
    Ok(summary)
}
