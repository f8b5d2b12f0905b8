//! The tensor world: tables of tensor descriptions, placements and buffers.
//!
//! [`Context`] is one value; its methods are grouped by the table they work on:
//! - `tensors`: the tensor table — create, look up, name, flag, remove, rewind;
//! - `builders`: the op builders' shared helpers (a new node, a new view);
//! - `buffers`: the buffer table — allocate, register, free, re-label;
//! - `placement`: where each tensor's bytes are — place, unplace, look up;
//! - `data`: reading, writing and copying tensor bytes;
//! - `alloc_tensors`: [`Context::alloc_tensors`], fresh buffers for a list of
//!   tensors (weights, test inputs).
//!
//! The op builders themselves (`ctx.mul_mat`, `ctx.rope`, ...) live in
//! [`crate::ops`], one file per op family.

mod alloc_tensors;
mod buffers;
mod builders;
mod data;
mod node_rules;
mod placement;
mod tensors;

pub use alloc_tensors::TensorBuffers;
pub(crate) use builders::ViewLayout;

use std::sync::Arc;

use gantry_arenas::{BufferId, TensorId};
use slotmap::{SecondaryMap, SlotMap};

use crate::tensor::{MAX_DIMS, contiguous_strides};
use crate::{Buffer, BufferType, BufferUsage, DType, Error, Result, TensorDesc};

/// Where a tensor's bytes are: a buffer and a byte offset in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Placement {
    /// The buffer.
    pub buffer: BufferId,
    /// Byte offset of the tensor's first byte.
    pub offset: usize,
}

/// One row of the buffer table.
pub struct BufferEntry {
    /// The memory.
    pub buffer: Box<dyn Buffer>,
    /// The type it was allocated from.
    pub buffer_type: Arc<dyn BufferType>,
    /// What it holds.
    pub usage: BufferUsage,
    /// A multi-buffer's chunks (each a buffer of its own); empty otherwise.
    pub chunks: Vec<BufferId>,
}

/// A point in the tensor table to [`Context::rewind`] to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mark(usize);

/// The tables every part of Gantry works on: tensor descriptions, where each
/// tensor lives, and the buffers holding them. Entities are ids; nothing
/// holds a reference into the tables across calls.
///
/// ```
/// use gantry_engine::{Context, DType};
/// let mut ctx = Context::new();
/// let w = ctx.tensor(DType::F32, [4, 3])?;
/// let x = ctx.tensor(DType::F32, [4, 2])?;
/// let y = ctx.mul_mat(w, x)?;
/// assert_eq!(ctx.desc(y)?.ne, [3, 2, 1, 1]);
/// assert!(ctx.add(w, x).is_err(), "[4, 2] does not repeat into [4, 3]");
/// # Ok::<(), gantry_engine::Error>(())
/// ```
#[derive(Default)]
pub struct Context {
    tensors: SlotMap<TensorId, TensorDesc>,
    placements: SecondaryMap<TensorId, Placement>,
    buffers: SlotMap<BufferId, BufferEntry>,
    created: Vec<TensorId>,
    revision: u64,
}

impl Context {
    /// An empty context.
    pub fn new() -> Self {
        Self::default()
    }
}

fn stale_tensor(t: TensorId) -> Error {
    Error::StaleHandle { kind: "tensor", handle: format!("{t:?}") }
}

/// A shape of 1 to 4 dimensions, padded with 1s.
pub(crate) fn shape4(shape: &[usize]) -> Result<[usize; MAX_DIMS]> {
    if shape.is_empty() || shape.len() > MAX_DIMS {
        return Err(Error::InvalidTensor {
            tensor: format!("shape {shape:?}"),
            reason: format!("a tensor has 1 to {MAX_DIMS} dimensions, not {}", shape.len()),
        });
    }
    let mut ne = [1; MAX_DIMS];
    ne[..shape.len()].copy_from_slice(shape);
    Ok(ne)
}

/// The strides of a contiguous tensor, as an op error.
pub(crate) fn strides_for(op: &'static str, dtype: DType, ne: [usize; MAX_DIMS]) -> Result<[usize; MAX_DIMS]> {
    contiguous_strides(dtype, ne).map_err(|reason| Error::InvalidOp { op, reason })
}
