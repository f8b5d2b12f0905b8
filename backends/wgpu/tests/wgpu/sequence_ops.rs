//! Issue 36's last nine ops on wgpu (SOLVE_TRI, the linear-attention and
//! delta-rule recurrences, SAM's windows and relative positions): every
//! conformance case of them runs on the device (none skipped) and agrees
//! with the CPU.

use gantry_conformance::{self as conformance, Filter, Mode, Reference};
use gantry_cpu::CpuBackend;
use gantry_engine::Device;

const OPS: &str =
    "SOLVE_TRI,RWKV_WKV6,GATED_LINEAR_ATTN,RWKV_WKV7,GATED_DELTA_NET,WIN_PART,WIN_UNPART,GET_REL_POS,ADD_REL_POS";

#[test]
fn sequence_and_sam_ops_pass_every_conformance_case_with_none_skipped() {
    let dev = device_or_skip!();
    let backend = dev.init_backend(None).unwrap();
    let cpu = CpuBackend::with_threads(2).unwrap();
    let mut log = Vec::new();
    let summary = conformance::run(backend.as_ref(), Reference::Backend(&cpu), &Filter::ops(OPS), Mode::Test, &mut log);
    let log = String::from_utf8(log).unwrap();
    eprintln!("{log}");
    assert_eq!(summary.failed, 0, "failures:\n{log}");
    assert_eq!(summary.skipped, 0, "skipped cases:\n{log}");
    // Every op has cases (SOLVE_TRI, RWKV_WKV7 and GATED_DELTA_NET several).
    for op in OPS.split(',') {
        assert!(log.contains(op), "no {op} case ran:\n{log}");
    }
    assert!(summary.passed >= 9, "{} cases passed", summary.passed);
}
