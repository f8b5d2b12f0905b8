//! Unit tests of the placement systems on mock devices.

use std::sync::Arc;

use gantry_arenas::{GraphArena, TensorId};

use super::placement::{PlacementInputs, RunTables, place_graph};
use super::split::SplitParams;
use super::tables::Pins;
use super::{BackendIndex, BackendSet, Cause, Split};
use crate::alloc::TensorTable;
use crate::testing::TestBufferType;
use crate::testing::mock_devices::{self as mock, MockDevice};
use crate::{Backend, BufferType, BufferUsage, Context, DType, Device, DeviceType, Error, Op};

fn weight(ctx: &mut Context, backend: &Arc<dyn Backend>, shape: &[usize]) -> TensorId {
    let t = ctx.tensor(DType::F32, shape).unwrap();
    let buft = backend.device().buffer_type();
    let size = ctx.desc(t).unwrap().nbytes();
    let buf = ctx.alloc_buffer(&buft, size, BufferUsage::Weights).unwrap();
    ctx.place(t, buf, 0).unwrap();
    t
}

const ONE: SplitParams = SplitParams { n_copies: 1, cur_copy: 0, max_inputs: 30 };
/// The first backend of a two-backend set (the GPU, or the accelerator).
const FIRST: BackendIndex = BackendIndex::new(0);
/// The second and last backend: the CPU.
const LAST: BackendIndex = BackendIndex::new(1);

fn inputs<'a>(set: &'a BackendSet, pins: &'a Pins, op_offload: bool, split: SplitParams) -> PlacementInputs<'a> {
    PlacementInputs { set, pins, op_offload, split, graph_optimize: true }
}

/// A placement and the gathered table it laid the allocator's graph out in.
struct Placed {
    run: RunTables,
    table: TensorTable,
}

impl std::fmt::Debug for Placed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Placed").field("splits", &self.run.split.splits).finish()
    }
}

impl Placed {
    /// The backend `t` was assigned.
    fn backend(&self, t: TensorId) -> Option<BackendIndex> {
        self.run.assigned.of(&self.table, t)
    }

    /// Why `t` has its backend.
    fn cause(&self, t: TensorId) -> Cause {
        self.run.assigned.cause_of(&self.table, t)
    }
}

impl std::ops::Deref for Placed {
    type Target = RunTables;
    fn deref(&self) -> &RunTables {
        &self.run
    }
}

fn place(
    ctx: &mut Context,
    outputs: &[TensorId],
    set: &BackendSet,
    pins: &Pins,
    params: SplitParams,
) -> crate::Result<Placed> {
    let arena = GraphArena::new();
    let graph = ctx.build_graph(&arena, outputs)?;
    let mut run = RunTables::default();
    let mut table = TensorTable::default();
    place_graph(ctx, graph, inputs(set, pins, false, params), (&mut table, &[]), &mut run)?;
    Ok(Placed { run, table })
}

fn no_softmax(op: &Op) -> bool {
    !matches!(op, Op::SoftMax { .. })
}

#[test]
fn gpu_cpu_gpu_with_exactly_the_copies_needed() {
    let (gpu, cpu) = (mock::gpu("GPU", no_softmax), mock::cpu());
    let set = BackendSet::new(&[gpu.clone(), cpu], &[]).unwrap();
    let mut ctx = Context::new();
    let w1 = weight(&mut ctx, &gpu, &[8, 6]);
    let w2 = weight(&mut ctx, &gpu, &[6, 5]);
    let x = ctx.tensor(DType::F32, [8, 4]).unwrap();
    ctx.set_input(x).unwrap();
    let h = ctx.mul_mat(w1, x).unwrap();
    let s = ctx.soft_max(h).unwrap();
    let o = ctx.mul_mat(w2, s).unwrap();
    let run = place(&mut ctx, &[o], &set, &Pins::new(), ONE).unwrap();

    assert_eq!((run.backend(x), run.cause(x)), (Some(LAST), Cause::Input));
    assert_eq!((run.backend(h), run.cause(h)), (Some(FIRST), Cause::Weights));
    assert_eq!((run.backend(s), run.cause(s)), (Some(LAST), Cause::MostSources));
    assert_eq!((run.backend(o), run.cause(o)), (Some(FIRST), Cause::Weights));
    let splits: Vec<(BackendIndex, usize)> =
        run.split.splits.iter().map(|s: &Split| (s.backend, s.inputs.len())).collect();
    assert_eq!(splits, [(FIRST, 1), (LAST, 1), (FIRST, 1)], "GPU <- x, CPU <- h, GPU <- s");
    assert_eq!(run.split.inputs, [x, h, s]);
    // Sources now read the copies, named after backend and source.
    let hx = ctx.desc(h).unwrap().srcs[1].unwrap();
    assert_eq!((hx != x, ctx.desc(hx).unwrap().ne), (true, [8, 4, 1, 1]));
    assert!(ctx.name(hx).starts_with("GPU#"));
    assert_eq!(run.split.created.len(), 3 + 3, "3 copies and 3 dependency markers");
    // The allocator walks each copy (after its dependency marker) at the start of its split.
    assert_eq!(run.table.walk.len(), 3 + 2 * 3);
    let walked: Vec<TensorId> = run.table.walk.as_slice().iter().map(|&d| run.table.tensor(d as usize)).collect();
    assert_eq!(walked[1], hx, "the GPU's copy of x comes before h");
    // Undo restores the graph.
    let mut run = run.run;
    run.split.undo(&mut ctx);
    assert_eq!(ctx.desc(h).unwrap().srcs[1], Some(x));
    assert!(ctx.get(hx).is_none());
}

#[test]
fn pins_are_never_overwritten() {
    let (gpu, cpu) = (mock::gpu("GPU", mock::all_ops), mock::cpu());
    let set = BackendSet::new(&[gpu.clone(), cpu], &[]).unwrap();
    let mut ctx = Context::new();
    let w = weight(&mut ctx, &gpu, &[8, 6]);
    let x = ctx.tensor(DType::F32, [8, 2]).unwrap();
    let h = ctx.mul_mat(w, x).unwrap();
    let r = ctx.relu(h).unwrap();
    let mut pins = Pins::new();
    pins.insert(h, LAST);
    let run = place(&mut ctx, &[r], &set, &pins, ONE).unwrap();
    assert_eq!((run.backend(h), run.cause(h)), (Some(LAST), Cause::User));
    // The CPU cannot read the GPU weights: they are copied in.
    assert!(run.split.inputs.contains(&w));
}

#[test]
fn inputs_past_the_limit_start_a_new_split() {
    let cpu_only_add = |op: &Op| !matches!(op, Op::Binary(_));
    let (gpu, cpu) = (mock::gpu("GPU", cpu_only_add), mock::cpu());
    let set = BackendSet::new(&[gpu.clone(), cpu], &[]).unwrap();
    let mut ctx = Context::new();
    let parts: Vec<TensorId> = (0..9)
        .map(|_| {
            let w = weight(&mut ctx, &gpu, &[4]);
            ctx.exp(w).unwrap()
        })
        .collect();
    let mut acc = ctx.add(parts[0], parts[1]).unwrap();
    for &p in &parts[2..] {
        acc = ctx.add(acc, p).unwrap();
    }
    let params = SplitParams { max_inputs: 4, ..ONE };
    let run = place(&mut ctx, &[acc], &set, &Pins::new(), params).unwrap();
    let cpu_splits: Vec<&Split> = run.split.splits.iter().filter(|s| s.backend == LAST).collect();
    assert!(cpu_splits.len() >= 3, "9 inputs over splits of at most 4: {:?}", run.split.splits);
    assert!(cpu_splits.iter().all(|s| s.inputs.len() <= 4));
    assert_eq!(cpu_splits.iter().map(|s| s.inputs.len()).sum::<usize>(), 9);
}

#[test]
fn preallocated_tensor_no_backend_can_run_is_an_error() {
    let no_cpy = |op: &Op| !matches!(op, Op::Cpy);
    let (gpu, cpu) = (mock::gpu("GPU", no_cpy), mock::cpu());
    let set = BackendSet::new(&[gpu.clone(), cpu], &[]).unwrap();
    let mut ctx = Context::new();
    let cache = weight(&mut ctx, &gpu, &[16]);
    ctx.set_name(cache, "kv_cache").unwrap();
    let x = ctx.tensor(DType::F32, [16]).unwrap();
    let store = ctx.cpy(x, cache).unwrap();
    let err = place(&mut ctx, &[store], &set, &Pins::new(), ONE).unwrap_err();
    assert!(matches!(err, Error::Scheduler(_)));
    let msg = err.to_string();
    assert!(msg.contains("CPY") && msg.contains("GPU"), "{msg}");
}

#[test]
fn the_last_backend_must_be_a_cpu() {
    let err = BackendSet::new(&[mock::cpu(), mock::gpu("GPU", mock::all_ops)], &[]).err().unwrap();
    assert!(err.to_string().contains("last backend must be a CPU"), "{err}");
    assert!(BackendSet::new(&[], &[]).is_err());
}

#[test]
fn backends_sharing_a_buffer_type_need_no_copies() {
    let cpu = mock::cpu();
    let host = cpu.device().buffer_type();
    let matmul_only = |op: &Op| matches!(op, Op::MulMat);
    let blas = MockDevice {
        name: "BLAS",
        device_type: DeviceType::Accel,
        buft: host.clone(),
        supports: matmul_only,
        reads_host: true,
        offload: false,
    }
    .init_backend(None)
    .unwrap();
    let set = BackendSet::new(&[blas, cpu.clone()], &[]).unwrap();
    assert_eq!(set.alloc_buft(FIRST), set.alloc_buft(LAST));
    let mut ctx = Context::new();
    let w = weight(&mut ctx, &cpu, &[8, 8]);
    let x = ctx.tensor(DType::F32, [8, 3]).unwrap();
    ctx.set_input(x).unwrap();
    let h = ctx.mul_mat(w, x).unwrap();
    let r = ctx.silu(h).unwrap();
    let y = ctx.mul_mat(w, r).unwrap();
    let run = place(&mut ctx, &[y], &set, &Pins::new(), ONE).unwrap();
    assert_eq!(run.backend(h), Some(FIRST), "the product goes to the higher-priority BLAS");
    assert_eq!(run.backend(r), Some(LAST));
    assert_eq!(run.split.splits.len(), 3);
    assert!(run.split.inputs.is_empty(), "one buffer type: nothing to copy");
}

#[test]
fn op_offload_takes_host_weight_ops_to_a_willing_gpu() {
    let cpu = mock::cpu();
    let gbuft: Arc<dyn BufferType> = TestBufferType::device("GPU", 32).shared();
    let gpu = MockDevice {
        name: "GPU",
        device_type: DeviceType::Gpu,
        buft: gbuft,
        supports: mock::all_ops,
        reads_host: false,
        offload: true,
    }
    .init_backend(None)
    .unwrap();
    let set = BackendSet::new(&[gpu, cpu.clone()], &[]).unwrap();
    let mut ctx = Context::new();
    let w = weight(&mut ctx, &cpu, &[8, 8]);
    let x = ctx.tensor(DType::F32, [8, 64]).unwrap();
    let h = ctx.mul_mat(w, x).unwrap();
    let arena = GraphArena::new();
    let graph = ctx.build_graph(&arena, &[h]).unwrap();
    for (offload, want) in [(false, (LAST, Cause::Weights)), (true, (FIRST, Cause::Offload))] {
        let mut run = RunTables::default();
        let pins = Pins::new();
        let mut table = TensorTable::default();
        place_graph(&mut ctx, graph, inputs(&set, &pins, offload, ONE), (&mut table, &[]), &mut run).unwrap();
        let mut placed = Placed { run, table };
        assert_eq!((placed.backend(h), placed.cause(h)), (Some(want.0), want.1));
        placed.run.split.undo(&mut ctx);
    }
}

#[test]
fn pipeline_copies_for_graph_inputs_and_split_inputs() {
    let (gpu, cpu) = (mock::gpu("GPU", mock::all_ops), mock::cpu());
    let set = BackendSet::new(&[gpu.clone(), cpu], &[]).unwrap();
    let mut ctx = Context::new();
    let w = weight(&mut ctx, &gpu, &[8, 8]);
    let x = ctx.tensor(DType::F32, [8, 2]).unwrap();
    ctx.set_input(x).unwrap();
    let h = ctx.mul_mat(w, x).unwrap();
    let params = SplitParams { n_copies: 4, cur_copy: 2, max_inputs: 30 };
    let run = place(&mut ctx, &[h], &set, &Pins::new(), params).unwrap();
    assert_eq!(run.split.graph_inputs, [x]);
    // 4 slots for the input on the CPU (the input itself first) and 4 GPU copies.
    assert_eq!(run.copies.get(x, LAST, 0), Some(x));
    let leafs: Vec<TensorId> = run.table.leaf_walk.as_slice().iter().map(|&d| run.table.tensor(d as usize)).collect();
    assert_eq!(leafs[0], x);
    // x is copy 0 of its own pipeline copies and a graph leaf: given memory once.
    assert_eq!(leafs.len(), 4 + 4 + 1, "pipeline copies, then the graph's leafs");
    assert_eq!(leafs.iter().filter(|&&t| t == x).count(), 1);
    // The graph always reads copy 0 (the scheduler moves its memory between runs).
    let gpu_copy = run.copies.get(x, FIRST, 0).unwrap();
    assert_eq!(ctx.desc(h).unwrap().srcs[1], Some(gpu_copy));
}
