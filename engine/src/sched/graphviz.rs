//! Graphviz output of a scheduled graph: nodes coloured by backend, splits
//! as clusters, fused groups as blue clusters inside them, copies as dashed
//! red edges.

use std::fmt::Write;

use gantry_arenas::TensorId;
use slotmap::Key as _;

use super::BackendSet;
use super::split::SplitTables;
use super::tables::Assignments;
use crate::alloc::TensorTable;
use crate::{Context, Graph};

const COLORS: [&str; 8] = ["#8dd3c7", "#fdb462", "#bebada", "#fb8072", "#80b1d3", "#b3de69", "#fccde5", "#d9d9d9"];

fn node_id(t: TensorId) -> String {
    format!("t{}", t.data().as_ffi())
}

/// The graph as Graphviz `dot`: one cluster per split, nodes filled with
/// their backend's colour, leafs as boxes, copies as dashed edges labelled
/// with the copy's name.
pub fn to_dot(
    ctx: &Context,
    graph: Graph<'_>,
    set: &BackendSet,
    tables: &SplitTables,
    (assigned, table): (&Assignments, &TensorTable),
) -> String {
    let mut s = String::from("digraph gantry {\n  rankdir=TB;\n  node [style=filled, fontname=\"monospace\"];\n");
    let color = |t: TensorId| assigned.of(table, t).map_or("white", |b| COLORS[b.get() % COLORS.len()]);
    let label = |t: TensorId| {
        let d = ctx.get(t);
        let name = ctx.name(t);
        let op = d.map_or("?", |d| d.op.name());
        let ne = d.map(|d| d.ne).unwrap_or_default();
        format!("{}\\n{op} {:?}", if name.is_empty() { format!("{:?}", t) } else { name.to_owned() }, ne)
    };
    // Legend: one entry per backend.
    let _ = writeln!(s, "  subgraph cluster_legend {{ label=\"backends\";");
    for b in set.indices() {
        let _ = writeln!(
            s,
            "    legend{} [label=\"{}\", fillcolor=\"{}\", shape=box];",
            b.get(),
            set.backend(b).name(),
            COLORS[b.get() % COLORS.len()]
        );
    }
    let _ = writeln!(s, "  }}");
    for &leaf in graph.leafs() {
        let _ =
            writeln!(s, "  {} [label=\"{}\", shape=box, fillcolor=\"{}\"];", node_id(leaf), label(leaf), color(leaf));
    }
    for (i, split) in tables.splits.iter().enumerate() {
        let _ = writeln!(
            s,
            "  subgraph cluster_split{i} {{\n    label=\"split {i}: {}\"; style=dashed;",
            set.backend(split.backend).name()
        );
        let opt = &tables.optimized;
        let nodes = opt.split_nodes(tables, i);
        let nodes = if nodes.len() == split.nodes.len() { nodes } else { &graph.nodes()[split.nodes.clone()] };
        for (k, &n) in nodes.iter().enumerate() {
            let group = opt.split_fused(i).iter().find(|g| g.start as usize == k);
            if let Some(g) = group {
                let _ = writeln!(
                    s,
                    "    subgraph cluster_fused{i}_{k} {{\n      label=\"fused {}\"; style=\"bold,rounded\"; color=blue;",
                    g.kind.name()
                );
                for &m in &nodes[g.range()] {
                    let _ = writeln!(
                        s,
                        "      {} [label=\"{}\", fillcolor=\"{}\", penwidth=2, color=blue];",
                        node_id(m),
                        label(m),
                        color(m)
                    );
                }
                let _ = writeln!(s, "    }}");
            }
            if opt.group_of(i, k).is_some() {
                continue;
            }
            let _ = writeln!(s, "    {} [label=\"{}\", fillcolor=\"{}\"];", node_id(n), label(n), color(n));
        }
        let _ = writeln!(s, "  }}");
    }
    // Edges: a rewritten source is drawn from the original, dashed, through its copy's name.
    for &n in graph.nodes() {
        let Some(d) = ctx.get(n) else { continue };
        for (j, src) in d.srcs.iter().enumerate() {
            let Some(src) = *src else { continue };
            match tables.rewrites.iter().find(|r| r.node == n && r.slot as usize == j) {
                Some(r) => {
                    let _ = writeln!(
                        s,
                        "  {} -> {} [style=dashed, color=red, label=\"{}\"];",
                        node_id(r.original),
                        node_id(n),
                        ctx.name(r.copy)
                    );
                }
                None => {
                    let _ = writeln!(s, "  {} -> {};", node_id(src), node_id(n));
                }
            }
        }
    }
    s.push_str("}\n");
    s
}
