//! The same graph again: reset + split + alloc + compute make no heap
//! allocation on any thread (this file holds one test) and do not re-plan
//! memory, whether the placement is kept or made again from scratch; nor
//! do a decoder session's steps through its worker.

use std::sync::Arc;

use gantry::backends::cpu::CpuBackend;
use gantry::engine::testing::CountingAllocator;
use gantry::model::decoder::{Batch, DecodeWorker, DecoderWeights, Session, SessionParams};
use gantry::sched::{Scheduler, SchedulerParams};
use gantry::testing::backends::TestGpuDevice;
use gantry::testing::fill;
use gantry::{Backend, BufferUsage, Context, DType, GraphArena, TensorDesc};

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

fn steady_state_runs_allocate_nothing() {
    let no_softmax = Arc::new(|d: &TensorDesc| d.op.name() != "SOFT_MAX");
    let gpu = TestGpuDevice::new("TestGPU", no_softmax).backend();
    let cpu: Arc<dyn Backend> = Arc::new(CpuBackend::with_threads(1).unwrap());
    // `touch`: rename a tensor before each round, so that the context's
    // revision changes and every round places the graph from scratch (assign,
    // expand, split, the allocator's gather and bind); without it the same
    // graph keeps its placement.
    for (n_copies, touch) in [(1, false), (3, false), (1, true), (3, true)] {
        let mut ctx = Context::new();
        let x = ctx.tensor(DType::F32, [32, 4]).unwrap();
        ctx.set_input(x).unwrap();
        let w = ctx.tensor(DType::F32, [32, 32]).unwrap();
        ctx.alloc_tensors(&[w], &gpu.device().buffer_type(), BufferUsage::Weights).unwrap();
        fill(&mut ctx, w, 1, 0.3).unwrap();
        let h = ctx.mul_mat(w, x).unwrap();
        let s = ctx.soft_max(h).unwrap();
        let y = ctx.mul_mat(w, s).unwrap();
        let y = ctx.add(y, x).unwrap();
        let params = SchedulerParams { n_copies, ..SchedulerParams::default() };
        let mut sched = Scheduler::new(&[gpu.clone(), cpu.clone()], params).unwrap();
        let arena = GraphArena::new();
        let graph = ctx.build_graph(&arena, &[y]).unwrap();
        let input: Vec<u8> = (0..32 * 4).flat_map(|i| (i as f32 * 0.01).to_le_bytes()).collect();
        let mut out = vec![0u8; 32 * 4 * 4];
        let mut first = Vec::new();
        let mut plans = 0;
        for round in 0..6 {
            // Counted on every thread: the backends' pools and streams included.
            let placed = sched.placements_computed();
            let ((), made) = CountingAllocator::count_every_thread(|| {
                if touch {
                    ctx.set_name(w, "w").unwrap();
                }
                sched.reset(&mut ctx);
                sched.alloc_graph(&mut ctx, graph).unwrap();
                ctx.write_tensor_bytes(x, 0, &input).unwrap();
                sched.graph_compute(&mut ctx, graph).unwrap();
                ctx.read_tensor_bytes(y, 0, &mut out).unwrap();
            });
            if round == 0 {
                first = out.clone();
            } else {
                assert_eq!(out, first, "n_copies {n_copies}, round {round}: same input, same output");
            }
            if round >= 2 {
                let what = format!("n_copies {n_copies}, touch {touch}, round {round}");
                assert_eq!(made, 0, "{what}: {made} heap allocations");
                assert_eq!(sched.plans_computed(), plans, "{what}: re-planned");
                let placed_now = sched.placements_computed() - placed;
                assert_eq!(placed_now, u64::from(touch), "{what}: placed {placed_now} times");
            }
            plans = sched.plans_computed();
        }
        assert_eq!(sched.n_splits(), 3);
    }
}

/// A decoder session's steps through a [`DecodeWorker`] (submit, then wait
/// for the logits), after the first steps of a bucket: no heap allocation on
/// any thread, the worker's driver and the CPU pool included.
fn decode_worker_steps_allocate_nothing() {
    let hp = gantry::testing::TINY_LLAMA;
    let cpu: Arc<dyn Backend> = Arc::new(CpuBackend::with_threads(2).unwrap());
    let mut ctx = Context::new();
    let w = DecoderWeights::create(&mut ctx, &hp, DType::Q8_0, DType::F32).unwrap();
    ctx.alloc_tensors(&w.all(), &cpu.device().buffer_type(), BufferUsage::Weights).unwrap();
    w.fill_random(&mut ctx, 3).unwrap();
    let session = Session::new(&mut ctx, hp, w, &[cpu], SessionParams { n_ctx: 64, ..Default::default() }).unwrap();
    let mut worker = DecodeWorker::spawn(ctx, session).unwrap();
    let mut batch = Batch::new();
    batch.push_prompt(&[1, 2, 3], 0);
    worker.submit(&batch).unwrap();
    worker.wait().unwrap();
    for step in 0..8u32 {
        batch.clear();
        batch.push(10 + step, 0, true);
        let ((), made) = CountingAllocator::count_every_thread(|| {
            worker.submit(&batch).unwrap();
            worker.wait().unwrap();
        });
        if step >= 2 {
            assert_eq!(made, 0, "decode step {step} through the worker: {made} heap allocations");
        }
    }
}

/// Run without libtest's harness (`harness = false`): the harness's own
/// thread allocates while a test starts, which counting every thread would
/// blame on the code under test.
fn main() {
    steady_state_runs_allocate_nothing();
    println!("steady_state_runs_allocate_nothing: ok");
    decode_worker_steps_allocate_nothing();
    println!("decode_worker_steps_allocate_nothing: ok");
}
