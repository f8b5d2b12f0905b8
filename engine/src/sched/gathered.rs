//! What the placement systems read about a graph: the table the scheduler
//! gathered it into (one look at each tensor's description), with the
//! pre-allocated buffers it reads and which backends run each op.

use super::BackendSet;
use super::tables::{Prealloc, PreallocBuffer, Support};
use crate::Context;
use crate::alloc::TensorTable;
use crate::alloc::tensor_table::{NONE, kind};

/// The gathered graph, read-only, for one run of the placement systems.
#[derive(Clone, Copy)]
pub struct Gathered<'a> {
    /// The context the graph lives in (op support looks at descriptions).
    pub ctx: &'a Context,
    /// The backends, in priority order.
    pub set: &'a BackendSet,
    /// Every tensor of the graph, by dense index.
    pub table: &'a TensorTable,
    /// The pre-allocated buffers the graph reads.
    pub pre: &'a Prealloc,
    /// Which backends run each op.
    pub support: &'a Support,
}

impl Gathered<'_> {
    /// Whether backend `b` can compute entry `d`.
    #[inline]
    pub fn supports(&self, b: super::BackendIndex, d: usize) -> bool {
        self.support.supports(self.ctx, self.table, self.set, b, d)
    }

    /// The buffer entry `d`'s memory was pre-allocated in, if any.
    #[inline]
    pub fn prealloc(&self, d: usize) -> Option<&PreallocBuffer> {
        self.pre.get(self.table, d)
    }

    /// Whether `d` is a view op (VIEW, RESHAPE, PERMUTE, TRANSPOSE).
    #[inline]
    pub fn is_view_op(&self, d: usize) -> bool {
        self.table.kind(d) & kind::VIEW_OP != 0
    }

    /// Whether `d` computes something (not NONE, not a view op).
    #[inline]
    pub fn computes(&self, d: usize) -> bool {
        self.table.kind(d) & kind::COMPUTES != 0
    }

    /// `d`'s view source, if it is a view.
    #[inline]
    pub fn view_src(&self, d: usize) -> Option<usize> {
        let r = self.table.root(d);
        (r != NONE).then_some(r as usize)
    }

    /// `d`'s sources, in slot order.
    #[inline]
    pub fn sources(&self, d: usize) -> impl Iterator<Item = usize> + '_ {
        self.table.srcs(d).into_iter().filter(|&s| s != NONE).map(|s| s as usize)
    }
}
