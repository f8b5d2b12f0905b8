//! The assign system: the backends that follow from where memory already
//! is — user pins, pre-allocated tensors, graph inputs, and nodes that read
//! weights.

use gantry_arenas::TensorId;

use super::tables::{Assignments, Pins, Prealloc};
use super::{BackendIndex, BackendSet, Cause};
use crate::{BufferUsage, Context, Error, Graph, Op, Result, TensorFlags};

/// Assigns every leaf and node whose backend follows from memory:
/// user pins first (never overwritten); then a pre-allocated tensor (or a view
/// of one) goes to the highest-priority backend that supports its buffer
/// type and the op (none is an `Err`); graph inputs go to the CPU; a node
/// reading a `Weights` buffer goes to that weight's backend, unless op offload
/// is on, the weights are in host memory, and a higher-priority backend both
/// supports and wants the op.
pub fn assign_backends(
    ctx: &Context,
    graph: Graph<'_>,
    set: &BackendSet,
    pre: &Prealloc,
    pins: &Pins,
    op_offload: bool,
    out: &mut Assignments,
) -> Result<()> {
    for &t in graph.leafs().iter().chain(graph.nodes()) {
        if out.get(t).is_some() {
            continue;
        }
        if let Some(&b) = pins.get(t) {
            check_pin(ctx, t, b, set, pre)?;
            out.set(t, b, Cause::User);
            continue;
        }
        if let Some((b, cause)) = backend_from_current(ctx, t, set, pre, op_offload)? {
            out.set(t, b, cause);
        }
    }
    Ok(())
}

/// A pin is honoured as given, so one that cannot work is an error: a node
/// that computes must be pinned to a backend that supports its op and, when
/// it writes pre-allocated memory (its own, or its view source's), can use
/// that buffer. Pins of tensors that compute nothing only place their memory
/// (when the scheduler allocates it).
fn check_pin(ctx: &Context, t: TensorId, b: BackendIndex, set: &BackendSet, pre: &Prealloc) -> Result<()> {
    let desc = ctx.desc(t)?;
    if desc.op.is_empty() {
        return Ok(());
    }
    let name = || set.backend(b).name().to_owned();
    if !set.supports_op(b, ctx, t) {
        return Err(Error::Scheduler(format!(
            "{} is pinned to {}, which does not support op {}",
            ctx.describe(t),
            name(),
            desc.op.name()
        )));
    }
    if let Some(buffer) = pre.get(t)
        && !buffer.readable_by(b)
    {
        let buft = ctx.buffer(buffer.buffer).map_or("(freed)", |e| e.buffer_type.name());
        return Err(Error::Scheduler(format!(
            "{} ({}) is pinned to {}, which cannot use its pre-allocated {buft} memory",
            ctx.describe(t),
            desc.op.name(),
            name()
        )));
    }
    Ok(())
}

/// The highest-priority backend that can use the buffer holding `t` (or its
/// view source) and run `op_tensor`'s op.
fn backend_from_buffer(
    ctx: &Context,
    t: TensorId,
    op_tensor: TensorId,
    set: &BackendSet,
    pre: &Prealloc,
) -> Option<BackendIndex> {
    let buffer = pre.get(t)?;
    set.indices().find(|&b| buffer.readable_by(b) && set.supports_op(b, ctx, op_tensor))
}

fn backend_from_current(
    ctx: &Context,
    t: TensorId,
    set: &BackendSet,
    pre: &Prealloc,
    op_offload: bool,
) -> Result<Option<(BackendIndex, Cause)>> {
    let desc = ctx.desc(t)?;
    if let Some(b) = backend_from_buffer(ctx, t, t, set, pre) {
        return Ok(Some((b, Cause::Buffer)));
    }
    if let Some(v) = desc.view_src
        && let Some(b) = backend_from_buffer(ctx, v, t, set, pre)
    {
        return Ok(Some((b, Cause::ViewBuffer)));
    }
    if let Some(buffer) = pre.get(t) {
        let buft = ctx.buffer(buffer.buffer).map_or("(freed)", |e| e.buffer_type.name());
        return Err(Error::Scheduler(format!(
            "pre-allocated tensor {} in a {buft} buffer cannot run op {} on any backend",
            ctx.describe(t),
            desc.op.name()
        )));
    }
    if desc.flags.contains(TensorFlags::INPUT) {
        return Ok(Some((set.cpu(), Cause::Input)));
    }
    // Rope's frequency factors and attention's small side tensors are too
    // small to decide where the op runs.
    if matches!(desc.op, Op::Rope(_) | Op::FlashAttnExt { .. }) {
        return Ok(None);
    }
    for src in desc.sources() {
        let Some(buffer) = pre.get(src) else { continue };
        if buffer.usage != BufferUsage::Weights {
            continue;
        }
        let Some(src_backend) = backend_from_buffer(ctx, src, t, set, pre) else {
            return Ok(None);
        };
        if op_offload && src_backend == set.cpu() && buffer.is_host {
            for b in src_backend.higher() {
                if set.supports_op(b, ctx, t) && set.offload_op(b, ctx, t) {
                    return Ok(Some((b, Cause::Offload)));
                }
            }
        }
        return Ok(Some((src_backend, Cause::Weights)));
    }
    Ok(None)
}
