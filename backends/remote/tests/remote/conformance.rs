//! The whole conformance suite on a remote CPU device served over loopback
//! (QUIC, mutual TLS, certificates made now), against the local CPU: every
//! case must pass as it does on the CPU itself, each op going through the
//! server's checks and rebuild.

use std::time::Duration;

use gantry_conformance::{self as conformance, Filter, Mode, Reference};
use gantry_cpu::CpuBackend;
use gantry_engine::Device;
use gantry_remote::server::WeightCache;
use gantry_remote::testing::loopback;

#[test]
fn remote_conformance_against_the_cpu() {
    let pki = loopback::test_pki().unwrap();
    let server = loopback::cpu_server(&pki, 1, WeightCache::new()).unwrap();
    let platform = loopback::connect(&pki, &[server.local_addr().to_string()], Duration::from_secs(20)).unwrap();
    let device = &platform.remote_devices()[0];
    let backend = device.init_backend(None).unwrap();
    let cpu = CpuBackend::with_threads(1).unwrap();
    let filter = match std::env::var("GANTRY_CONFORMANCE_OPS") {
        Ok(ops) => Filter::ops(&ops),
        Err(_) => Filter::all(),
    };
    let started = std::time::Instant::now();
    let mut log = Vec::new();
    let summary = conformance::run(backend.as_ref(), Reference::Backend(&cpu), &filter, Mode::Test, &mut log);
    let log = String::from_utf8(log).unwrap();
    let failures: Vec<&str> = log.lines().filter(|l| l.contains("FAIL")).collect();
    eprintln!(
        "{} passed, {} skipped in {:.1} s; {} bytes on the wire",
        summary.passed,
        summary.skipped,
        started.elapsed().as_secs_f64(),
        platform.wire_bytes().sent + platform.wire_bytes().received
    );
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
    assert_eq!(summary.failed, 0);
    // The server's CPU supports every case, as the CPU does: nothing is skipped.
    assert!(summary.passed > 1000 && summary.skipped == 0, "{log}");
}
