//! A graph mixing ops wgpu computes with one it does not (SOLVE_TRI: no
//! wgpu kernel, `supports_op` says no): the scheduler cuts it into splits,
//! runs the unsupported node on the CPU with copies in and out, and the
//! result is the CPU-only one.

use std::sync::Arc;

use super::support::{assert_close, values};
use gantry_arenas::GraphArena;
use gantry_cpu::CpuBackend;
use gantry_engine::sched::{Scheduler, SchedulerParams};
use gantry_engine::{Backend, BufferUsage, Context, DType, Device, TensorId};

const N: usize = 8;
const K: usize = 3;

struct Block {
    ctx: Context,
    a: TensorId,
    b: TensorId,
    out: TensorId,
    /// L2_NORM (wgpu), SOLVE_TRI (CPU), the final ADD (wgpu).
    watched: [TensorId; 3],
}

/// A shift in `weights_on`'s memory (which draws the block to that backend);
/// `b` normalized, solved against the lower-triangular `a`, the solution
/// squared, shifted and soft-maxed.
fn build(weights_on: &Arc<dyn Backend>) -> Block {
    let mut ctx = Context::new();
    let a = ctx.tensor(DType::F32, [N, N, 1, 1]).unwrap();
    ctx.set_input(a).unwrap();
    let b = ctx.tensor(DType::F32, [K, N, 1, 1]).unwrap();
    ctx.set_input(b).unwrap();
    let shift = ctx.tensor(DType::F32, [K, N, 1, 1]).unwrap();
    let buf = ctx.alloc_buffer(&weights_on.device().buffer_type(), K * N * 4, BufferUsage::Weights).unwrap();
    ctx.place(shift, buf, 0).unwrap();
    ctx.set_f32(shift, &values(K * N, 21, -0.5, 0.5)).unwrap();
    let shifted_b = ctx.add(b, shift).unwrap();
    let norm = ctx.l2_norm(shifted_b, 1e-6).unwrap();
    let x = ctx.solve_tri(a, norm, true, true, false).unwrap();
    let sq = ctx.sqr(x).unwrap();
    let shifted = ctx.add(sq, shift).unwrap();
    let out = ctx.soft_max(shifted).unwrap();
    ctx.set_output(out).unwrap();
    Block { ctx, a, b, out, watched: [norm, x, shifted] }
}

/// A well-conditioned lower-triangular matrix: ones and more on the
/// diagonal, small entries below it, zeros above.
fn lower_triangular() -> Vec<f32> {
    let noise = values(N * N, 22, -0.3, 0.3);
    (0..N * N)
        .map(|at| {
            let (col, row) = (at % N, at / N);
            match col.cmp(&row) {
                std::cmp::Ordering::Less => noise[at],
                std::cmp::Ordering::Equal => 1.0 + noise[at].abs(),
                std::cmp::Ordering::Greater => 0.0,
            }
        })
        .collect()
}

fn run(backends: &[Arc<dyn Backend>]) -> (Vec<f32>, usize, Vec<String>) {
    let mut blk = build(&backends[0]);
    let mut sched = Scheduler::new(backends, SchedulerParams::default()).unwrap();
    let arena = GraphArena::new();
    let graph = blk.ctx.build_graph(&arena, &[blk.out]).unwrap();
    sched.alloc_graph(&mut blk.ctx, graph).unwrap();
    blk.ctx.set_f32(blk.a, &lower_triangular()).unwrap();
    blk.ctx.set_f32(blk.b, &values(K * N, 23, -1.0, 1.0)).unwrap();
    sched.graph_compute(&mut blk.ctx, graph).unwrap();
    let out = blk.ctx.read_f32(blk.out).unwrap();
    let placed =
        blk.watched.iter().map(|&t| sched.tensor_backend(t).map_or("?".into(), |be| be.name().to_string())).collect();
    let splits = sched.n_splits();
    sched.release(&mut blk.ctx).unwrap();
    (out, splits, placed)
}

#[test]
fn an_op_wgpu_lacks_runs_on_the_cpu_and_the_result_is_the_cpu_only_one() {
    let dev = device_or_skip!();
    let cpu: Arc<dyn Backend> = Arc::new(CpuBackend::with_threads(2).unwrap());
    let gpu = dev.init_backend(None).unwrap();
    let (want, _, _) = run(std::slice::from_ref(&cpu));
    let (got, splits, placed) = run(&[gpu.clone(), cpu.clone()]);
    let (g, c) = (gpu.name().to_string(), cpu.name().to_string());
    assert_eq!(placed, [g.clone(), c, g], "L2_NORM and the rest on wgpu, SOLVE_TRI on the CPU");
    assert!(splits >= 3, "{splits} splits: wgpu, the CPU's SOLVE_TRI, wgpu again");
    assert_close("normalize, solve, square, shift, soft max", &got, &want, 1e-5, 1e-4);
}
