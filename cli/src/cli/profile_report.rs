//! `gantry bench --profile`: where a decode step's time goes, per op kind
//! (a step: one decode token, or one token for each of `--parallel` sequences).

use gantry::profile::{OpSummary, Slice, summarize_ops};

/// Prints, per op kind, calls and time per step (`n_steps` of them, each
/// one `unit`), the share of the steps' wall time, and the achieved GB/s and GFLOP/s (of
/// [`gantry::profile::node_cost`]'s model), then what the nodes leave out.
pub fn print_profile(
    out: &mut dyn std::io::Write,
    slices: &[Slice],
    processes: &[String],
    n_steps: usize,
    unit: &str,
    wall_ns: u64,
) -> std::io::Result<()> {
    let rows: Vec<OpSummary> = summarize_ops(slices, processes);
    let n = n_steps.max(1) as f64;
    let wall = wall_ns.max(1) as f64;
    writeln!(out, "| op | calls/step | µs/step | share | GB/s | GFLOP/s |")?;
    writeln!(out, "| --- | ---: | ---: | ---: | ---: | ---: |")?;
    let mut timed = 0;
    for r in &rows {
        timed += r.total_ns;
        writeln!(
            out,
            "| {} | {:.0} | {:.1} | {:.1}% | {:.1} | {:.1} |",
            r.op,
            r.count as f64 / n,
            r.total_ns as f64 / n / 1e3,
            100.0 * r.total_ns as f64 / wall,
            r.bytes_per_s() / 1e9,
            r.flops_per_s() / 1e9
        )?;
    }
    let other = wall_ns.saturating_sub(timed);
    writeln!(
        out,
        "| (outside nodes: graph set-up, scheduler, logits) | | {:.1} | {:.1}% | | |",
        other as f64 / n / 1e3,
        100.0 * other as f64 / wall
    )?;
    writeln!(out, "profile: {n_steps} {unit}, {:.1} µs each", wall / n / 1e3)
}
