//! The assign system: the backends that follow from where memory already
//! is — user pins, pre-allocated tensors, graph inputs, and nodes that read
//! weights.

use gantry_arenas::TensorId;

use super::gathered::Gathered;
use super::tables::{Assignments, Pins, PreallocBuffer};
use super::{BackendIndex, Cause};
use crate::alloc::tensor_table::{Entry, NONE, Role, flag, kind};
use crate::{BufferUsage, Context, Error, Result};

/// Assigns every leaf and node whose backend follows from memory:
/// user pins first (never overwritten); then a pre-allocated tensor (or a view
/// of one) goes to the highest-priority backend that supports its buffer
/// type and the op (none is an `Err`); graph inputs go to the CPU; a node
/// reading a `Weights` buffer goes to that weight's backend, unless op offload
/// is on, the weights are in host memory, and a higher-priority backend both
/// supports and wants the op.
pub fn assign_backends(g: Gathered<'_>, pins: &Pins, op_offload: bool, out: &mut Assignments) -> Result<()> {
    let (ctx, table) = (g.ctx, g.table);
    for (d, e) in table.entries().iter().enumerate() {
        if e.role == Role::Extra {
            continue;
        }
        // Most graphs have no pins: no lookup per tensor then.
        if !pins.is_empty()
            && let Some(&b) = pins.get(e.tensor)
        {
            check_pin(ctx, g, d, b)?;
            out.set(d, b, Cause::User);
            continue;
        }
        if let Some((b, cause)) = backend_from_current(ctx, g, d, e, op_offload)? {
            out.set(d, b, cause);
        }
    }
    Ok(())
}

/// A pin is honoured as given, so one that cannot work is an error: a node
/// that computes must be pinned to a backend that supports its op and, when
/// it writes pre-allocated memory (its own, or its view source's), can use
/// that buffer. Pins of tensors that compute nothing only place their memory
/// (when the scheduler allocates it).
fn check_pin(ctx: &Context, g: Gathered<'_>, d: usize, b: BackendIndex) -> Result<()> {
    if !g.computes(d) {
        return Ok(());
    }
    let t = g.table.tensor(d);
    let op = || ctx.get(t).map_or("?", |desc| desc.op.name());
    let name = || g.set.backend(b).name().to_owned();
    if !g.supports(b, d) {
        return Err(Error::Scheduler(format!(
            "{} is pinned to {}, which does not support op {}",
            ctx.describe(t),
            name(),
            op()
        )));
    }
    if let Some(buffer) = g.prealloc(d)
        && !buffer.readable_by(b)
    {
        let buft = ctx.buffer(buffer.buffer).map_or("(freed)", |e| e.buffer_type.name());
        return Err(Error::Scheduler(format!(
            "{} ({}) is pinned to {}, which cannot use its pre-allocated {buft} memory",
            ctx.describe(t),
            op(),
            name()
        )));
    }
    Ok(())
}

/// The highest-priority backend that can use `buffer` and run `op_entry`'s op.
#[inline(always)]
fn backend_for_buffer(g: Gathered<'_>, buffer: &PreallocBuffer, op_entry: usize) -> Option<BackendIndex> {
    let mut readers = buffer.readable;
    while readers != 0 {
        let b = BackendIndex::new(readers.trailing_zeros() as usize);
        if g.supports(b, op_entry) {
            return Some(b);
        }
        readers &= readers - 1;
    }
    None
}

fn backend_from_current(
    ctx: &Context,
    g: Gathered<'_>,
    d: usize,
    e: &Entry,
    op_offload: bool,
) -> Result<Option<(BackendIndex, Cause)>> {
    // A view's memory is its root's, so this finds the root's buffer too
    // (when the root was gathered before the view).
    if let Some(buffer) = g.pre.buffer(e.external) {
        if let Some(b) = backend_for_buffer(g, buffer, d) {
            return Ok(Some((b, Cause::Buffer)));
        }
        // A view's root holds the same buffer: it cannot do better.
        return Err(no_backend_for_buffer(ctx, buffer, e.tensor));
    }
    if e.root != NONE
        && let Some(buffer) = g.prealloc(e.root as usize)
        && let Some(b) = backend_for_buffer(g, buffer, d)
    {
        return Ok(Some((b, Cause::ViewBuffer)));
    }
    if e.flags & flag::INPUT != 0 {
        return Ok(Some((g.set.cpu(), Cause::Input)));
    }
    // Rope's frequency factors and attention's small side tensors are too
    // small to decide where the op runs.
    if e.kind & kind::SIDE_INPUTS != 0 {
        return Ok(None);
    }
    for src in e.srcs {
        if src == NONE {
            continue;
        }
        let Some(buffer) = g.prealloc(src as usize) else { continue };
        if buffer.usage != BufferUsage::Weights {
            continue;
        }
        let Some(src_backend) = backend_for_buffer(g, buffer, d) else {
            return Ok(None);
        };
        if op_offload && src_backend == g.set.cpu() && buffer.is_host {
            for b in src_backend.higher() {
                if g.supports(b, d) && g.set.offload_op(b, ctx, e.tensor) {
                    return Ok(Some((b, Cause::Offload)));
                }
            }
        }
        return Ok(Some((src_backend, Cause::Weights)));
    }
    Ok(None)
}

/// The error for a pre-allocated tensor no backend that can use its buffer runs.
#[cold]
fn no_backend_for_buffer(ctx: &Context, buffer: &PreallocBuffer, t: TensorId) -> Error {
    let buft = ctx.buffer(buffer.buffer).map_or("(freed)", |e| e.buffer_type.name());
    Error::Scheduler(format!(
        "pre-allocated tensor {} in a {buft} buffer cannot run op {} on any backend",
        ctx.describe(t),
        ctx.get(t).map_or("?", |desc| desc.op.name())
    ))
}
