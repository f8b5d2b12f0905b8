//! The whole conformance suite on the CPU backend, against the f64 reference:
//! on its own pool, and on a host's job system (every kernel's tasks through
//! `JobSystem::run`, the path a foreign job system takes).

use std::sync::Arc;

use gantry_conformance::{self as conformance, Filter, Mode, Reference};
use gantry_cpu::{CpuBackend, CpuDevice, rayon};
use gantry_testing::HostJobs;

#[test]
fn every_case_passes_on_the_cpu() {
    suite_passes(&CpuBackend::with_threads(2).unwrap());
}

#[test]
fn every_case_passes_on_a_host_job_system() {
    let threads = rayon::ThreadPoolBuilder::new().num_threads(3).build().unwrap();
    let jobs = Arc::new(HostJobs::new(threads));
    suite_passes(&CpuBackend::with_job_system(CpuDevice::new(), jobs.clone()));
    assert!(jobs.tasks_run() > 1000, "the kernels split their work into the host's tasks ({})", jobs.tasks_run());
}

fn suite_passes(cpu: &CpuBackend) {
    let mut log = Vec::new();
    let summary = conformance::run(cpu, Reference::Scalar, &Filter::all(), Mode::Test, &mut log);
    let log = String::from_utf8(log).unwrap();
    let problems: Vec<&str> = log.lines().filter(|l| l.contains("FAIL") || l.contains("not supported (")).collect();
    assert!(problems.is_empty(), "{} problems:\n{}", problems.len(), problems.join("\n"));
    assert_eq!(summary.failed, 0);
    assert_eq!(summary.skipped, 0, "the CPU supports every case of the suite");
    assert!(summary.passed > 1000, "only {} cases ran", summary.passed);
    assert!(log.trim_end().ends_with(&format!("{} passed, 0 failed", summary.passed)));
}
