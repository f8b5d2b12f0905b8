//! The CPU backend's side of the scheduler's optimize system
//! ([`gantry_engine::sched::optimize`]): in each of its splits it
//!
//! 1. brings matrix products that read the same activation together (a
//!    decoder's Q, K and V are apart in the graph's order, each followed by
//!    its reshape and rope) and marks them as one
//!    [`FusionKind::SharedActivation`] group: the activation is quantized
//!    once and the products run in one dispatch;
//! 2. marks each RMS_NORM directly followed by the MUL that is its sole
//!    reader as a [`FusionKind::RmsNormMul`] group: one pass, the norm's
//!    result not written;
//! 3. marks each ROPE followed by the reshape of its result into rows and
//!    the SET_ROWS that stores them (a decoder's keys going into its KV
//!    cache), each the sole reader of the one before, as a
//!    [`FusionKind::RopeSetRows`] group: the keys rotated straight into the
//!    cache rows.
//!
//! Each group keeps everything its nodes read alive until its last node
//! (allocation-order edges), since the group computes its nodes at once; a
//! group whose edges cannot be added is not made. (The third kind needs
//! none: see `fuse_rope_stores`.)

use gantry_engine::sched::{FusionKind, SplitRewrite};
use gantry_engine::{Context, Op, Result};

use super::ops::{mul_mat_shared, rms_norm_mul, rope_set_rows};
use super::quant::MAX_SHARED;

/// How many nodes past a product the next one reading its activation is
/// looked for (a decoder layer's Q, K, V lie within a dozen nodes).
const LOOKAHEAD: usize = 16;

/// Rewrites one CPU split (see the module docs).
pub fn optimize_split(ctx: &Context, split: &mut SplitRewrite<'_>) -> Result<()> {
    group_shared_products(ctx, split)?;
    fuse_norms(ctx, split)?;
    fuse_rope_stores(ctx, split)
}

/// Step 1: products of one activation, moved next to each other and grouped.
fn group_shared_products(ctx: &Context, split: &mut SplitRewrite<'_>) -> Result<()> {
    let mut i = 0;
    while i < split.nodes().len() {
        let t = split.nodes()[i];
        let Some(d) = ctx.get(t).filter(|d| d.op == Op::MulMat) else {
            i += 1;
            continue;
        };
        let (Some(src0), Some(src1)) = (d.srcs[0], d.srcs[1]) else {
            i += 1;
            continue;
        };
        let dtype = ctx.get(src0).map(|a| a.dtype);
        if !mul_mat_shared::joins(ctx, t, src1) {
            i += 1;
            continue;
        }
        let mut len = 1;
        let mut j = i + 1;
        while j < split.nodes().len() && j <= i + len + LOOKAHEAD && len < MAX_SHARED {
            let u = split.nodes()[j];
            let same_weights = ctx.get(u).and_then(|e| e.srcs[0]).and_then(|a| ctx.get(a)).map(|a| a.dtype) == dtype;
            if same_weights && mul_mat_shared::joins(ctx, u, src1) && split.hoist(j, i + len - 1) {
                len += 1;
            }
            j += 1;
        }
        if len >= 2 && keep_group_alive(ctx, split, i, len) {
            split.fuse(i, len, FusionKind::SharedActivation)?;
        }
        i += len;
    }
    Ok(())
}

/// Step 2: RMS_NORM + MUL pairs.
fn fuse_norms(ctx: &Context, split: &mut SplitRewrite<'_>) -> Result<()> {
    let mut i = 0;
    while i + 1 < split.nodes().len() {
        let (norm, mul) = (split.nodes()[i], split.nodes()[i + 1]);
        if rms_norm_mul::fusable(ctx, norm, mul)
            && split.sole_reader(norm) == Some(mul)
            && keep_group_alive(ctx, split, i, 2)
        {
            split.fuse(i, 2, FusionKind::RmsNormMul)?;
            i += 2;
        } else {
            i += 1;
        }
    }
    Ok(())
}

/// Step 3: ROPE + reshape + SET_ROWS runs. No allocation-order edges: the
/// reshape and the SET_ROWS are views (of the ROPE's result and of the
/// cache), so the ROPE's result is the only memory the group's nodes take,
/// and it is taken before anything they read can be released.
fn fuse_rope_stores(ctx: &Context, split: &mut SplitRewrite<'_>) -> Result<()> {
    let mut i = 0;
    while i + 2 < split.nodes().len() {
        let (rope, rows, store) = (split.nodes()[i], split.nodes()[i + 1], split.nodes()[i + 2]);
        if rope_set_rows::fusable(ctx, rope, rows, store)
            && split.sole_reader(rope) == Some(rows)
            && split.sole_reader(rows) == Some(store)
        {
            split.fuse(i, 3, FusionKind::RopeSetRows)?;
            i += 3;
        } else {
            i += 1;
        }
    }
    Ok(())
}

/// Adds an edge from every source of the group's nodes at `start..start +
/// len` to its last node; `false` when one cannot be added.
fn keep_group_alive(ctx: &Context, split: &mut SplitRewrite<'_>, start: usize, len: usize) -> bool {
    let last = split.nodes()[start + len - 1];
    for p in start..start + len - 1 {
        let node = split.nodes()[p];
        let Some(d) = ctx.get(node) else { return false };
        for s in d.sources() {
            if !split.keep_alive(s, last) {
                return false;
            }
        }
    }
    true
}
