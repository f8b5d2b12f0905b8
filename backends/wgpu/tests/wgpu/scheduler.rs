//! The wgpu backend under the scheduler, beside the CPU backend: a graph
//! cut into wgpu and CPU splits (nodes pinned to the CPU in the middle),
//! with pipelined copies, gives the CPU-only result.

use std::sync::Arc;

use super::support::{assert_close, values};
use gantry_arenas::GraphArena;
use gantry_cpu::CpuBackend;
use gantry_engine::sched::{Scheduler, SchedulerParams};
use gantry_engine::{Backend, BufferUsage, Context, DType, Device, TensorId};

struct Model {
    ctx: Context,
    x: TensorId,
    pinned: Vec<TensorId>,
    out: TensorId,
}

/// rms_norm -> mul_mat -> silu * mul_mat -> mul_mat -> add, weights in `weights_on`'s memory.
fn build(weights_on: &Arc<dyn Backend>) -> Model {
    let mut ctx = Context::new();
    let (k, ff, n) = (64, 96, 3);
    let shapes: [&[usize]; 3] = [&[k, ff], &[k, ff], &[ff, k]];
    let buft = weights_on.device().buffer_type();
    let mut ws = Vec::new();
    for (i, shape) in shapes.iter().enumerate() {
        let t = ctx.tensor(DType::F32, shape).unwrap();
        let size = ctx.desc(t).unwrap().nbytes();
        let buf = ctx.alloc_buffer(&buft, size, BufferUsage::Weights).unwrap();
        ctx.place(t, buf, 0).unwrap();
        ctx.set_f32(t, &values(size / 4, 10 + i as u64, -0.3, 0.3)).unwrap();
        ws.push(t);
    }
    let x = ctx.tensor(DType::F32, [k, n]).unwrap();
    ctx.set_input(x).unwrap();
    let h = ctx.rms_norm(x, 1e-5).unwrap();
    let gate = ctx.mul_mat(ws[0], h).unwrap();
    let up = ctx.mul_mat(ws[1], h).unwrap();
    let act = ctx.silu(gate).unwrap();
    let prod = ctx.mul(act, up).unwrap();
    let down = ctx.mul_mat(ws[2], prod).unwrap();
    let out = ctx.add(down, x).unwrap();
    ctx.set_output(out).unwrap();
    Model { ctx, x, pinned: vec![act, prod], out }
}

fn run(backends: &[Arc<dyn Backend>], pin_cpu: bool, n_copies: usize, inputs: &[Vec<f32>]) -> (Vec<Vec<f32>>, usize) {
    let mut m = build(&backends[0]);
    let params = SchedulerParams { n_copies, ..SchedulerParams::default() };
    let mut sched = Scheduler::new(backends, params).unwrap();
    let cpu = backends.last().unwrap().clone();
    if pin_cpu {
        for &t in &m.pinned {
            sched.set_tensor_backend(t, &cpu).unwrap();
        }
    }
    // The graph is walked once, before the scheduler rewires sources to its
    // copies. Each run is placed before its input is written: with pipeline
    // copies a placement may move the input.
    let arena = GraphArena::new();
    let graph = m.ctx.build_graph(&arena, &[m.out]).unwrap();
    let mut outs = Vec::new();
    for input in inputs {
        sched.alloc_graph(&mut m.ctx, graph).unwrap();
        m.ctx.set_f32(m.x, input).unwrap();
        sched.graph_compute(&mut m.ctx, graph).unwrap();
        outs.push(m.ctx.read_f32(m.out).unwrap());
    }
    let splits = sched.n_splits();
    sched.release(&mut m.ctx).unwrap();
    (outs, splits)
}

#[test]
fn wgpu_and_cpu_splits_agree_with_the_cpu() {
    let dev = device_or_skip!();
    let cpu: Arc<dyn Backend> = Arc::new(CpuBackend::with_threads(2).unwrap());
    let gpu = dev.init_backend(None).unwrap();
    let inputs: Vec<Vec<f32>> = (0..3).map(|i| values(64 * 3, 50 + i, -1.0, 1.0)).collect();
    let (want, _) = run(std::slice::from_ref(&cpu), false, 1, &inputs);
    let (all_gpu, splits) = run(&[gpu.clone(), cpu.clone()], false, 1, &inputs);
    assert_eq!(splits, 1, "every node runs on wgpu");
    for (g, w) in all_gpu.iter().zip(&want) {
        assert_close("wgpu only", g, w, 1e-4, 1e-4);
    }
    for n_copies in [1, 2] {
        let (mixed, splits) = run(&[gpu.clone(), cpu.clone()], true, n_copies, &inputs);
        assert!(splits >= 3, "wgpu, CPU, wgpu: {splits} splits");
        for (g, w) in mixed.iter().zip(&want) {
            assert_close(&format!("wgpu + CPU, {n_copies} copies"), g, w, 1e-4, 1e-4);
        }
    }
}
