//! Copying only the experts a split's expert products will read.
//!
//! A mixture-of-experts layer's weights in host memory whose MUL_MAT_ID a
//! GPU computes (op offload of a large batch) would be copied whole into the
//! split, though its tokens choose only some of the experts. As ggml's
//! scheduler does, when the ids are known before the split runs (computed by
//! an earlier split, or an input of this one), they are read first and only
//! the chosen experts' matrices are copied, runs of neighbouring experts in
//! one write. The experts nobody chose keep whatever the copy held: no
//! kernel reads them, since MUL_MAT_ID checks every id before it reads a
//! weight.
//!
//! Anything else — ids computed inside the split, another reader of the
//! copy, a weight not in plain host memory, an id out of range (the kernel
//! reports it) — copies the tensor whole, as before.

use gantry_arenas::TensorId;

use crate::{BufferUsage, Context, DType, Op, Result, TensorDesc};

/// Memory for the ids and the chosen experts, kept by the scheduler so that a
/// steady-state compute allocates nothing.
#[derive(Debug, Default)]
pub struct ExpertScratch {
    ids: Vec<u8>,
    chosen: Vec<bool>,
}

/// The expert stack `input` (copied into the split as `copy`) when every
/// reader of `copy` among `nodes` is a MUL_MAT_ID taking it as its weights
/// with one and the same ids tensor, which no node of the split computes:
/// that ids tensor.
pub(super) fn expert_ids(ctx: &Context, nodes: &[TensorId], input: TensorId, copy: TensorId) -> Option<TensorId> {
    let d = ctx.get(input)?;
    if !is_plain_host_stack(ctx, input, d) {
        return None;
    }
    let mut ids = None;
    for &n in nodes {
        let nd = ctx.get(n)?;
        for (j, src) in nd.srcs.iter().enumerate() {
            if *src != Some(copy) {
                continue;
            }
            let its_ids = nd.srcs[2].filter(|_| nd.op == Op::MulMatId && j == 0)?;
            if ids.is_some_and(|i| i != its_ids) {
                return None;
            }
            ids = Some(its_ids);
        }
    }
    let ids = ids?;
    let ids_desc = ctx.get(ids)?;
    let root = ids_desc.view_src.unwrap_or(ids);
    let computed_here =
        nodes.iter().any(|&n| n == ids || n == root || ctx.get(n).and_then(|d| d.view_src) == Some(root));
    let readable = ids_desc.dtype == DType::I32 && ids_desc.is_contiguous() && ids_desc.ne[2] * ids_desc.ne[3] == 1;
    (!computed_here && readable).then_some(ids)
}

/// A 3-d stack of expert matrices, one after the other, in plain host
/// memory that holds weights.
fn is_plain_host_stack(ctx: &Context, t: TensorId, d: &TensorDesc) -> bool {
    // The shape first: most split inputs are no expert stack, and this runs
    // for every input of every compute.
    let stack = d.view_src.is_none() && d.ne[2] > 1 && d.ne[3] == 1 && d.nb[2].checked_mul(d.ne[2]) == Some(d.nbytes());
    stack && ctx.tensor_buffer(t).is_ok_and(|(entry, _)| entry.usage == BufferUsage::Weights) && ctx.host_ptr(t).is_ok()
}

/// Reads `ids` (from `source`, which holds the same values) and writes the
/// experts they choose from `input` into `copy`. Returns the bytes written,
/// or `None` when an id is out of range (then nothing was written and the
/// caller copies the whole tensor, for the kernel to report the id).
pub(super) fn copy_chosen_experts(
    ctx: &Context,
    input: TensorId,
    copy: TensorId,
    source: TensorId,
    scratch: &mut ExpertScratch,
) -> Result<Option<usize>> {
    let d = *ctx.desc(input)?;
    let (n_expert, expert_bytes) = (d.ne[2], d.nb[2]);
    let ids_bytes = ctx.desc(source)?.nbytes();
    scratch.ids.clear();
    scratch.ids.resize(ids_bytes, 0);
    ctx.read_tensor_bytes(source, 0, &mut scratch.ids)?;
    scratch.chosen.clear();
    scratch.chosen.resize(n_expert, false);
    for id in scratch.ids.chunks_exact(4).map(|b| i32::from_le_bytes([b[0], b[1], b[2], b[3]])) {
        match usize::try_from(id) {
            Ok(e) if e < n_expert => scratch.chosen[e] = true,
            _ => return Ok(None),
        }
    }
    let base = ctx.host_ptr(input)?;
    // SAFETY: `input` is placed in host memory (checked by `expert_ids`)
    // and its `nbytes` lie inside its buffer; weights are not written while
    // a compute runs.
    let bytes = unsafe { std::slice::from_raw_parts(base as *const u8, d.nbytes()) };
    let mut written = 0;
    let mut e = 0;
    while e < n_expert {
        if !scratch.chosen[e] {
            e += 1;
            continue;
        }
        let first = e;
        while e < n_expert && scratch.chosen[e] {
            e += 1;
        }
        let range = first * expert_bytes..e * expert_bytes;
        ctx.write_tensor_bytes(copy, range.start, &bytes[range.clone()])?;
        written += range.len();
    }
    Ok(Some(written))
}
