//! The whole conformance suite on the CPU backend, against the f64 reference.

use gantry_backends::conformance::{self, Filter, Mode, Reference};
use gantry_backends::cpu::CpuBackend;

#[test]
fn every_case_passes_on_the_cpu() {
    let cpu = CpuBackend::with_threads(2).unwrap();
    let mut log = Vec::new();
    let summary = conformance::run(&cpu, Reference::Scalar, &Filter::all(), Mode::Test, &mut log);
    let log = String::from_utf8(log).unwrap();
    let problems: Vec<&str> = log.lines().filter(|l| l.contains("FAIL") || l.contains("not supported (")).collect();
    assert!(problems.is_empty(), "{} problems:\n{}", problems.len(), problems.join("\n"));
    assert_eq!(summary.failed, 0);
    assert_eq!(summary.skipped, 0, "the CPU supports every case of the suite");
    assert!(summary.passed > 1000, "only {} cases ran", summary.passed);
    assert!(log.trim_end().ends_with(&format!("{} passed, 0 failed", summary.passed)));
}
