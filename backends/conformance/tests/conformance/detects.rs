//! The suite catches broken backends: a backend that skips an op (its
//! poisoned output stays NaN), one that computes an op slightly wrong, and
//! one that does not support an op (skipped, not failed).

use std::any::Any;
use std::sync::Arc;

use gantry_conformance::{self as conformance, Filter, Mode, Reference, Summary};
use gantry_cpu::{CpuBackend, CpuDevice};
use gantry_engine::{
    Backend, BufferType, ComputeStatus, Context, Device, DeviceCaps, DeviceType, EventId, Graph, MemoryInfo, Result,
    TensorId,
};

#[derive(Clone, Copy)]
enum Fault {
    /// Nodes of this op are not computed.
    Skip(&'static str),
    /// The first element of every node of this op is off by 1000.
    Perturb(&'static str),
    /// The device claims not to support this op.
    Unsupported(&'static str),
}

struct FaultyDevice {
    cpu: CpuDevice,
    fault: Fault,
}

impl Device for FaultyDevice {
    fn name(&self) -> &str {
        "Faulty"
    }
    fn description(&self) -> &str {
        "the CPU with a fault"
    }
    fn memory(&self) -> MemoryInfo {
        self.cpu.memory()
    }
    fn device_type(&self) -> DeviceType {
        DeviceType::Accel
    }
    fn caps(&self) -> DeviceCaps {
        self.cpu.caps()
    }
    fn init_backend(&self, _: Option<&str>) -> Result<Arc<dyn Backend>> {
        unimplemented!("not used by the suite")
    }
    fn buffer_type(&self) -> Arc<dyn BufferType> {
        self.cpu.buffer_type()
    }
    fn supports_op(&self, ctx: &Context, tensor: TensorId) -> bool {
        match self.fault {
            Fault::Unsupported(op) if ctx.desc(tensor).is_ok_and(|d| d.op.name() == op) => false,
            _ => self.cpu.supports_op(ctx, tensor),
        }
    }
    fn supports_buft(&self, buft: &dyn BufferType) -> bool {
        self.cpu.supports_buft(buft)
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

struct Faulty {
    cpu: CpuBackend,
    device: FaultyDevice,
}

impl Faulty {
    fn new(fault: Fault) -> Self {
        Self { cpu: CpuBackend::with_threads(2).unwrap(), device: FaultyDevice { cpu: CpuDevice::new(), fault } }
    }
}

impl Backend for Faulty {
    fn name(&self) -> &str {
        "Faulty"
    }
    fn device(&self) -> &dyn Device {
        &self.device
    }
    fn graph_compute(&self, ctx: &Context, graph: Graph<'_>) -> ComputeStatus {
        let is = |t: TensorId, op: &str| ctx.desc(t).is_ok_and(|d| d.op.name() == op);
        match self.device.fault {
            Fault::Skip(op) => {
                let kept: Vec<TensorId> = graph.nodes().iter().copied().filter(|&t| !is(t, op)).collect();
                self.cpu.compute_graph(ctx, Graph::from_parts(&kept, graph.leafs(), graph.outputs()))
            }
            Fault::Perturb(op) => {
                let status = self.cpu.compute_graph(ctx, graph);
                for &t in graph.nodes().iter().filter(|&&t| is(t, op)) {
                    let mut first = [0u8; 4];
                    ctx.read_tensor_bytes(t, 0, &mut first).unwrap();
                    let v = f32::from_le_bytes(first) + 1000.0;
                    ctx.write_tensor_bytes(t, 0, &v.to_le_bytes()).unwrap();
                }
                status
            }
            Fault::Unsupported(_) => self.cpu.compute_graph(ctx, graph),
        }
    }
    fn event_record(&self, event: EventId) -> Result<()> {
        self.cpu.event_record(event)
    }
    fn event_wait(&self, event: EventId) -> Result<()> {
        self.cpu.event_wait(event)
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

fn run(backend: &dyn Backend, reference: Reference<'_>, ops: &str) -> (Summary, String) {
    let mut log = Vec::new();
    let summary = conformance::run(backend, reference, &Filter::ops(ops), Mode::Test, &mut log);
    (summary, String::from_utf8(log).unwrap())
}

#[test]
fn a_skipped_op_leaves_nan_and_fails() {
    let faulty = Faulty::new(Fault::Skip("ADD"));
    let (s, log) = run(&faulty, Reference::Scalar, "ADD,SUB");
    let adds = log.lines().filter(|l| l.trim_start().starts_with("ADD(")).count();
    assert_eq!(s.failed, adds, "every ADD case fails:\n{log}");
    // A result in place of its input still holds the input; any other holds the poison.
    for line in log.lines().filter(|l| l.contains("ADD(")) {
        assert!(line.contains(if line.contains("inplace") { "FAIL NMSE" } else { "FAIL NaN" }), "{line}");
    }
    assert!(s.passed > 0 && s.skipped == 0, "SUB still passes");
    assert!(log.trim_end().ends_with(&format!("{} passed, {} failed", s.passed, s.failed)));
}

#[test]
fn a_wrong_element_fails_against_either_reference() {
    let faulty = Faulty::new(Fault::Perturb("MUL_MAT"));
    let cpu = CpuBackend::with_threads(1).unwrap();
    for reference in [Reference::Scalar, Reference::Backend(&cpu)] {
        let (s, log) = run(&faulty, reference, "MUL_MAT");
        assert!(s.passed == 0 && s.failed > 100, "{log}");
    }
}

#[test]
fn unsupported_ops_are_skipped_not_failed() {
    let faulty = Faulty::new(Fault::Unsupported("SOFT_MAX"));
    let cpu = CpuBackend::with_threads(1).unwrap();
    let (s, log) = run(&faulty, Reference::Backend(&cpu), "SOFT_MAX,DIAG_MASK_INF");
    assert!(s.skipped > 10 && s.failed == 0 && s.passed > 0, "{log}");
    assert!(log.contains("SOFT_MAX(ne=[16,16,4,1],mask=none,scale=1,max_bias=0): not supported (Faulty)"), "{log}");
}

#[test]
fn the_cpu_agrees_with_itself_as_reference() {
    let a = CpuBackend::with_threads(2).unwrap();
    let b = CpuBackend::with_threads(1).unwrap();
    let (s, log) = run(&a, Reference::Backend(&b), "ROPE,FLASH_ATTN_EXT,GET_ROWS,SET_ROWS");
    assert!(s.failed == 0 && s.skipped == 0 && s.passed > 100, "{log}");
}

#[test]
fn perf_mode_times_and_reports_a_rate() {
    let cpu = CpuBackend::with_threads(2).unwrap();
    let mut log = Vec::new();
    let filter = Filter::ops("ADD").with_name("type=f32");
    let s = conformance::run(&cpu, Reference::Scalar, &filter, Mode::Perf, &mut log);
    let log = String::from_utf8(log).unwrap();
    assert_eq!((s.passed, s.failed), (1, 0), "{log}");
    assert!(log.contains("GB/s") && log.contains("us/run"), "{log}");
}
