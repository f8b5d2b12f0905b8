//! The scheduler's backends in priority order, with their buffer types.

use std::sync::Arc;

use gantry_arenas::TensorId;

use super::{BackendIndex, MAX_BACKENDS};
use crate::alloc::BufferTypeIndex;
use crate::{Backend, BufferType, Context, DeviceType, Error, Op, Result, same_buffer_type};

/// Backends in priority order (index 0 first; the last is the CPU), each
/// with the buffer type its compute memory comes from. Backends sharing a
/// buffer type share one buffer type index of the graph allocator.
pub struct BackendSet {
    backends: Vec<Arc<dyn Backend>>,
    bufts: Vec<Arc<dyn BufferType>>,
    alloc_buft: Vec<BufferTypeIndex>,
    unique_bufts: Vec<Arc<dyn BufferType>>,
    /// Per backend `mem`: bit `b` set when backend `b` can use `mem`'s
    /// compute memory (asked once here; placement asks for every source).
    usable_by: Vec<u16>,
}

impl BackendSet {
    /// Checks the list: 1 to 16 backends, the last on a CPU device, and each
    /// buffer type (the device's own when `None`) usable by its backend.
    pub fn new(backends: &[Arc<dyn Backend>], bufts: &[Option<Arc<dyn BufferType>>]) -> Result<Self> {
        if backends.is_empty() || backends.len() > MAX_BACKENDS {
            return Err(Error::Scheduler(format!("needs 1 to {MAX_BACKENDS} backends, got {}", backends.len())));
        }
        if !bufts.is_empty() && bufts.len() != backends.len() {
            return Err(Error::Scheduler(format!(
                "{} buffer types given for {} backends (give one per backend, or none)",
                bufts.len(),
                backends.len()
            )));
        }
        let last = &backends[backends.len() - 1];
        if last.device().device_type() != DeviceType::Cpu {
            return Err(Error::Scheduler(format!(
                "the last backend must be a CPU (the fallback for every op), but it is {} ({})",
                last.name(),
                last.device().device_type().name()
            )));
        }
        let mut set = Self {
            backends: backends.to_vec(),
            bufts: vec![],
            alloc_buft: vec![],
            unique_bufts: vec![],
            usable_by: vec![],
        };
        for (i, b) in backends.iter().enumerate() {
            let buft = bufts.get(i).cloned().flatten().unwrap_or_else(|| b.device().buffer_type());
            if !b.device().supports_buft(buft.as_ref()) {
                return Err(Error::Scheduler(format!("backend {} cannot use buffer type {}", b.name(), buft.name())));
            }
            let slot = match set.unique_bufts.iter().position(|u| same_buffer_type(u, &buft)) {
                Some(s) => s,
                None => {
                    set.unique_bufts.push(buft.clone());
                    set.unique_bufts.len() - 1
                }
            };
            set.alloc_buft.push(BufferTypeIndex::new(slot));
            set.bufts.push(buft);
        }
        set.usable_by = set
            .indices()
            .map(|mem| {
                set.indices()
                    .filter(|&b| {
                        b == mem
                            || set.alloc_buft(b) == set.alloc_buft(mem)
                            || set.supports_buft(b, set.buft(mem).as_ref())
                    })
                    .fold(0u16, |m, b| m | b.bit())
            })
            .collect();
        Ok(set)
    }

    /// Number of backends.
    pub fn len(&self) -> usize {
        self.backends.len()
    }

    /// Whether there are no backends (never: construction refuses it).
    pub fn is_empty(&self) -> bool {
        self.backends.is_empty()
    }

    /// The CPU's index (the last).
    pub fn cpu(&self) -> BackendIndex {
        BackendIndex::new(self.backends.len() - 1)
    }

    /// Every backend's index, highest priority first.
    pub fn indices(&self) -> impl DoubleEndedIterator<Item = BackendIndex> + Clone + use<> {
        (0..self.backends.len()).map(BackendIndex::new)
    }

    /// The backend at priority `b`.
    pub fn backend(&self, b: BackendIndex) -> &Arc<dyn Backend> {
        &self.backends[b.get()]
    }

    /// All backends in priority order.
    pub fn backends(&self) -> &[Arc<dyn Backend>] {
        &self.backends
    }

    /// The buffer type of backend `b`.
    pub fn buft(&self, b: BackendIndex) -> &Arc<dyn BufferType> {
        &self.bufts[b.get()]
    }

    /// The graph allocator's index of backend `b`'s buffer type.
    pub fn alloc_buft(&self, b: BackendIndex) -> BufferTypeIndex {
        self.alloc_buft[b.get()]
    }

    /// Distinct buffer types, in the graph allocator's order.
    pub fn unique_bufts(&self) -> &[Arc<dyn BufferType>] {
        &self.unique_bufts
    }

    /// The index of `backend` (same object) in the set.
    pub fn index_of(&self, backend: &Arc<dyn Backend>) -> Option<BackendIndex> {
        self.backends
            .iter()
            .position(|b| std::ptr::addr_eq(Arc::as_ptr(b), Arc::as_ptr(backend)))
            .map(BackendIndex::new)
    }

    /// Whether backend `b` can compute `t` (ops that compute nothing run anywhere).
    #[inline]
    pub fn supports_op(&self, b: BackendIndex, ctx: &Context, t: TensorId) -> bool {
        match ctx.get(t) {
            Some(d) if is_view_op(&d.op) || d.op == Op::None => true,
            Some(_) => self.backends[b.get()].device().supports_op(ctx, t),
            None => false,
        }
    }

    /// The backends that can use memory of backend `mem`'s buffer type, as a mask.
    #[inline]
    pub fn usable_by(&self, mem: BackendIndex) -> u16 {
        self.usable_by[mem.get()]
    }

    /// Whether backend `b` can use memory of backend `mem`'s buffer type:
    /// the same backend, the same buffer type, or one `b` supports.
    #[inline]
    pub fn can_use(&self, b: BackendIndex, mem: BackendIndex) -> bool {
        self.usable_by[mem.get()] & b.bit() != 0
    }

    /// Whether backend `b` can read and write buffers of `buft`.
    #[inline]
    pub fn supports_buft(&self, b: BackendIndex, buft: &dyn BufferType) -> bool {
        self.backends[b.get()].device().supports_buft(buft)
    }

    /// Whether backend `b` wants `t` even though its weights are in host memory.
    pub fn offload_op(&self, b: BackendIndex, ctx: &Context, t: TensorId) -> bool {
        self.backends[b.get()].device().offload_op(ctx, t)
    }
}

/// Ops that only describe memory (ggml's `ggml_is_view_op`).
#[inline]
pub fn is_view_op(op: &Op) -> bool {
    matches!(op, Op::View | Op::Reshape | Op::Permute { .. } | Op::Transpose)
}
