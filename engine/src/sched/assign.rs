//! The assign system: the backends that follow from where memory already
//! is — user pins, pre-allocated tensors, graph inputs, and nodes that read
//! weights.

use super::gathered::Gathered;
use super::tables::{Assignments, Pins, PreallocBuffer};
use super::{BackendIndex, Cause};
use crate::alloc::tensor_table::{NONE, Role, flag, kind};
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
    for d in 0..table.len() {
        if table.role(d) == Role::Extra {
            continue;
        }
        // Most graphs have no pins: no lookup per tensor then.
        if !pins.is_empty()
            && let Some(&b) = pins.get(table.tensor(d))
        {
            check_pin(ctx, g, d, b)?;
            out.set(d, b, Cause::User);
            continue;
        }
        if let Some((b, cause)) = backend_from_current(ctx, g, d, op_offload)? {
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
    op_offload: bool,
) -> Result<Option<(BackendIndex, Cause)>> {
    let table = g.table;
    // A view's memory is its root's, so this finds the root's buffer too
    // (when the root was gathered before the view).
    if let Some(buffer) = g.prealloc(d) {
        if let Some(b) = backend_for_buffer(g, buffer, d) {
            return Ok(Some((b, Cause::Buffer)));
        }
        // A view's root holds the same buffer: it cannot do better.
        let t = table.tensor(d);
        let buft = ctx.buffer(buffer.buffer).map_or("(freed)", |e| e.buffer_type.name());
        return Err(Error::Scheduler(format!(
            "pre-allocated tensor {} in a {buft} buffer cannot run op {} on any backend",
            ctx.describe(t),
            ctx.get(t).map_or("?", |desc| desc.op.name())
        )));
    }
    if let Some(v) = g.view_src(d)
        && let Some(buffer) = g.prealloc(v)
        && let Some(b) = backend_for_buffer(g, buffer, d)
    {
        return Ok(Some((b, Cause::ViewBuffer)));
    }
    let op_kind = table.kind(d);
    if table.flags(d) & flag::INPUT != 0 {
        return Ok(Some((g.set.cpu(), Cause::Input)));
    }
    // Rope's frequency factors and attention's small side tensors are too
    // small to decide where the op runs.
    if op_kind & kind::SIDE_INPUTS != 0 {
        return Ok(None);
    }
    for src in table.srcs(d) {
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
                if g.supports(b, d) && g.set.offload_op(b, ctx, table.tensor(d)) {
                    return Ok(Some((b, Cause::Offload)));
                }
            }
        }
        return Ok(Some((src_backend, Cause::Weights)));
    }
    Ok(None)
}
