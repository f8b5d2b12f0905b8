//! A profile as a Chrome trace (the JSON "trace event" format that Perfetto
//! and `chrome://tracing` open): one process per backend, one thread track
//! per OS thread that recorded on it, a complete event (`"ph": "X"`) per
//! split, copy, event wait, node and task, and metadata events (`"ph": "M"`)
//! naming the processes and threads.

use std::collections::BTreeSet;
use std::path::Path;

use gantry_engine::profile::{Profiler, Slice, SliceKind};
use serde_json::{Value, json};

use crate::{Error, Result};

fn event_name(s: &Slice) -> String {
    match s.kind {
        SliceKind::Split => format!("split {}", s.index),
        SliceKind::Copy => format!("copy {}", s.name.as_str()),
        SliceKind::EventWait => "event wait".to_owned(),
        SliceKind::Node | SliceKind::Task => s.op.to_owned(),
    }
}

/// The trace of `slices`, recorded by `profiler` (whose process and thread
/// names label the tracks). Times are microseconds since the profiler was made.
pub fn chrome_trace(slices: &[Slice], profiler: &Profiler) -> Value {
    let mut events = Vec::with_capacity(slices.len() + 16);
    for (pid, name) in profiler.processes().iter().enumerate() {
        events.push(json!({"name": "process_name", "ph": "M", "pid": pid, "args": {"name": name}}));
        events.push(json!({"name": "process_sort_index", "ph": "M", "pid": pid, "args": {"sort_index": pid}}));
    }
    let threads = profiler.threads();
    let tracks: BTreeSet<(u16, u16)> = slices.iter().map(|s| (s.process, s.thread)).collect();
    for (pid, tid) in tracks {
        let name = threads.iter().find(|t| t.thread == tid).map_or_else(|| format!("thread {tid}"), |t| t.name.clone());
        events.push(json!({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": name}}));
    }
    for s in slices {
        let mut args = serde_json::Map::new();
        if !s.name.as_str().is_empty() {
            args.insert("tensor".into(), json!(s.name.as_str()));
        }
        if matches!(s.kind, SliceKind::Task) {
            args.insert("task".into(), json!(s.index));
        }
        if s.bytes > 0 {
            args.insert("bytes".into(), json!(s.bytes));
        }
        if s.flops > 0 {
            args.insert("flops".into(), json!(s.flops));
        }
        events.push(json!({
            "name": event_name(s),
            "cat": s.kind.name(),
            "ph": "X",
            "ts": s.start_ns as f64 / 1e3,
            "dur": s.duration_ns() as f64 / 1e3,
            "pid": s.process,
            "tid": s.thread,
            "args": args,
        }));
    }
    json!({ "traceEvents": events, "displayTimeUnit": "ms" })
}

/// Writes [`chrome_trace`] of `slices` to `path`.
pub fn write_chrome_trace(path: &Path, slices: &[Slice], profiler: &Profiler) -> Result<()> {
    let io = |source| Error::Io { context: format!("writing the trace {}", path.display()), source };
    let file = std::io::BufWriter::new(std::fs::File::create(path).map_err(io)?);
    serde_json::to_writer(file, &chrome_trace(slices, profiler)).map_err(|e| io(std::io::Error::other(e)))
}
