//! Gantry's CPU backend against ggml's, case by case (run it through
//! `scripts/ggml_parity/run.sh`, which builds ggml and the driver):
//!
//!   ggml_parity DRIVER DIR [OPS] [THREADS]
//!
//! DRIVER is the built `scripts/ggml_parity/driver.c`, DIR an empty folder
//! for the case files, OPS a comma-separated op filter (empty: every op),
//! THREADS ggml's threads (2). Prints per op the cases compared, the worst
//! normalized mean squared error and ggml's tolerance; exits 1 if a case is
//! over it or failed to run.

use std::path::PathBuf;
use std::process::ExitCode;

use gantry_conformance::Filter;
use gantry_conformance::ggml::{Driver, parity};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(path), Some(dir)) = (args.first(), args.get(1)) else {
        eprintln!("usage: ggml_parity DRIVER DIR [OPS] [THREADS]");
        return ExitCode::from(2);
    };
    let filter = args.get(2).map_or_else(Filter::all, |ops| Filter::ops(ops));
    let threads = args.get(3).and_then(|t| t.parse().ok()).unwrap_or(2);
    let driver = Driver { path: PathBuf::from(path), dir: PathBuf::from(dir), threads };
    match parity(&driver, &filter, &mut std::io::stdout()) {
        Ok(p) if p.ok() => ExitCode::SUCCESS,
        Ok(_) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("ggml_parity: {e}");
            ExitCode::from(2)
        }
    }
}
