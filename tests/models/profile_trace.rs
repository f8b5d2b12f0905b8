//! The profiler across the scheduler and the CPU backend: every node once
//! per compute with its time, bytes and flops, splits and copies on each
//! backend's track, tasks on the worker threads, and a Chrome trace that
//! parses with a process per backend.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use gantry::backends::cpu::{self, CpuBackend};
use gantry::profile::{Profiler, Slice, SliceKind};
use gantry::sched::{Scheduler, SchedulerParams};
use gantry::testing::backends::TestGpuDevice;
use gantry::testing::fill;
use gantry::{Backend, BufferType, BufferUsage, Context, DType, GraphArena, TensorDesc, TensorId};

/// A projection, norm, scale, softmax, activation, projection and residual,
/// every node named `n<i>`; the input named `x`.
fn build(ctx: &mut Context, width: usize, buft: &Arc<dyn BufferType>) -> (TensorId, TensorId, usize) {
    let x = ctx.tensor(DType::F32, [width, 4]).unwrap();
    ctx.set_name(x, "x").unwrap();
    ctx.set_input(x).unwrap();
    let w1 = ctx.tensor(DType::F32, [width, width]).unwrap();
    let g = ctx.tensor(DType::F32, [width]).unwrap();
    let w2 = ctx.tensor(DType::F32, [width, width]).unwrap();
    let mut nodes = Vec::new();
    let mut h = ctx.mul_mat(w1, x).unwrap();
    nodes.push(h);
    h = ctx.rms_norm(h, 1e-5).unwrap();
    nodes.push(h);
    h = ctx.mul(h, g).unwrap();
    nodes.push(h);
    h = ctx.soft_max_ext(h, None, 0.5, 0.0).unwrap();
    nodes.push(h);
    h = ctx.silu(h).unwrap();
    nodes.push(h);
    h = ctx.mul_mat(w2, h).unwrap();
    nodes.push(h);
    let out = ctx.add(h, x).unwrap();
    nodes.push(out);
    for (i, &n) in nodes.iter().enumerate() {
        ctx.set_name(n, &format!("n{i}")).unwrap();
    }
    ctx.set_output(out).unwrap();
    ctx.alloc_tensors(&[w1, g, w2], buft, BufferUsage::Weights).unwrap();
    for (i, w) in [w1, g, w2].into_iter().enumerate() {
        fill(ctx, w, 10 + i as u64, 0.5).unwrap();
    }
    (x, out, nodes.len())
}

fn compute(sched: &mut Scheduler, ctx: &mut Context, x: TensorId, out: TensorId) {
    let arena = GraphArena::new();
    let graph = ctx.build_graph(&arena, &[out]).unwrap();
    sched.alloc_graph(ctx, graph).unwrap();
    fill(ctx, x, 3, 1.0).unwrap();
    sched.graph_compute(ctx, graph).unwrap();
}

fn node_counts(slices: &[Slice]) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for s in slices.iter().filter(|s| s.kind == SliceKind::Node) {
        *counts.entry(s.name.as_str().to_owned()).or_default() += 1;
    }
    counts
}

#[test]
fn every_cpu_node_is_recorded_once_per_compute() {
    // Unfused every node has its slice; fused, the RMS_NORM+MUL pair (n1, n2)
    // is one slice named after its first node and the group's kind.
    for fusion in [false, true] {
        every_node_once(fusion);
    }
}

fn every_node_once(fusion: bool) {
    let mut ctx = Context::new();
    let (x, out, n_nodes) = build(&mut ctx, 64, &cpu::buffer_type());
    let cpu: Arc<dyn Backend> = Arc::new(CpuBackend::with_threads(2).unwrap());
    let params = SchedulerParams { graph_optimize: fusion, ..SchedulerParams::default() };
    let mut sched = Scheduler::new(&[cpu], params).unwrap();
    let profiler = Profiler::new(1024);
    sched.set_profiler(Some(profiler.clone()));
    // The first compute runs the graph directly, the second from its plan.
    for run in 0..2 {
        compute(&mut sched, &mut ctx, x, out);
        let mut slices = Vec::new();
        profiler.drain(&mut slices);
        let counts = node_counts(&slices);
        let expected: BTreeMap<String, usize> =
            (0..n_nodes).filter(|&i| !(fusion && i == 2)).map(|i| (format!("n{i}"), 1)).collect();
        assert_eq!(counts, expected, "run {run}, fusion {fusion}");
        let norm = slices.iter().find(|s| s.kind == SliceKind::Node && s.name.as_str() == "n1").unwrap();
        assert_eq!(norm.op, if fusion { "RMS_NORM+MUL" } else { "RMS_NORM" }, "run {run}");
        assert!(slices.iter().all(|s| s.end_ns >= s.start_ns));
        let products: Vec<&Slice> = slices.iter().filter(|s| s.op == "MUL_MAT" && s.kind == SliceKind::Node).collect();
        assert!(products.iter().all(|s| s.bytes == (64 * 64 + 64 * 4 + 64 * 4) * 4 && s.flops == 2 * 64 * 64 * 4));
        let split = slices.iter().find(|s| s.kind == SliceKind::Split).expect("the split");
        // The split's slice holds every node's.
        for s in slices.iter().filter(|s| s.kind == SliceKind::Node) {
            assert!(s.start_ns >= split.start_ns && s.end_ns <= split.end_ns, "{s:?} outside {split:?}");
        }
    }
    assert_eq!(profiler.dropped(), 0);
    // Off again: nothing more is recorded.
    sched.set_profiler(None);
    compute(&mut sched, &mut ctx, x, out);
    let mut slices = Vec::new();
    profiler.drain(&mut slices);
    assert!(slices.is_empty(), "{} slices after the profiler was removed", slices.len());
}

#[test]
fn a_product_split_over_threads_records_its_tasks() {
    let mut ctx = Context::new();
    let (x, out, _) = build(&mut ctx, 512, &cpu::buffer_type());
    let cpu: Arc<dyn Backend> = Arc::new(CpuBackend::with_threads(2).unwrap());
    let mut sched = Scheduler::new(&[cpu], SchedulerParams::default()).unwrap();
    let profiler = Profiler::new(4096);
    sched.set_profiler(Some(profiler.clone()));
    compute(&mut sched, &mut ctx, x, out);
    let mut slices = Vec::new();
    profiler.drain(&mut slices);
    let tasks: Vec<&Slice> = slices.iter().filter(|s| s.kind == SliceKind::Task).collect();
    assert!(tasks.len() >= 2, "a 512x512 product over two threads splits: {} tasks", tasks.len());
    for t in &tasks {
        let node = slices.iter().find(|s| s.kind == SliceKind::Node && s.name == t.name).unwrap();
        assert!(t.start_ns >= node.start_ns && t.end_ns <= node.end_ns, "task {t:?} outside its node {node:?}");
    }
}

#[test]
fn the_trace_has_a_process_per_backend_and_parses() {
    // Softmax stays on the CPU: GPU, CPU, GPU splits with copies between.
    let gpu_dev = TestGpuDevice::new("TestGPU", Arc::new(|d: &TensorDesc| d.op.name() != "SOFT_MAX"));
    let gpu = gpu_dev.backend();
    let mut ctx = Context::new();
    let (x, out, _) = build(&mut ctx, 64, &gpu.device().buffer_type());
    let cpu: Arc<dyn Backend> = Arc::new(CpuBackend::with_threads(1).unwrap());
    let mut sched = Scheduler::new(&[gpu, cpu], SchedulerParams::default()).unwrap();
    let profiler = Profiler::new(1024);
    sched.set_profiler(Some(profiler.clone()));
    compute(&mut sched, &mut ctx, x, out);
    let mut slices = Vec::new();
    profiler.drain(&mut slices);
    let splits: Vec<u16> = slices.iter().filter(|s| s.kind == SliceKind::Split).map(|s| s.process).collect();
    assert_eq!(splits.len(), 3);
    assert_eq!(node_counts(&slices).keys().map(String::as_str).collect::<Vec<_>>(), ["n3"], "the CPU's one node");
    assert!(slices.iter().any(|s| s.kind == SliceKind::Copy && s.bytes > 0));

    let path =
        tempfile::Builder::new().prefix("gantry-profile-trace-").suffix(".json").tempfile().unwrap().into_temp_path();
    gantry::write_chrome_trace(&path, &slices, &profiler).unwrap();
    let trace: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let events = trace["traceEvents"].as_array().unwrap();
    let processes: BTreeMap<u64, &str> = events
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "process_name")
        .map(|e| (e["pid"].as_u64().unwrap(), e["args"]["name"].as_str().unwrap()))
        .collect();
    assert_eq!(processes.values().copied().collect::<BTreeSet<_>>(), BTreeSet::from(["CPU", "TestGPU"]));
    let complete: Vec<&serde_json::Value> = events.iter().filter(|e| e["ph"] == "X").collect();
    assert_eq!(complete.len(), slices.len());
    for pid in processes.keys() {
        assert!(complete.iter().any(|e| e["pid"].as_u64() == Some(*pid)), "no slice on process {pid}");
    }
    assert!(complete.iter().all(|e| e["dur"].as_f64().unwrap() >= 0.0 && e["ts"].as_f64().is_some()));
    // Every track has a name.
    let named: BTreeSet<(u64, u64)> = events
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "thread_name")
        .map(|e| (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap()))
        .collect();
    for e in complete {
        assert!(named.contains(&(e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap())));
    }
}
