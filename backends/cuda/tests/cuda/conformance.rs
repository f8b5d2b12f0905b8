//! The whole conformance suite on the first CUDA device, against the CPU
//! backend with ggml's NMSE thresholds: every case the device supports must
//! pass. Skips, saying why, on a machine without a CUDA device (CI).
//! `GANTRY_CONFORMANCE_OPS=MUL_MAT,ROPE` runs some ops only.

use gantry_conformance::{self as conformance, Filter, Mode, Reference};
use gantry_cpu::CpuBackend;
use gantry_cuda::CudaPlatform;
use gantry_engine::Device;

#[test]
fn cuda_conformance_against_the_cpu() {
    let platform = CudaPlatform::new();
    let Some(dev) = platform.cuda_devices().first() else {
        eprintln!("skipped: no CUDA device ({})", platform.unavailable().unwrap_or("none found"));
        return;
    };
    let backend = dev.init_backend(None).unwrap();
    let cpu = CpuBackend::with_threads(std::thread::available_parallelism().map_or(2, |n| n.get())).unwrap();
    let filter = match std::env::var("GANTRY_CONFORMANCE_OPS") {
        Ok(ops) => Filter::ops(&ops),
        Err(_) => Filter::all(),
    };
    let mut log = Vec::new();
    let summary = conformance::run(backend.as_ref(), Reference::Backend(&cpu), &filter, Mode::Test, &mut log);
    let log = String::from_utf8(log).unwrap();
    eprintln!("{log}");
    let failures: Vec<&str> = log.lines().filter(|l| l.contains("FAIL")).collect();
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
    assert_eq!(summary.failed, 0);
    assert!(summary.passed > 0, "no case ran on {}", backend.name());
}
