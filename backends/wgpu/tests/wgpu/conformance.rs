//! The whole conformance suite on the first wgpu device (lavapipe in CI),
//! against the CPU backend: every case the device supports must pass.

use gantry_conformance::{self as conformance, Filter, Mode, Reference};
use gantry_cpu::CpuBackend;
use gantry_engine::Device;
use gantry_wgpu::WgpuPlatform;

#[test]
fn wgpu_conformance_against_the_cpu() {
    let platform = WgpuPlatform::new();
    let Some(dev) = platform.wgpu_devices().first() else {
        eprintln!("skipped: no wgpu adapter on this machine ({:?})", platform.skipped());
        return;
    };
    let backend = dev.init_backend(None).unwrap();
    let cpu = CpuBackend::with_threads(2).unwrap();
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
