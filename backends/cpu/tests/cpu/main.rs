//! The CPU backend as the engine sees it: its device, buffers, extensions
//! and kernels under the scheduler, graph plans, fusion, the comparison of
//! backends node by node, the conformance suite, and reads that do not
//! block. One test binary (one link) for all of them.

mod backend;
mod compare_backends;
mod conformance;
mod experts;
mod fusion;
mod graph_plans;
mod linear_attn;
mod sam;
mod seq;
mod tensor_read;
mod vision;

use gantry_conformance::{Filter, Mode, Reference};
use gantry_cpu::CpuBackend;

/// Runs the conformance cases of `ops` (comma-separated) on `threads` CPU
/// threads against the f64 reference: none may fail or be unsupported, and
/// at least `at_least` must run.
fn op_cases_pass(ops: &str, threads: usize, at_least: usize) {
    let cpu = CpuBackend::with_threads(threads).unwrap();
    let mut log = Vec::new();
    let summary = gantry_conformance::run(&cpu, Reference::Scalar, &Filter::ops(ops), Mode::Test, &mut log);
    let log = String::from_utf8(log).unwrap();
    let problems: Vec<&str> = log.lines().filter(|l| l.contains("FAIL") || l.contains("not supported (")).collect();
    assert!(problems.is_empty(), "{} problems:\n{}", problems.len(), problems.join("\n"));
    assert_eq!((summary.failed, summary.skipped), (0, 0));
    assert!(summary.passed >= at_least, "only {} cases ran", summary.passed);
}
