//! What the scheduler did, in words ([`super::SchedulerParams::debug`],
//! `GANTRY_SCHED_DEBUG` through [`super::SchedulerParams::from_env`]).

use std::fmt::Write;

use gantry_arenas::TensorId;

use super::BackendSet;
use super::backend_set::is_view_op;
use super::split::SplitTables;
use super::tables::Assignments;
use crate::alloc::TensorTable;
use crate::{Context, Graph};

/// Reads `GANTRY_SCHED_DEBUG`: 0 (off, also when unset or not a number), 1
/// (splits), 2 (splits and every node). Called by
/// [`super::SchedulerParams::from_env`] only.
pub fn debug_level_from_env() -> u8 {
    std::env::var("GANTRY_SCHED_DEBUG").ok().and_then(|v| v.trim().parse().ok()).unwrap_or(0)
}

/// Human-readable byte count (`1.5M`).
pub fn fmt_bytes(n: usize) -> String {
    const UNITS: [&str; 5] = ["B", "K", "M", "G", "T"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 { format!("{n}B") } else { format!("{v:.1}{}", UNITS[u]) }
}

fn tensor_label(ctx: &Context, t: TensorId) -> String {
    let name = ctx.name(t);
    let size = ctx.get(t).map_or(0, |d| d.nbytes());
    if name.is_empty() { format!("{t:?} ({})", fmt_bytes(size)) } else { format!("{name} ({})", fmt_bytes(size)) }
}

/// The splits (level 1, with their count of fused groups) and every node,
/// in the order it runs, with its backend and the system step that chose
/// it ([`super::Cause::label`]) and a `## FUSED` line before each fused
/// group (level 2), as ggml's
/// `ggml_backend_sched_print_assignments`.
pub fn describe_splits(
    ctx: &Context,
    graph: Graph<'_>,
    set: &BackendSet,
    tables: &SplitTables,
    (assigned, table): (&Assignments, &TensorTable),
    level: u8,
) -> String {
    let mut s = String::new();
    let backend_name = |t: TensorId| assigned.of(table, t).map_or("NULL", |b| set.backend(b).name());
    for (i, split) in tables.splits.iter().enumerate() {
        let inputs = &tables.inputs[split.inputs.clone()];
        let in_bytes: usize = inputs.iter().filter_map(|&t| ctx.get(t)).map(|d| d.nbytes()).sum();
        let _ = write!(
            s,
            "## SPLIT #{i}: {} # {} nodes, {} inputs ({})",
            set.backend(split.backend).name(),
            split.nodes.len(),
            inputs.len(),
            fmt_bytes(in_bytes)
        );
        let fused = tables.optimized.split_fused(i);
        if !fused.is_empty() {
            let _ = write!(s, ", {} fused groups", fused.len());
        }
        for &t in inputs {
            let _ = write!(s, " [{}]", tensor_label(ctx, t));
        }
        s.push('\n');
        if level < 2 {
            continue;
        }
        let opt = &tables.optimized;
        let nodes = opt.split_nodes(tables, i);
        let nodes = if nodes.len() == split.nodes.len() { nodes } else { &graph.nodes()[split.nodes.clone()] };
        for (k, &n) in nodes.iter().enumerate() {
            let Some(d) = ctx.get(n) else { continue };
            if let Some(g) = opt.split_fused(i).iter().find(|g| g.start as usize == k) {
                let _ = writeln!(
                    s,
                    "## FUSED {} (nodes #{}..#{})",
                    g.kind.name(),
                    split.nodes.start + k,
                    split.nodes.start + k + g.len as usize - 1
                );
            }
            let view = if is_view_op(&d.op) { " (view)" } else { "" };
            let _ = write!(
                s,
                "node #{:4} ({:>14}): {:<32} [{:>8} {:>19}]{view}:",
                split.nodes.start + k,
                d.op.name(),
                tensor_label(ctx, n),
                backend_name(n),
                assigned.cause_of(table, n).label()
            );
            for src in d.sources() {
                let _ = write!(
                    s,
                    " {} [{} {}]",
                    tensor_label(ctx, src),
                    backend_name(src),
                    assigned.cause_of(table, src).label()
                );
            }
            s.push('\n');
        }
    }
    s
}
