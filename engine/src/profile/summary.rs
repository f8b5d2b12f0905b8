//! Time per op kind, from a profile's slices.

use super::{Slice, SliceKind};

/// One op kind's share of a profile.
#[derive(Debug, Clone, PartialEq)]
pub struct OpSummary {
    /// The op's name (`MUL_MAT`), or `split <backend>` for splits of a
    /// backend that timed no nodes of its own.
    pub op: String,
    /// Slices counted.
    pub count: u64,
    /// Their total duration, nanoseconds.
    pub total_ns: u64,
    /// Their bytes read and written.
    pub bytes: u64,
    /// Their floating-point operations.
    pub flops: u64,
}

impl OpSummary {
    /// Achieved bytes per second.
    pub fn bytes_per_s(&self) -> f64 {
        self.bytes as f64 / (self.total_ns.max(1) as f64 * 1e-9)
    }

    /// Achieved floating-point operations per second.
    pub fn flops_per_s(&self) -> f64 {
        self.flops as f64 / (self.total_ns.max(1) as f64 * 1e-9)
    }
}

/// Node slices summed per op kind, most time first. Tasks are left out
/// (they run inside their node's slice). A process that recorded splits but
/// no nodes (a GPU backend) counts as one row, `split <name>`, named from
/// `processes` ([`super::Profiler::processes`]).
pub fn summarize_ops(slices: &[Slice], processes: &[String]) -> Vec<OpSummary> {
    let mut rows: Vec<OpSummary> = Vec::new();
    let mut add = |op: &str, s: &Slice| match rows.iter_mut().find(|r| r.op == op) {
        Some(r) => {
            r.count += 1;
            r.total_ns += s.duration_ns();
            r.bytes += s.bytes;
            r.flops += s.flops;
        }
        None => rows.push(OpSummary {
            op: op.to_owned(),
            count: 1,
            total_ns: s.duration_ns(),
            bytes: s.bytes,
            flops: s.flops,
        }),
    };
    let timed_nodes = |p: u16| slices.iter().any(|s| s.kind == SliceKind::Node && s.process == p);
    for s in slices {
        match s.kind {
            SliceKind::Node => add(s.op, s),
            SliceKind::Split if !timed_nodes(s.process) => {
                let name = processes.get(usize::from(s.process)).map_or("?", String::as_str);
                add(&format!("split {name}"), s)
            }
            _ => {}
        }
    }
    rows.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then_with(|| a.op.cmp(&b.op)));
    rows
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Name;

    fn slice(kind: SliceKind, process: u16, op: &'static str, ns: u64, bytes: u64) -> Slice {
        Slice { kind, process, thread: 1, op, name: Name::EMPTY, index: 0, start_ns: 0, end_ns: ns, bytes, flops: 0 }
    }

    #[test]
    fn nodes_sum_per_op_and_untimed_backends_count_by_split() {
        let slices = [
            slice(SliceKind::Split, 0, "split", 100, 0),
            slice(SliceKind::Node, 0, "MUL_MAT", 30, 3000),
            slice(SliceKind::Task, 0, "MUL_MAT", 15, 0),
            slice(SliceKind::Node, 0, "MUL_MAT", 50, 5000),
            slice(SliceKind::Node, 0, "ADD", 10, 10),
            slice(SliceKind::Split, 1, "split", 70, 0),
        ];
        let rows = summarize_ops(&slices, &["CPU".into(), "wgpu0".into()]);
        let ops: Vec<_> = rows.iter().map(|r| (r.op.as_str(), r.count, r.total_ns)).collect();
        assert_eq!(ops, [("MUL_MAT", 2, 80), ("split wgpu0", 1, 70), ("ADD", 1, 10)]);
        assert!((rows[0].bytes_per_s() - 8000.0 / 80e-9).abs() < 1.0);
    }
}
