//! The scheduler across a CPU and test GPUs (CPU kernels over private
//! memory): placement, copies, pipelining, pins, limits and errors, with
//! every result equal to a CPU-only run.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use gantry::backends::cpu::{self, CpuBackend};
use gantry::sched::{Scheduler, SchedulerParams};
use gantry::testing::backends::{SupportFn, TestGpuDevice};
use gantry::testing::{fill, max_abs_diff};
use gantry::{Backend, BufferType, BufferUsage, Context, DType, DeviceType, GraphArena, Op, TensorDesc, TensorId};

fn cpu_backend() -> Arc<dyn Backend> {
    Arc::new(CpuBackend::with_threads(1).unwrap())
}

fn all_ops() -> SupportFn {
    Arc::new(|_: &TensorDesc| true)
}

fn all_but(op: &'static str) -> SupportFn {
    Arc::new(move |d: &TensorDesc| d.op.name() != op)
}

/// A small network: a projection, a norm, a softmax, an activation, a second
/// projection and a residual.
struct Net {
    x: TensorId,
    out: TensorId,
    weights: Vec<TensorId>,
    softmax: TensorId,
}

fn build_net(ctx: &mut Context) -> Net {
    let x = ctx.tensor(DType::F32, [16, 5]).unwrap();
    ctx.set_name(x, "x").unwrap();
    ctx.set_input(x).unwrap();
    let w1 = ctx.tensor(DType::F32, [16, 32]).unwrap();
    let norm = ctx.tensor(DType::F32, [32]).unwrap();
    let w2 = ctx.tensor(DType::F32, [32, 16]).unwrap();
    for (t, n) in [(w1, "w1"), (norm, "norm"), (w2, "w2")] {
        ctx.set_name(t, n).unwrap();
    }
    let h = ctx.mul_mat(w1, x).unwrap();
    let h = ctx.rms_norm(h, 1e-5).unwrap();
    let h = ctx.mul(h, norm).unwrap();
    let softmax = ctx.soft_max_ext(h, None, 0.5, 0.0).unwrap();
    ctx.set_name(softmax, "softmax").unwrap();
    let a = ctx.silu(softmax).unwrap();
    let o = ctx.mul_mat(w2, a).unwrap();
    let out = ctx.add(o, x).unwrap();
    ctx.set_name(out, "out").unwrap();
    ctx.set_output(out).unwrap();
    Net { x, out, weights: vec![w1, norm, w2], softmax }
}

/// Builds the net with its weights in `buft` (seeded), ready to run.
fn setup(buft: &Arc<dyn BufferType>) -> (Context, Net) {
    let mut ctx = Context::new();
    let net = build_net(&mut ctx);
    ctx.alloc_tensors(&net.weights, buft, BufferUsage::Weights).unwrap();
    for (i, &w) in net.weights.iter().enumerate() {
        fill(&mut ctx, w, 100 + i as u64, 0.5).unwrap();
    }
    (ctx, net)
}

/// The CPU-only result for input seed `seed`.
fn reference(seed: u64) -> Vec<f32> {
    let (mut ctx, net) = setup(&cpu::buffer_type());
    let mut sched = Scheduler::new(&[cpu_backend()], SchedulerParams::default()).unwrap();
    let arena = GraphArena::new();
    let graph = ctx.build_graph(&arena, &[net.out]).unwrap();
    sched.alloc_graph(&mut ctx, graph).unwrap();
    fill(&mut ctx, net.x, seed, 1.0).unwrap();
    sched.graph_compute(&mut ctx, graph).unwrap();
    ctx.read_f32(net.out).unwrap()
}

fn run(sched: &mut Scheduler, ctx: &mut Context, net: &Net, seed: u64) -> Vec<f32> {
    let arena = GraphArena::new();
    let graph = ctx.build_graph(&arena, &[net.out]).unwrap();
    sched.alloc_graph(ctx, graph).unwrap();
    fill(ctx, net.x, seed, 1.0).unwrap();
    sched.graph_compute(ctx, graph).unwrap();
    ctx.read_f32(net.out).unwrap()
}

#[test]
fn gpu_cpu_gpu_splits_with_exactly_the_copies_needed() {
    let (gpu_dev, mut ctx, net, mut sched) = gpu_and_cpu(SchedulerParams::default());
    let out = run(&mut sched, &mut ctx, &net, 7);
    assert_eq!(out, reference(7));
    let backends: Vec<&str> = sched.splits().iter().map(|s| sched.backends()[s.backend.get()].name()).collect();
    assert_eq!(backends, ["TestGPU", "CPU", "TestGPU"]);
    // GPU <- x (a graph input lives on the CPU), CPU <- the norm output, GPU <- the softmax.
    let inputs: Vec<usize> = (0..3).map(|i| sched.split_inputs(i).len()).collect();
    assert_eq!(inputs, [1, 1, 1]);
    assert_eq!(sched.split_inputs(0), [net.x]);
    assert_eq!(sched.split_inputs(2), [net.softmax]);
    assert!(gpu_dev.computed.load(Ordering::Relaxed) >= 5);
    assert_eq!(sched.tensor_backend(net.softmax).unwrap().name(), "CPU");
}

/// The net with its weights on a test GPU that runs everything but
/// SOFT_MAX, under a scheduler over that GPU and the CPU (three splits:
/// TestGPU, CPU, TestGPU).
fn gpu_and_cpu(params: SchedulerParams) -> (TestGpuDevice, Context, Net, Scheduler) {
    let gpu_dev = TestGpuDevice::new("TestGPU", all_but("SOFT_MAX"));
    let gpu = gpu_dev.backend();
    let (ctx, net) = setup(&gpu_dev_buft(&gpu));
    let sched = Scheduler::new(&[gpu, cpu_backend()], params).unwrap();
    (gpu_dev, ctx, net, sched)
}

fn gpu_dev_buft(gpu: &Arc<dyn Backend>) -> Arc<dyn BufferType> {
    gpu.device().buffer_type()
}

#[test]
fn inputs_live_on_the_cpu_and_are_copied_each_run() {
    let gpu_dev = TestGpuDevice::new("TestGPU", all_ops());
    let gpu = gpu_dev.backend();
    let (mut ctx, net) = setup(&gpu_dev_buft(&gpu));
    let mut sched = Scheduler::new(&[gpu.clone(), cpu_backend()], SchedulerParams::default()).unwrap();
    for seed in [1, 2, 3] {
        let out = run(&mut sched, &mut ctx, &net, seed);
        assert_eq!(out, reference(seed), "seed {seed}");
    }
    assert_eq!(sched.tensor_backend(net.x).unwrap().name(), "CPU");
    assert_eq!(sched.n_splits(), 1, "everything else on the GPU");
    assert_eq!(sched.split_inputs(0), [net.x]);
}

#[test]
fn pins_are_honoured() {
    let gpu_dev = TestGpuDevice::new("TestGPU", all_ops());
    let gpu = gpu_dev.backend();
    let cpu = cpu_backend();
    let (mut ctx, net) = setup(&gpu_dev_buft(&gpu));
    let mut sched = Scheduler::new(&[gpu.clone(), cpu.clone()], SchedulerParams::default()).unwrap();
    sched.set_tensor_backend(net.softmax, &cpu).unwrap();
    let out = run(&mut sched, &mut ctx, &net, 11);
    assert_eq!(out, reference(11));
    assert_eq!(sched.tensor_backend(net.softmax).unwrap().name(), "CPU");
    assert_eq!(sched.n_splits(), 3);
    // Unlike ggml, a pin survives `reset` (README, "Differences from ggml")...
    sched.reset(&mut ctx);
    assert_eq!(sched.tensor_backend(net.softmax).unwrap().name(), "CPU", "a pin outlives reset");
    assert_eq!(run(&mut sched, &mut ctx, &net, 12), reference(12));
    assert_eq!(sched.n_splits(), 3, "and still places the node");
    // ... until `clear_pins`.
    sched.clear_pins();
    sched.reset(&mut ctx);
    assert!(sched.tensor_backend(net.softmax).is_none(), "no pin and nothing placed after clear_pins + reset");
}

#[test]
fn the_same_graph_keeps_its_placement_until_the_context_changes() {
    let (_gpu_dev, mut ctx, net, mut sched) = gpu_and_cpu(SchedulerParams::default());
    for seed in [1, 2, 3] {
        sched.reset(&mut ctx);
        assert_eq!(run(&mut sched, &mut ctx, &net, seed), reference(seed), "seed {seed}");
    }
    assert_eq!((sched.placements_computed(), sched.plans_computed()), (1, 1), "placed and planned once");
    let splits = sched.splits().to_vec();

    // Any change to the context places the graph again (same result, same plan).
    ctx.set_name(net.softmax, "softmax").unwrap();
    assert_eq!(run(&mut sched, &mut ctx, &net, 4), reference(4));
    assert_eq!((sched.placements_computed(), sched.plans_computed()), (2, 1));
    assert_eq!(sched.splits(), splits);

    // A pin: the softmax cannot run on the GPU, so pin the SiLU after it to the CPU.
    let silu = ctx.desc(net.out).unwrap().srcs[0].and_then(|o| ctx.desc(o).unwrap().srcs[1]).unwrap();
    assert_eq!(ctx.desc(silu).unwrap().op.name(), "SILU");
    sched.set_tensor_backend(silu, &cpu_backend_of(&sched)).unwrap();
    assert_eq!(run(&mut sched, &mut ctx, &net, 5), reference(5));
    assert_eq!(sched.placements_computed(), 3);
    assert_eq!(sched.tensor_backend(silu).unwrap().name(), "CPU");

    // Weights moved to host memory: the nodes reading them move to the CPU.
    let cpu_buft = cpu::buffer_type();
    net.weights.iter().for_each(|&w| ctx.unplace(w));
    let moved = ctx.alloc_tensors(&net.weights, &cpu_buft, BufferUsage::Weights).unwrap();
    for (i, &w) in net.weights.iter().enumerate() {
        fill(&mut ctx, w, 100 + i as u64, 0.5).unwrap();
    }
    assert_eq!(run(&mut sched, &mut ctx, &net, 6), reference(6));
    assert_eq!(sched.placements_computed(), 4);
    assert_eq!(sched.n_splits(), 1, "everything on the CPU now");
    ctx.free_tensor_buffers(&moved).unwrap();
}

fn cpu_backend_of(sched: &Scheduler) -> Arc<dyn Backend> {
    sched.backends().last().unwrap().clone()
}

#[test]
fn four_pipeline_copies_over_several_iterations() {
    let (_gpu_dev, mut ctx, net, mut sched) =
        gpu_and_cpu(SchedulerParams { n_copies: 4, ..SchedulerParams::default() });
    assert_eq!(sched.n_copies(), 4);
    let arena = GraphArena::new();
    let graph = ctx.build_graph(&arena, &[net.out]).unwrap();
    let mut placements = std::collections::HashSet::new();
    for seed in 0..9 {
        sched.alloc_graph(&mut ctx, graph).unwrap();
        // The input moves to the next copy's memory every run.
        placements.insert(ctx.placement(net.x).unwrap());
        fill(&mut ctx, net.x, seed, 1.0).unwrap();
        sched.graph_compute_async(&mut ctx, graph).unwrap();
        sched.synchronize().unwrap();
        assert_eq!(ctx.read_f32(net.out).unwrap(), reference(seed), "iteration {seed}");
    }
    assert_eq!(placements.len(), 4, "four copies of the input in turn");
}

#[test]
fn a_split_reaching_the_input_limit_starts_another() {
    // Thirteen GPU tensors summed on the CPU (the GPU cannot add): thirteen
    // inputs, three splits at five (one node's most sources) each.
    let gpu_dev = TestGpuDevice::new("TestGPU", all_but("ADD"));
    let gpu = gpu_dev.backend();
    let mut ctx = Context::new();
    let ws: Vec<TensorId> = (0..25).map(|_| ctx.tensor(DType::F32, [8]).unwrap()).collect();
    ctx.alloc_tensors(&ws, &gpu_dev_buft(&gpu), BufferUsage::Weights).unwrap();
    for (i, &w) in ws.iter().enumerate() {
        fill(&mut ctx, w, i as u64, 1.0).unwrap();
    }
    let parts: Vec<TensorId> = ws.iter().map(|&w| ctx.exp(w).unwrap()).collect();
    let mut acc = ctx.add(parts[0], parts[1]).unwrap();
    for &p in &parts[2..] {
        acc = ctx.add(acc, p).unwrap();
    }
    // The smallest limit allowed: one node's sources.
    let params = SchedulerParams { max_split_inputs: gantry::MAX_SRC, ..SchedulerParams::default() };
    let mut sched = Scheduler::new(&[gpu, cpu_backend()], params).unwrap();
    let arena = GraphArena::new();
    let graph = ctx.build_graph(&arena, &[acc]).unwrap();
    sched.graph_compute(&mut ctx, graph).unwrap();
    let cpu_splits: Vec<usize> = (0..sched.n_splits())
        .filter(|&i| sched.splits()[i].backend == gantry::sched::BackendIndex::new(1))
        .map(|i| sched.split_inputs(i).len())
        .collect();
    assert!(cpu_splits.len() >= 3 && cpu_splits.iter().all(|&n| n <= gantry::MAX_SRC), "{cpu_splits:?}");
    let got = ctx.read_f32(acc).unwrap();
    let want: Vec<f32> = (0..8).map(|i| ws.iter().map(|&w| ctx.read_f32(w).unwrap()[i].exp()).sum::<f32>()).collect();
    assert!(max_abs_diff(&got, &want) < 1e-4, "{got:?} vs {want:?}");
}

#[test]
fn a_preallocated_tensor_no_backend_can_run_is_an_error() {
    let gpu_dev = TestGpuDevice::new("TestGPU", all_but("CPY"));
    let gpu = gpu_dev.backend();
    let mut ctx = Context::new();
    let cache = ctx.tensor(DType::F16, [8, 4]).unwrap();
    ctx.set_name(cache, "cache").unwrap();
    ctx.alloc_tensors(&[cache], &gpu_dev_buft(&gpu), BufferUsage::Any).unwrap();
    let k = ctx.tensor(DType::F32, [8]).unwrap();
    let slot = ctx.view_1d(cache, 8, 16).unwrap();
    let store = ctx.cpy(k, slot).unwrap();
    let mut sched = Scheduler::new(&[gpu, cpu_backend()], SchedulerParams::default()).unwrap();
    let arena = GraphArena::new();
    let graph = ctx.build_graph(&arena, &[store]).unwrap();
    let err = sched.graph_compute(&mut ctx, graph).unwrap_err().to_string();
    assert!(err.contains("CPY") && err.contains("TestGPU"), "{err}");
}

#[test]
fn no_cpu_last_is_an_error() {
    let gpu = TestGpuDevice::new("TestGPU", all_ops()).backend();
    let err = Scheduler::new(&[cpu_backend(), gpu], SchedulerParams::default()).err().unwrap().to_string();
    assert!(err.contains("CPU"), "{err}");
    assert!(Scheduler::new(&[cpu_backend()], SchedulerParams { n_copies: 9, ..Default::default() }).is_err());
}

#[test]
fn two_backends_sharing_a_buffer_type() {
    // A "BLAS" accelerator computing only MUL_MAT over the CPU's host memory.
    let matmul_only: SupportFn = Arc::new(|d: &TensorDesc| d.op == Op::MulMat);
    let blas_dev = TestGpuDevice::with_buffer_type("BLAS", matmul_only, cpu::buffer_type(), DeviceType::Accel);
    let blas = blas_dev.backend();
    let (mut ctx, net) = setup(&cpu::buffer_type());
    let mut sched = Scheduler::new(&[blas, cpu_backend()], SchedulerParams::default()).unwrap();
    let out = run(&mut sched, &mut ctx, &net, 5);
    assert_eq!(out, reference(5));
    let names: Vec<&str> = sched.splits().iter().map(|s| sched.backends()[s.backend.get()].name()).collect();
    assert_eq!(names, ["BLAS", "CPU", "BLAS", "CPU"], "products on BLAS, the rest on the CPU");
    for i in 0..sched.n_splits() {
        assert!(sched.split_inputs(i).is_empty(), "one buffer type: nothing to copy");
    }
    assert_eq!(blas_dev.computed.load(Ordering::Relaxed), 2);
}

#[test]
fn eval_callback_sees_nodes_and_can_stop() {
    let (_gpu_dev, mut ctx, net, mut sched) = gpu_and_cpu(SchedulerParams::default());
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen2 = seen.clone();
    let softmax = net.softmax;
    sched.set_eval_callback(Some(Box::new(move |ctx: &Context, t: TensorId, ask: bool| {
        if ask {
            return ctx.desc(t).is_ok_and(|d| !d.op.is_empty());
        }
        seen2.lock().unwrap().push((t, ctx.read_f32(t).unwrap().iter().all(|v| v.is_finite())));
        t != softmax
    })));
    let arena = GraphArena::new();
    let graph = ctx.build_graph(&arena, &[net.out]).unwrap();
    sched.alloc_graph(&mut ctx, graph).unwrap();
    fill(&mut ctx, net.x, 3, 1.0).unwrap();
    sched.graph_compute(&mut ctx, graph).unwrap();
    let seen = seen.lock().unwrap();
    assert_eq!(seen.last().map(|s| s.0), Some(softmax), "stopped at the softmax");
    assert!(seen.iter().all(|s| s.1), "every observed node was computed");
    assert_eq!(seen.len(), 4, "mul_mat, rms_norm, mul, soft_max");
}

#[test]
fn debug_text_and_dot_describe_the_placement() {
    let (_gpu_dev, mut ctx, net, mut sched) = gpu_and_cpu(SchedulerParams::default());
    let arena = GraphArena::new();
    let graph = ctx.build_graph(&arena, &[net.out]).unwrap();
    sched.alloc_graph(&mut ctx, graph).unwrap();
    let text = sched.describe(&ctx, graph, 2);
    assert!(
        text.contains("## SPLIT #1: CPU") && text.contains("SOFT_MAX") && text.contains("expand.most-sources"),
        "{text}"
    );
    let dot = sched.to_dot(&ctx, graph);
    assert!(dot.starts_with("digraph") && dot.contains("cluster_split2") && dot.contains("style=dashed, color=red"));
}

#[test]
fn the_abort_callback_stops_between_splits_on_any_backend() {
    use std::sync::atomic::AtomicUsize;
    let (gpu_dev, mut ctx, net, mut sched) = gpu_and_cpu(SchedulerParams::default());
    let want = run(&mut sched, &mut ctx, &net, 9);
    assert_eq!(sched.n_splits(), 3, "TestGPU, CPU, TestGPU");
    // Stop before the second split: the first (on the test GPU) ran, the rest did not.
    let polls = Arc::new(AtomicUsize::new(0));
    let seen = polls.clone();
    sched.set_abort_callback(Some(Arc::new(move || seen.fetch_add(1, Ordering::Relaxed) + 1 >= 2)));
    let computed_before = gpu_dev.computed.load(Ordering::Relaxed);
    let arena = GraphArena::new();
    let graph = ctx.build_graph(&arena, &[net.out]).unwrap();
    let err = sched.graph_compute(&mut ctx, graph).unwrap_err();
    assert!(matches!(err, gantry::engine::Error::Aborted), "{err}");
    assert_eq!(polls.load(Ordering::Relaxed), 2, "polled before split 0 and split 1");
    assert!(gpu_dev.computed.load(Ordering::Relaxed) > computed_before, "split 0 ran on the test GPU");
    // Without the callback the scheduler computes the whole graph again, with the same result.
    sched.set_abort_callback(None);
    assert_eq!(run(&mut sched, &mut ctx, &net, 9), want);
}
