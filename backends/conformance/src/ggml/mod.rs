//! Checking Gantry's CPU backend against ggml's own (`scripts/ggml_parity`):
//! every test case of the suite whose op ggml has is written as a case file
//! for a C driver built against a ggml checkout, computed there by ggml's
//! CPU backend and here by Gantry's on the same inputs, and the two results
//! are compared by test-backend-ops' normalized mean squared error against
//! ggml's own tolerance for the op.
//!
//! The f64 reference encodes a reading of ggml; this compares with ggml
//! itself.

mod case_file;
mod measure;
mod op_params;
mod skips;
mod tolerance;

use std::collections::{BTreeMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use gantry_engine::{Context, Graph, Op, Result, TensorDesc, TensorId};

pub use case_file::case_file;
pub use op_params::{N_OP_PARAMS, ggml_op_params};
pub use tolerance::{ToleranceFacts, ggml_tolerance};

use crate::{Case, Filter, cases};

/// Where the driver is and how it runs.
#[derive(Debug, Clone)]
pub struct Driver {
    /// The driver binary (`scripts/ggml_parity/driver.c`, built by run.sh).
    pub path: PathBuf,
    /// A folder for the case files and ggml's outputs.
    pub dir: PathBuf,
    /// Threads ggml computes with.
    pub threads: usize,
}

/// One op's line of the table.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OpRow {
    /// Cases compared.
    pub compared: usize,
    /// The largest normalized mean squared error among them.
    pub worst: f64,
    /// ggml's smallest and largest tolerance over the op's cases (they differ
    /// where the tolerance depends on dtypes or sizes: CPY, SET_ROWS).
    pub tolerance: (f64, f64),
    /// Cases over ggml's tolerance.
    pub over: usize,
}

/// What a parity run found.
#[derive(Debug, Clone, Default)]
pub struct Parity {
    /// Per op (ggml's name), in name order.
    pub ops: BTreeMap<&'static str, OpRow>,
    /// Cases over tolerance: name, error, tolerance.
    pub over: Vec<(String, f64, f64)>,
    /// Cases not compared, and why (an op or a layout ggml does not have).
    pub not_compared: Vec<(String, String)>,
    /// Cases that failed to run on either side, and why.
    pub failed: Vec<(String, String)>,
    /// The driver's last line: ggml's version and commit, cases run.
    pub ggml: String,
}

impl Parity {
    /// Whether every compared case is within tolerance and none failed.
    pub fn ok(&self) -> bool {
        self.over.is_empty() && self.failed.is_empty()
    }
}

/// The op names ggml knows (its ops, unary ops and gated linear units), as
/// the driver lists them.
pub fn ggml_ops(driver: &Path) -> std::io::Result<HashSet<String>> {
    let out = Command::new(driver).arg("--ops").output()?;
    if !out.status.success() {
        return Err(std::io::Error::other(format!("{} --ops: {}", driver.display(), out.status)));
    }
    Ok(String::from_utf8_lossy(&out.stdout).lines().map(str::to_owned).collect())
}

/// A case computed by Gantry, waiting for ggml's result.
struct Pending {
    case: Case,
    file: String,
    gantry: Vec<f64>,
    out_desc: TensorDesc,
    tolerance: f64,
    /// For ARGSORT and TOP_K: the values sorted (logical order), and whether
    /// the result's order is specified (ARGSORT's is, TOP_K's is not).
    sorted: Option<(Vec<f32>, bool)>,
}

/// What the graph shows before the compute.
struct Inputs {
    file: Vec<u8>,
    facts: ToleranceFacts,
    /// Why ggml cannot compute the case, if it cannot.
    lacks: Option<&'static str>,
}

/// Runs the test cases `filter` selects through ggml (the driver) and
/// Gantry's CPU backend, writing progress and the table to `out`.
pub fn parity(driver: &Driver, filter: &Filter, out: &mut dyn Write) -> std::io::Result<Parity> {
    let known = ggml_ops(&driver.path)?;
    let cpu = gantry_cpu::CpuBackend::new().map_err(std::io::Error::other)?;
    let mut parity = Parity::default();
    let mut pending = Vec::new();
    for (i, case) in cases().into_iter().enumerate().filter(|(_, c)| !c.perf_only && filter.matches(c)) {
        if !known.contains(case.op) {
            parity.not_compared.push((case.name.clone(), format!("ggml has no op {}", case.op)));
            continue;
        }
        let file = format!("{i:05}");
        let observed = crate::run::on_backend_observed(
            &case,
            &cpu,
            |ctx, graph, output| inputs(ctx, graph, output, &case.name),
            computed,
        );
        match observed {
            Ok(Some((inputs, gantry, out_desc, sorted))) => {
                if let Some(why) = inputs.lacks {
                    parity.not_compared.push((case.name.clone(), why.to_owned()));
                    continue;
                }
                let path = driver.dir.join(format!("{file}.case"));
                std::fs::write(&path, &inputs.file)?;
                let tolerance = ggml_tolerance(case.op, inputs.facts);
                pending.push(Pending { case, file, gantry, out_desc, tolerance, sorted });
            }
            Ok(None) => parity.not_compared.push((case.name.clone(), "Gantry's CPU backend lacks it".into())),
            Err(e) => parity.failed.push((case.name.clone(), format!("on Gantry: {e}"))),
        }
    }
    let run = Command::new(&driver.path).arg(&driver.dir).arg(driver.threads.to_string()).output()?;
    parity.ggml = String::from_utf8_lossy(&run.stdout).lines().last().unwrap_or("").to_owned();
    let _ = writeln!(out, "{}", parity.ggml);
    for p in pending {
        let err_path = driver.dir.join(format!("{}.err", p.file));
        if let Ok(why) = std::fs::read_to_string(&err_path) {
            // SIGABRT: ggml's own GGML_ASSERT or GGML_ABORT, its CPU
            // backend refusing the layout or types; anything else is a
            // failure (of the driver or of ggml).
            match why.trim().strip_prefix("ggml stopped with signal 6: ") {
                Some(msg) => {
                    let at = msg.find("ggml/src/").unwrap_or(0);
                    let why = format!("ggml's CPU backend stops: {}", &msg[at..]);
                    parity.not_compared.push((p.case.name.clone(), why));
                }
                None => parity.failed.push((p.case.name.clone(), format!("on ggml: {}", why.trim()))),
            }
            continue;
        }
        let ggml = match std::fs::read(driver.dir.join(format!("{}.out", p.file))) {
            Ok(bytes) => match ggml_result(&p.out_desc, &bytes) {
                Some(v) => v,
                None => {
                    parity.failed.push((p.case.name.clone(), format!("ggml wrote {} bytes", bytes.len())));
                    continue;
                }
            },
            Err(e) => {
                parity.failed.push((p.case.name.clone(), format!("no result from ggml: {e}")));
                continue;
            }
        };
        let err = match &p.sorted {
            Some((values, ordered)) => measure::sort_error(p.out_desc.ne[0], *ordered, values, &ggml, &p.gantry),
            None => crate::compare::nmse(&ggml, &p.gantry),
        };
        let row =
            parity.ops.entry(p.case.op).or_insert(OpRow { tolerance: (p.tolerance, p.tolerance), ..OpRow::default() });
        row.compared += 1;
        row.tolerance = (row.tolerance.0.min(p.tolerance), row.tolerance.1.max(p.tolerance));
        let err = err.unwrap_or(f64::INFINITY);
        row.worst = row.worst.max(err);
        // NaN never passes.
        if err.is_nan() || err > p.tolerance {
            row.over += 1;
            parity.over.push((p.case.name.clone(), err, p.tolerance));
        }
    }
    print_table(&parity, out);
    Ok(parity)
}

/// ggml's result as numbers: its bytes in Gantry's layout, except
/// COUNT_EQUAL's, one I64 where Gantry has an I32 (`case_file` says so).
fn ggml_result(out: &TensorDesc, bytes: &[u8]) -> Option<Vec<f64>> {
    if out.op == Op::CountEqual {
        let count = i64::from_le_bytes(bytes.try_into().ok()?);
        return Some(vec![count as f64]);
    }
    let v = gantry_engine::convert::strided_to_f32(out, bytes)?;
    Some(v.into_iter().map(f64::from).collect())
}

/// The case file, and the facts ggml's tolerance depends on.
fn inputs(ctx: &Context, graph: Graph<'_>, output: TensorId, name: &str) -> Result<Inputs> {
    let leaf_bytes = graph.leafs().iter().map(|&l| ctx.get_bytes(l)).collect::<Result<Vec<_>>>()?;
    let file = case_file(ctx, graph, output, name, &leaf_bytes)?;
    let d = ctx.desc(output)?;
    let src = |slot: usize| d.srcs[slot].map(|s| ctx.desc(s)).transpose();
    let src0 = src(0)?;
    let facts = ToleranceFacts {
        src_dtype: src0.map_or(d.dtype, |s| s.dtype),
        dst_dtype: d.dtype,
        // CPY: the elements copied; SET_ROWS: the rows written (src0).
        elements: src0.map_or(d.nelements(), TensorDesc::nelements),
    };
    Ok(Inputs { file, facts, lacks: skips::ggml_lacks(ctx, output)? })
}

type Computed = (Inputs, Vec<f64>, TensorDesc, Option<(Vec<f32>, bool)>);

/// Gantry's result, its layout, and what sort ops sorted.
fn computed(ctx: &Context, _graph: Graph<'_>, output: TensorId, inputs: Inputs) -> Result<Computed> {
    let d = *ctx.desc(output)?;
    let values = ctx.read_f32(output)?.into_iter().map(f64::from).collect();
    let sorted = match (d.op, d.srcs[0]) {
        (Op::Argsort { .. }, Some(src)) => Some((ctx.read_f32(src)?, true)),
        (Op::TopK, Some(src)) => Some((ctx.read_f32(src)?, false)),
        _ => None,
    };
    Ok((inputs, values, d, sorted))
}

/// Prints the per-op table, the cases over tolerance, not compared or
/// failed, and a total line.
pub fn print_table(p: &Parity, out: &mut dyn Write) {
    // As wide as the longest name (TIMESTEP_EMBEDDING), so the columns line up.
    let w = p.ops.keys().map(|op| op.len()).max().unwrap_or(0).max(16);
    let _ = writeln!(out, "{:<w$} {:>6} {:>12} {:>21} {:>5}", "op", "cases", "worst NMSE", "ggml tolerance", "over");
    let (mut cases, mut over) = (0, 0);
    for (op, row) in &p.ops {
        let tol = if row.tolerance.0 == row.tolerance.1 {
            format!("{:.0e}", row.tolerance.0)
        } else {
            format!("{:.0e} .. {:.0e}", row.tolerance.0, row.tolerance.1)
        };
        let _ = writeln!(out, "{op:<w$} {:>6} {:>12.3e} {tol:>21} {:>5}", row.compared, row.worst, row.over);
        cases += row.compared;
        over += row.over;
    }
    for (name, err, tol) in &p.over {
        let _ = writeln!(out, "over: {name}: NMSE {err:.3e} > {tol:.1e}");
    }
    for (name, why) in &p.not_compared {
        let _ = writeln!(out, "not compared: {name}: {why}");
    }
    for (name, why) in &p.failed {
        let _ = writeln!(out, "failed: {name}: {why}");
    }
    let _ = writeln!(
        out,
        "{} ops, {cases} cases compared, {over} over ggml's tolerance, {} not compared, {} failed",
        p.ops.len(),
        p.not_compared.len(),
        p.failed.len()
    );
}
