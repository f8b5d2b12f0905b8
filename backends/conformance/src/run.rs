//! Running cases on a backend: build, allocate in the backend's memory,
//! fill inputs, poison outputs, compute, read back, and compare with the
//! reference (test mode) or time it (perf mode).

use std::io::Write;
use std::time::{Duration, Instant};

use gantry_engine::{Backend, BufferType, BufferUsage, Context, Graph, GraphArena, Result, TensorId};

use super::case::{Built, Case};
use super::compare::{Verdict, compare};
use super::{cases, reference};
use gantry_cpu as cpu;

/// What the backend under test is compared with.
#[derive(Clone, Copy)]
pub enum Reference<'a> {
    /// The f64 scalar implementation of each op (for the CPU backend).
    Scalar,
    /// Another backend's results (the CPU backend, for every other backend).
    Backend(&'a dyn Backend),
}

/// Whether to check results or measure speed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Compare every test case with the reference.
    Test,
    /// Time the perf cases (larger shapes) on the backend alone.
    Perf,
}

/// Which cases to run.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// Op names (ggml's, any case); empty means every op.
    pub ops: Vec<String>,
    /// Only cases whose name contains this.
    pub name_contains: Option<String>,
}

impl Filter {
    /// Every case.
    pub fn all() -> Self {
        Self::default()
    }

    /// The cases of the comma-separated op names in `ops` (`"ADD,MUL_MAT"`).
    pub fn ops(ops: &str) -> Self {
        Self {
            ops: ops.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned).collect(),
            name_contains: None,
        }
    }

    /// Also requires `part` in the case name.
    pub fn with_name(mut self, part: &str) -> Self {
        self.name_contains = Some(part.to_owned());
        self
    }

    /// The names of [`Filter::ops`] that no case of the suite tests (a
    /// misspelt op would otherwise select nothing and pass).
    pub fn unknown_ops(&self) -> Vec<&str> {
        let all = cases();
        self.ops.iter().filter(|o| !all.iter().any(|c| o.eq_ignore_ascii_case(c.op))).map(String::as_str).collect()
    }

    /// Whether `case` is selected.
    pub fn matches(&self, case: &Case) -> bool {
        (self.ops.is_empty() || self.ops.iter().any(|o| o.eq_ignore_ascii_case(case.op)))
            && self.name_contains.as_ref().is_none_or(|p| case.name.contains(p.as_str()))
    }
}

/// Counts of a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Summary {
    /// Cases that agreed with the reference (or, in perf mode, ran).
    pub passed: usize,
    /// Cases that disagreed or failed to run.
    pub failed: usize,
    /// Cases the backend (or the reference backend) does not support.
    pub skipped: usize,
}

/// How one case ended.
enum Outcome {
    Pass(String),
    Fail(String),
    Skip(String),
}

/// Runs the selected cases on `backend`, writing one line per case and
/// ending with the line `N passed, N failed`. Unsupported cases are
/// reported as skipped. Errors writing to `out` are ignored.
pub fn run(
    backend: &dyn Backend,
    reference: Reference<'_>,
    filter: &Filter,
    mode: Mode,
    out: &mut dyn Write,
) -> Summary {
    let against = match reference {
        Reference::Scalar => "the f64 reference".to_owned(),
        Reference::Backend(r) => format!("backend {}", r.name()),
    };
    let _ = match mode {
        Mode::Test => {
            writeln!(out, "Testing {} ({}) against {against}", backend.name(), backend.device().description())
        }
        Mode::Perf => writeln!(out, "Timing {} ({})", backend.name(), backend.device().description()),
    };
    let mut summary = Summary::default();
    for case in cases().iter().filter(|c| filter.matches(c) && c.perf_only == (mode == Mode::Perf)) {
        let outcome = match mode {
            Mode::Test => test_case(case, backend, reference),
            Mode::Perf => perf_case(case, backend),
        };
        let _ = match &outcome {
            Outcome::Pass(note) => {
                summary.passed += 1;
                writeln!(out, "  {}: OK{note}", case.name)
            }
            Outcome::Fail(why) => {
                summary.failed += 1;
                writeln!(out, "  {}: FAIL {why}", case.name)
            }
            Outcome::Skip(why) => {
                summary.skipped += 1;
                writeln!(out, "  {}: not supported ({why})", case.name)
            }
        };
    }
    let _ = writeln!(out, "{} skipped (not supported)", summary.skipped);
    let _ = writeln!(out, "{} passed, {} failed", summary.passed, summary.failed);
    summary
}

fn test_case(case: &Case, backend: &dyn Backend, reference: Reference<'_>) -> Outcome {
    let actual = match on_backend(case, backend, |ctx, _, out| read_values(ctx, out)) {
        Ok(Some(v)) => v,
        Ok(None) => return Outcome::Skip(backend.name().to_owned()),
        Err(e) => return Outcome::Fail(format!("on {}: {e}", backend.name())),
    };
    let expected = match reference {
        Reference::Scalar => on_scalar_reference(case),
        Reference::Backend(r) => match on_backend(case, r, |ctx, _, out| read_values(ctx, out)) {
            Ok(Some(v)) => Ok(v),
            Ok(None) => return Outcome::Skip(format!("reference {}", r.name())),
            Err(e) => Err(e),
        },
    };
    let expected = match expected {
        Ok(v) => v,
        Err(e) => return Outcome::Fail(format!("reference: {e}")),
    };
    match compare(&expected, &actual, case.tolerance) {
        Verdict::Pass(_) => Outcome::Pass(String::new()),
        Verdict::Fail(why) => Outcome::Fail(why),
    }
}

fn perf_case(case: &Case, backend: &dyn Backend) -> Outcome {
    let timed = on_backend(case, backend, |ctx, graph, _| {
        let bytes: usize = graph
            .leafs()
            .iter()
            .chain(graph.nodes())
            .filter_map(|&t| ctx.get(t))
            .filter(|d| !d.is_view())
            .map(|d| d.nbytes())
            .sum();
        let mut runs = 0u32;
        let mut best = f64::INFINITY;
        let start = Instant::now();
        while runs < 2 || (start.elapsed() < Duration::from_millis(300) && runs < 1000) {
            let run_start = Instant::now();
            backend.graph_compute(ctx, graph).into_result()?;
            backend.synchronize()?;
            best = best.min(run_start.elapsed().as_secs_f64());
            runs += 1;
        }
        Ok((start.elapsed().as_secs_f64() / runs as f64, best, runs, bytes))
    });
    match timed {
        Ok(Some((per_run, best, runs, bytes))) => {
            let rate = if case.flops > 0.0 {
                format!("{:.2} GFLOP/s", case.flops / per_run / 1e9)
            } else {
                let bytes = if case.bytes > 0.0 { case.bytes } else { bytes as f64 };
                format!("{:.2} GB/s", bytes / per_run / 1e9)
            };
            // The best run shows the cost on a quiet machine when others share it.
            Outcome::Pass(format!(" {runs} runs, {:.1} us/run (best {:.1}), {rate}", per_run * 1e6, best * 1e6))
        }
        Ok(None) => Outcome::Skip(backend.name().to_owned()),
        Err(e) => Outcome::Fail(format!("on {}: {e}", backend.name())),
    }
}

fn read_values(ctx: &Context, t: TensorId) -> Result<Vec<f64>> {
    Ok(ctx.read_f32(t)?.into_iter().map(f64::from).collect())
}

/// Builds the case in a fresh context and, if `backend` supports every
/// node, allocates it in the backend's memory, fills and poisons it,
/// computes once and hands the result to `then`. `None` when unsupported.
fn on_backend<R>(
    case: &Case,
    backend: &dyn Backend,
    then: impl FnOnce(&Context, Graph<'_>, TensorId) -> Result<R>,
) -> Result<Option<R>> {
    on_backend_observed(case, backend, |_, _, _| Ok(()), |ctx, graph, out, ()| then(ctx, graph, out))
}

/// [`on_backend`] that also shows the filled graph to `before` ahead of the
/// compute (which may overwrite inputs: in-place ops, CPY, SET_ROWS) and
/// hands what it returned to `then`.
pub(crate) fn on_backend_observed<B, R>(
    case: &Case,
    backend: &dyn Backend,
    before: impl FnOnce(&Context, Graph<'_>, TensorId) -> Result<B>,
    then: impl FnOnce(&Context, Graph<'_>, TensorId, B) -> Result<R>,
) -> Result<Option<R>> {
    let mut ctx = Context::new();
    let built = (case.build)(&mut ctx)?;
    let arena = GraphArena::new();
    let graph = ctx.build_graph(&arena, &[built.output])?;
    let device = backend.device();
    if graph.nodes().iter().any(|&n| !device.supports_op(&ctx, n)) {
        return Ok(None);
    }
    let buft = device.buffer_type();
    prepare(&mut ctx, &graph, &built, case, &buft)?;
    let seen = before(&ctx, graph, built.output)?;
    backend.graph_compute(&ctx, graph).into_result()?;
    backend.synchronize()?;
    then(&ctx, graph, built.output, seen).map(Some)
}

/// Allocates every tensor of the graph in `buft`, fills the leafs from the
/// case's seeded generator and fills computed tensors with NaN bytes, so an
/// element a backend forgets to write fails the comparison.
fn prepare(
    ctx: &mut Context,
    graph: &Graph<'_>,
    built: &Built,
    case: &Case,
    buft: &std::sync::Arc<dyn BufferType>,
) -> Result<()> {
    ctx.alloc_tensors(graph.leafs(), buft, BufferUsage::Weights)?;
    ctx.alloc_tensors(graph.nodes(), buft, BufferUsage::Compute)?;
    for (i, &leaf) in graph.leafs().iter().enumerate() {
        let d = *ctx.desc(leaf)?;
        let mut rng = gantry_engine::SplitMix64::from_name(&case.name, i as u64);
        if let Some(bytes) = crate::lookup_bytes::lookup_bytes(d.dtype, d.nbytes(), &mut rng) {
            ctx.set_bytes(leaf, &bytes)?;
            continue;
        }
        let values = built.init_of(leaf, d.dtype).generate(&d, &mut rng);
        ctx.set_f32(leaf, &values)?;
    }
    for &node in graph.nodes() {
        let d = *ctx.desc(node)?;
        if !d.is_view() {
            ctx.fill_tensor_bytes(node, 0, d.nbytes(), 0xff)?;
        }
    }
    Ok(())
}

/// The case evaluated by the f64 reference, over inputs in CPU memory.
fn on_scalar_reference(case: &Case) -> Result<Vec<f64>> {
    let mut ctx = Context::new();
    let built = (case.build)(&mut ctx)?;
    let arena = GraphArena::new();
    let graph = ctx.build_graph(&arena, &[built.output])?;
    let buft = cpu::buffer_type();
    prepare(&mut ctx, &graph, &built, case, &buft)?;
    reference::evaluate(&ctx, &graph, built.output)
        .map_err(|e| e.within_backend("f64 reference", "evaluating the case"))
}
