//! Running a case: the CPU-only reference, the scheduled runs, and the
//! invariants checked between them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use gantry_engine::sched::{Scheduler, SchedulerParams};
use gantry_engine::{Backend, BufferUsage, Context, Graph, GraphArena, MAX_SRC, TensorId};

use super::case::{DST_ROWS, RunSpec, SchedCase, WeightShape};
use super::checked_backend::{SharedJournal, lock};
use super::devices::CaseDevices;
use super::program::{Program, build_program};
use gantry_cpu::{self as cpu, CpuBackend};

/// How a case ended when no invariant broke.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Every run was scheduled, computed and checked.
    Checked {
        /// Splits of the last run.
        splits: usize,
    },
    /// The configuration is impossible, and the scheduler said so.
    ExpectedError(String),
    /// The CPU alone cannot compute the program (nothing to compare with).
    Skipped(String),
}

/// A broken invariant, in words.
pub type Violation = String;

fn values(seed: u64, n: usize, scale: f32, offset: f32) -> Vec<f32> {
    let mut rng = gantry_engine::SplitMix64::new(seed);
    (0..n).map(|_| offset + scale * rng.uniform()).collect()
}

/// Writes the case's weights and destination contents (the same in both contexts).
fn fill_constants(ctx: &mut Context, case: &SchedCase, p: &Program) -> gantry_engine::Result<()> {
    for (i, (w, &t)) in case.weights.iter().zip(&p.weights).enumerate() {
        let n = ctx.desc(t)?.nelements();
        let seed = case.seed ^ ((i as u64 + 1) * 0x1234_5677);
        let v = match w.shape {
            WeightShape::Square => values(seed, n, (3.0 / case.k as f32).sqrt(), 0.0),
            WeightShape::Row => values(seed, n, 0.25, 1.0),
            WeightShape::Table => values(seed, n, 1.0, 0.0),
        };
        ctx.set_f32(t, &v)?;
    }
    for (i, &t) in p.dsts.iter().enumerate() {
        let n = ctx.desc(t)?.nelements();
        ctx.set_f32(t, &values(case.seed ^ ((i as u64 + 100) * 0x7654_3211), n, 1.0, 0.0))?;
    }
    Ok(())
}

/// Writes one run's inputs.
fn fill_inputs(ctx: &mut Context, case: &SchedCase, p: &Program, seed: u8) -> gantry_engine::Result<()> {
    // Inputs the graph does not read have no memory.
    for (i, &x) in p.inputs.iter().enumerate() {
        if !ctx.is_allocated(x) {
            continue;
        }
        ctx.set_f32(x, &values(u64::from(seed) << 8 | i as u64, case.k * case.n, 1.0, 0.0))?;
    }
    if let Some(index) = p.index.filter(|&t| ctx.is_allocated(t)) {
        // Distinct rows, so that SET_ROWS has one writer per row.
        let rows: Vec<i32> = (0..case.n).map(|j| ((j + seed as usize) % DST_ROWS) as i32).collect();
        ctx.set_i32(index, &rows)?;
    }
    Ok(())
}

/// The bits of a tensor's values in logical order (F16 widened exactly).
fn bits(ctx: &Context, t: TensorId) -> gantry_engine::Result<Vec<u32>> {
    Ok(ctx.read_f32(t)?.iter().map(|v| v.to_bits()).collect())
}

/// The CPU-only side: every tensor in memory of its own, nothing reused.
struct Reference {
    ctx: Context,
    program: Program,
    cpu: CpuBackend,
}

/// What the reference computed in one run.
struct Expected {
    /// Each node's values right after it was computed, by node position.
    nodes: Vec<Vec<u32>>,
    /// Each output's values at the end, in `Program::outputs` order.
    outputs: Vec<Vec<u32>>,
    /// Each destination's values at the end.
    dsts: Vec<Vec<u32>>,
}

impl Reference {
    fn new(case: &SchedCase) -> gantry_engine::Result<Self> {
        let mut ctx = Context::new();
        let program = build_program(&mut ctx, case)?;
        let buft = cpu::buffer_type();
        ctx.alloc_tensors(&program.weights, &buft, BufferUsage::Weights)?;
        ctx.alloc_tensors(&program.dsts, &buft, BufferUsage::Any)?;
        fill_constants(&mut ctx, case, &program)?;
        let arena = GraphArena::new();
        let graph = ctx.build_graph(&arena, &program.outputs)?;
        let all: Vec<TensorId> = graph.leafs().iter().chain(graph.nodes()).copied().collect();
        ctx.alloc_tensors(&all, &buft, BufferUsage::Compute)?;
        Ok(Self { ctx, program, cpu: CpuBackend::with_threads(1)? })
    }

    /// Computes one run node by node, recording every node's values.
    fn run(&mut self, case: &SchedCase, seed: u8) -> gantry_engine::Result<Expected> {
        fill_inputs(&mut self.ctx, case, &self.program, seed)?;
        let arena = GraphArena::new();
        let graph = self.ctx.build_graph(&arena, &self.program.outputs)?;
        let mut nodes = Vec::with_capacity(graph.n_nodes());
        for i in 0..graph.n_nodes() {
            let one = Graph::from_parts(&graph.nodes()[i..=i], &[], &[]);
            self.cpu.compute_graph(&self.ctx, one).into_result()?;
            nodes.push(bits(&self.ctx, graph.nodes()[i])?);
        }
        let outputs = self.program.outputs.iter().map(|&t| bits(&self.ctx, t)).collect::<gantry_engine::Result<_>>()?;
        let dsts = self.program.dsts.iter().map(|&t| bits(&self.ctx, t)).collect::<gantry_engine::Result<_>>()?;
        Ok(Expected { nodes, outputs, dsts })
    }
}

/// The configuration error the scheduler must report, if any, decided from
/// the devices alone before anything is scheduled:
/// - a node pinned to a backend that does not support it, or that cannot
///   use the pre-allocated memory it writes;
/// - a pre-allocated node (CPY into a cache, or a view of one computed in
///   place) that no backend able to use its memory can run;
/// - a view source with nodes computed in place over it for which there is
///   no backend to hold its memory: one that runs the view source itself
///   (or that it is pinned to), such that each in-place node has a backend
///   (its pin, or any) that supports it and can use that memory.
fn expected_error(
    ctx: &Context,
    graph: Graph<'_>,
    backends: &[Arc<dyn Backend>],
    pins: &[(TensorId, u8)],
) -> Option<String> {
    let n = backends.len();
    let dev = |b: usize| backends[b].device();
    let pin = |t: TensorId| pins.iter().rev().find(|(p, _)| *p == t).map(|&(_, b)| b as usize);
    let computes = |t: TensorId| ctx.get(t).is_some_and(|d| !d.op.is_empty());
    let preallocated = |t: TensorId| ctx.tensor_buffer(t).ok().map(|(e, _)| e.buffer_type.clone());
    let all = || graph.leafs().iter().chain(graph.nodes()).copied();
    for t in all().filter(|&t| computes(t)) {
        let memory = preallocated(t);
        let runs =
            |b: usize| dev(b).supports_op(ctx, t) && memory.as_ref().is_none_or(|m| dev(b).supports_buft(m.as_ref()));
        match pin(t) {
            Some(b) if !runs(b) => {
                return Some(format!("{} pinned to {}, which cannot run it", ctx.describe(t), dev(b).name()));
            }
            None if memory.is_some() && !(0..n).any(runs) => {
                return Some(format!("pre-allocated {} runs nowhere", ctx.describe(t)));
            }
            _ => {}
        }
    }
    for root in all().filter(|&r| preallocated(r).is_none() && ctx.get(r).is_some_and(|d| d.view_src.is_none())) {
        let in_place: Vec<TensorId> = graph
            .nodes()
            .iter()
            .copied()
            .filter(|&v| computes(v) && ctx.get(v).is_some_and(|d| d.view_src == Some(root)))
            .collect();
        if in_place.is_empty() {
            continue;
        }
        let can_use = |b: usize, mem: usize| dev(b).supports_buft(dev(mem).buffer_type().as_ref());
        let holds = |mem: usize| {
            pin(root).is_none_or(|p| p == mem)
                && (!computes(root) || dev(mem).supports_op(ctx, root))
                && in_place.iter().all(|&v| match pin(v) {
                    Some(q) => can_use(q, mem),
                    None => (0..n).any(|b| can_use(b, mem) && dev(b).supports_op(ctx, v)),
                })
        };
        if !(0..n).any(holds) {
            return Some(format!("no backend can hold {}'s memory for its in-place nodes", ctx.describe(root)));
        }
    }
    None
}

/// Fills every compute buffer with NaN (all bits set), so that a value read
/// before it is written shows up in the results.
fn poison_compute_memory(ctx: &Context) -> gantry_engine::Result<()> {
    for (_, entry) in ctx.buffers() {
        if entry.usage == BufferUsage::Compute {
            entry.buffer.fill(0, entry.buffer.size(), 0xff)?;
        }
    }
    Ok(())
}

/// What the eval callback checks and records.
struct Observer {
    position: HashMap<TensorId, usize>,
    expected: Vec<Vec<u32>>,
    want: u8,
    stop_after: Option<u8>,
    delivered: usize,
    stopped: bool,
    mismatches: Vec<String>,
}

fn install_observer(
    sched: &mut Scheduler,
    graph: Graph<'_>,
    run: &RunSpec,
    expected: &Expected,
) -> Arc<Mutex<Observer>> {
    let observer = Arc::new(Mutex::new(Observer {
        position: graph.nodes().iter().enumerate().map(|(i, &t)| (t, i)).collect(),
        expected: expected.nodes.clone(),
        want: run.observe,
        stop_after: run.stop_after,
        delivered: 0,
        stopped: false,
        mismatches: Vec::new(),
    }));
    let shared = observer.clone();
    sched.set_eval_callback(Some(Box::new(move |ctx: &Context, node: TensorId, ask: bool| {
        let mut o = shared.lock().unwrap_or_else(|p| p.into_inner());
        let Some(&pos) = o.position.get(&node) else {
            o.mismatches.push(format!("the callback was handed {}, which is not a graph node", ctx.describe(node)));
            return false;
        };
        if ask {
            return o.want & (1 << (pos % 8)) != 0;
        }
        match bits(ctx, node) {
            Ok(got) if got == o.expected[pos] => {}
            Ok(got) => {
                let what = format!("node {pos} {} {}", ctx.get(node).map_or("?", |d| d.op.name()), ctx.describe(node));
                let diff = first_difference(&got, &o.expected[pos]);
                o.mismatches.push(format!("{what} handed over with wrong values: {diff}"));
            }
            Err(e) => o.mismatches.push(format!("node {pos} {} handed over unreadable: {e}", ctx.describe(node))),
        }
        o.delivered += 1;
        if o.stop_after.is_some_and(|k| o.delivered > k as usize) {
            o.stopped = true;
            return false;
        }
        true
    })));
    observer
}

/// Where two value lists first differ, in words.
fn first_difference(got: &[u32], want: &[u32]) -> String {
    match got.iter().zip(want).position(|(a, b)| a != b) {
        Some(i) => format!(
            "element {i} is {} instead of {} ({} elements differ)",
            f32::from_bits(got[i]),
            f32::from_bits(want[i]),
            got.iter().zip(want).filter(|(a, b)| a != b).count()
        ),
        None => format!("{} values instead of {}", got.len(), want.len()),
    }
}

fn sources(ctx: &Context, graph: Graph<'_>) -> Vec<[Option<TensorId>; MAX_SRC]> {
    graph.nodes().iter().map(|&t| ctx.get(t).map_or([None; MAX_SRC], |d| d.srcs)).collect()
}

/// Checks the splits of the current run against the graph: they cover the
/// node list in order, each backend supports its split's nodes, and pins
/// are honoured.
fn check_splits(
    ctx: &Context,
    graph: Graph<'_>,
    sched: &Scheduler,
    backends: &[Arc<dyn Backend>],
    pins: &[(TensorId, u8)],
) -> Result<(), Violation> {
    let mut next = 0;
    let mut backend_of = vec![u8::MAX; graph.n_nodes()];
    for (s, split) in sched.splits().iter().enumerate() {
        if split.nodes.start != next || split.nodes.end < split.nodes.start {
            return Err(format!("split {s} covers {:?}, expected to start at {next}", split.nodes));
        }
        next = split.nodes.end;
        let device = backends[split.backend.get()].device();
        for i in split.nodes.clone() {
            let t = graph.nodes()[i];
            backend_of[i] = split.backend.get() as u8;
            if ctx.get(t).is_some_and(|d| !d.op.is_empty()) && !device.supports_op(ctx, t) {
                return Err(format!("split {s} on {} holds {}, which it cannot run", device.name(), ctx.describe(t)));
            }
        }
    }
    if next != graph.n_nodes() {
        return Err(format!("splits cover {next} of {} nodes", graph.n_nodes()));
    }
    for &(t, b) in pins {
        let Some(i) = graph.nodes().iter().position(|&n| n == t) else { continue };
        let computes = ctx.get(t).is_some_and(|d| !d.op.is_empty());
        if computes && backend_of[i] != b {
            return Err(format!("{} pinned to backend {b} runs on backend {}", ctx.describe(t), backend_of[i]));
        }
        let reported = sched.tensor_backend(t).and_then(|r| backends.iter().position(|x| Arc::ptr_eq(x, r)));
        if reported != Some(b as usize) {
            return Err(format!("{} pinned to backend {b} reports backend {reported:?}", ctx.describe(t)));
        }
    }
    Ok(())
}

/// Runs `case` and checks every invariant; `Err` names the first one broken.
pub fn run_case(case: &SchedCase) -> Result<Outcome, Violation> {
    let mut reference = match Reference::new(case) {
        Ok(r) => r,
        Err(e) => return Err(format!("the program does not build: {e}")),
    };
    let journal = SharedJournal::default();
    let devices = CaseDevices::new(case, &journal).map_err(|e| format!("devices: {e}"))?;
    let backends = &devices.backends;

    let mut ctx = Context::new();
    let p = build_program(&mut ctx, case).map_err(|e| format!("the program does not build: {e}"))?;
    let home = |h: u8| &devices.bufts[h as usize % devices.bufts.len()];
    for (w, &t) in case.weights.iter().zip(&p.weights) {
        ctx.alloc_tensors(&[t], home(w.home), BufferUsage::Weights).map_err(|e| format!("weights: {e}"))?;
    }
    for (d, &t) in case.dsts.iter().zip(&p.dsts) {
        ctx.alloc_tensors(&[t], home(d.home), BufferUsage::Any).map_err(|e| format!("destinations: {e}"))?;
    }
    fill_constants(&mut ctx, case, &p).map_err(|e| format!("constants: {e}"))?;
    let base_tensors = ctx.tensor_count();

    let arena = GraphArena::new();
    let graph = ctx.build_graph(&arena, &p.outputs).map_err(|e| format!("graph: {e}"))?;
    let mut pins: Vec<(TensorId, u8)> = Vec::new();
    for &(v, b) in &case.pins {
        let t = p.values[v as usize % p.values.len()];
        pins.retain(|&(q, _)| q != t);
        pins.push((t, b % backends.len() as u8));
    }
    let expected_err = expected_error(&ctx, graph, backends, &pins);
    let original_sources = sources(&ctx, graph);

    let params = SchedulerParams {
        n_copies: case.n_copies,
        max_split_inputs: case.max_split_inputs,
        op_offload: case.op_offload,
        ..SchedulerParams::default()
    };
    let mut sched = Scheduler::new(backends, params).map_err(|e| format!("Scheduler::new: {e}"))?;
    for &(t, b) in &pins {
        sched.set_tensor_backend(t, &backends[b as usize]).map_err(|e| format!("set_tensor_backend: {e}"))?;
    }

    let mut splits = 0;
    for (r, run) in case.runs.iter().enumerate() {
        let expected = match reference.run(case, run.input_seed) {
            Ok(e) => e,
            Err(e) if r == 0 => return Ok(Outcome::Skipped(format!("the CPU alone cannot run it: {e}"))),
            Err(e) => return Err(format!("the reference failed in run {r} after succeeding before: {e}")),
        };
        if let Some(c) = run.set_n_copies {
            sched.set_n_copies(&mut ctx, c as usize).map_err(|e| format!("run {r}: set_n_copies({c}): {e}"))?;
        }
        if run.reset_first {
            // The placement's copies stay for a reuse; `release` (below) removes them.
            sched.reset(&mut ctx);
        }
        if run.rebuild_graph && run.input_seed % 2 == 0 {
            // Touch the context (a rename): the scheduler must place the
            // graph again instead of reusing the last placement.
            if let Some(&n) = graph.nodes().first() {
                let name = ctx.name(n).to_owned();
                ctx.set_name(n, &name).map_err(|e| format!("run {r}: rename: {e}"))?;
            }
        }
        let rebuilt = GraphArena::new();
        let graph = if run.rebuild_graph {
            ctx.build_graph(&rebuilt, &p.outputs).map_err(|e| format!("run {r}: graph: {e}"))?
        } else {
            graph
        };
        let placed = if run.reserve_first { sched.reserve(&mut ctx, graph).map(drop) } else { Ok(()) }
            .and_then(|()| sched.alloc_graph(&mut ctx, graph));
        match (placed, &expected_err) {
            (Err(_), Some(why)) => {
                sched.reset(&mut ctx);
                if ctx.tensor_count() != base_tensors {
                    return Err(format!(
                        "after a refused graph, {} tensors remain of {base_tensors}",
                        ctx.tensor_count()
                    ));
                }
                return Ok(Outcome::ExpectedError(why.clone()));
            }
            (Err(e), None) => return Err(format!("run {r}: scheduling failed: {e}")),
            (Ok(()), Some(why)) => {
                return Err(format!("run {r}: expected an error ({why}), but the graph was scheduled"));
            }
            (Ok(()), None) => {}
        }
        if sources(&ctx, graph) != original_sources {
            return Err(format!("run {r}: alloc_graph left the user's graph reading other sources"));
        }
        check_splits(&ctx, graph, &sched, backends, &pins).map_err(|e| format!("run {r}: {e}"))?;
        splits = sched.n_splits();

        poison_compute_memory(&ctx).map_err(|e| format!("run {r}: poison: {e}"))?;
        fill_inputs(&mut ctx, case, &p, run.input_seed).map_err(|e| format!("run {r}: inputs: {e}"))?;
        let observer = (run.observe != 0).then(|| install_observer(&mut sched, graph, run, &expected));
        if observer.is_none() {
            sched.set_eval_callback(None);
        }
        lock(&journal).computed.clear();
        let computed = if run.compute_async {
            sched.graph_compute_async(&mut ctx, graph).and_then(|()| sched.synchronize())
        } else {
            sched.graph_compute(&mut ctx, graph)
        };
        computed.map_err(|e| format!("run {r}: compute failed: {e}"))?;
        let stopped = match &observer {
            Some(o) => {
                let o = o.lock().unwrap_or_else(|p| p.into_inner());
                if let Some(m) = o.mismatches.first() {
                    return Err(format!("run {r}: {m}"));
                }
                o.stopped
            }
            None => false,
        };
        {
            let j = lock(&journal);
            if let Some(v) = j.violations.first() {
                return Err(format!("run {r}: {v}"));
            }
            for &t in graph.nodes() {
                let computes = ctx.get(t).is_some_and(|d| !d.op.is_empty());
                let times = j.computed.get(&t).copied().unwrap_or(0);
                let ok = if !computes {
                    times == 0
                } else if stopped {
                    times <= 1
                } else {
                    times == 1
                };
                if !ok {
                    return Err(format!("run {r}: {} computed {times} times", ctx.describe(t)));
                }
            }
            if j.computed.len() > graph.n_nodes() {
                return Err(format!("run {r}: backends computed tensors outside the graph"));
            }
        }
        if sources(&ctx, graph) != original_sources {
            return Err(format!("run {r}: compute left the user's graph reading other sources"));
        }
        if stopped {
            // The destinations now differ from the reference's; later runs would too.
            break;
        }
        for (i, &o) in p.outputs.iter().enumerate() {
            let got = bits(&ctx, o).map_err(|e| format!("run {r}: reading {}: {e}", ctx.describe(o)))?;
            if got != expected.outputs[i] {
                let diff = first_difference(&got, &expected.outputs[i]);
                return Err(format!("run {r}: output {} differs from the CPU-only result: {diff}", ctx.describe(o)));
            }
        }
        for (i, &d) in p.dsts.iter().enumerate() {
            let got = bits(&ctx, d).map_err(|e| format!("run {r}: reading {}: {e}", ctx.describe(d)))?;
            if got != expected.dsts[i] {
                let diff = first_difference(&got, &expected.dsts[i]);
                return Err(format!(
                    "run {r}: destination {} differs from the CPU-only result: {diff}",
                    ctx.describe(d)
                ));
            }
        }
    }
    sched.reset(&mut ctx);
    sched.release(&mut ctx).map_err(|e| format!("release: {e}"))?;
    if ctx.tensor_count() != base_tensors {
        return Err(format!("{} tensors after release, {base_tensors} before scheduling", ctx.tensor_count()));
    }
    if ctx.buffers().any(|(_, e)| e.usage == BufferUsage::Compute) {
        return Err("compute buffers remain after release".into());
    }
    Ok(Outcome::Checked { splits })
}
