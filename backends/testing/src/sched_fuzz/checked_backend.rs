//! A backend wrapper that checks, for every node it is asked to compute,
//! what the scheduler promises: the device supports the op, and the node
//! and all its sources live in memory the device can use. It also counts
//! how often each node is computed.

use std::any::Any;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use gantry_engine::{Backend, ComputeStatus, Context, Device, EventId, Graph, Result, TensorId};

/// What the checked backends saw, shared by all of them.
#[derive(Debug, Default)]
pub struct Journal {
    /// Times each node was computed (by any backend).
    pub computed: HashMap<TensorId, u32>,
    /// Broken promises, in words.
    pub violations: Vec<String>,
}

/// A shared [`Journal`].
pub type SharedJournal = Arc<Mutex<Journal>>;

/// Locks the journal (a panic elsewhere must not hide what was recorded).
pub fn lock(journal: &SharedJournal) -> std::sync::MutexGuard<'_, Journal> {
    journal.lock().unwrap_or_else(|p| p.into_inner())
}

/// `inner`, checked.
pub struct CheckedBackend {
    inner: Arc<dyn Backend>,
    journal: SharedJournal,
}

impl CheckedBackend {
    /// Wraps `inner`; what it sees goes into `journal`.
    pub fn new(inner: Arc<dyn Backend>, journal: SharedJournal) -> Self {
        Self { inner, journal }
    }

    fn check(&self, ctx: &Context, graph: Graph<'_>) {
        let device = self.inner.device();
        let mut journal = lock(&self.journal);
        for &node in graph.nodes() {
            let Some(d) = ctx.get(node) else {
                journal.violations.push(format!("{}: asked to compute a stale tensor {node:?}", self.name()));
                continue;
            };
            if d.op.is_empty() {
                continue;
            }
            *journal.computed.entry(node).or_default() += 1;
            if !device.supports_op(ctx, node) {
                journal.violations.push(format!(
                    "{} computes {} {} but does not support it",
                    self.name(),
                    d.op.name(),
                    ctx.describe(node)
                ));
            }
            for t in std::iter::once(node).chain(d.sources()) {
                match ctx.tensor_buffer(t) {
                    Ok((entry, _)) if device.supports_buft(entry.buffer_type.as_ref()) => {}
                    Ok((entry, _)) => journal.violations.push(format!(
                        "{} computes {} {} over {} in {} memory, which it cannot use",
                        self.name(),
                        d.op.name(),
                        ctx.describe(node),
                        ctx.describe(t),
                        entry.buffer_type.name()
                    )),
                    Err(e) => journal.violations.push(format!(
                        "{} computes {} {} over {} without memory: {e}",
                        self.name(),
                        d.op.name(),
                        ctx.describe(node),
                        ctx.describe(t)
                    )),
                }
            }
        }
    }
}

impl Backend for CheckedBackend {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn device(&self) -> &dyn Device {
        self.inner.device()
    }
    fn graph_compute(&self, ctx: &Context, graph: Graph<'_>) -> ComputeStatus {
        self.check(ctx, graph);
        self.inner.graph_compute(ctx, graph)
    }
    fn graph_compute_async(&self, ctx: &Context, graph: Graph<'_>) -> ComputeStatus {
        self.check(ctx, graph);
        self.inner.graph_compute_async(ctx, graph)
    }
    fn synchronize(&self) -> Result<()> {
        self.inner.synchronize()
    }
    fn set_tensor_async(&self, ctx: &Context, tensor: TensorId, offset: usize, data: &[u8]) -> Result<()> {
        self.inner.set_tensor_async(ctx, tensor, offset, data)
    }
    fn get_tensor_async(&self, ctx: &Context, tensor: TensorId, offset: usize, out: &mut [u8]) -> Result<()> {
        self.inner.get_tensor_async(ctx, tensor, offset, out)
    }
    fn cpy_tensor_async(&self, src_backend: &dyn Backend, ctx: &Context, src: TensorId, dst: TensorId) -> Result<bool> {
        // The inner backend may look at the source backend's concrete type.
        let src_backend =
            src_backend.as_any().downcast_ref::<CheckedBackend>().map_or(src_backend, |c| c.inner.as_ref());
        self.inner.cpy_tensor_async(src_backend, ctx, src, dst)
    }
    fn event_record(&self, event: EventId) -> Result<()> {
        self.inner.event_record(event)
    }
    fn event_wait(&self, event: EventId) -> Result<()> {
        self.inner.event_wait(event)
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}
