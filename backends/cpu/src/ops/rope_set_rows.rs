//! A fused ROPE + SET_ROWS (`gantry_engine::sched::FusionKind::RopeSetRows`):
//! a decoder's keys rotated and written straight into their KV-cache rows,
//! the rotated keys themselves never written (the optimize system fused the
//! three nodes — ROPE, the reshape of its result into cache rows, SET_ROWS —
//! only because each is the sole reader of the one before). The rotation
//! and the store are the two kernels' own arithmetic, in their order, so the
//! cache holds the same bits as after computing them one after the other.

use std::sync::Mutex;

use gantry_engine::quant::quantize_row;
use gantry_engine::{Context, DType, Error, Op, Result, TensorId};

use super::bound::Bound;
use super::rope::RopeRows;
use super::rope_angles::RopeAngleMemo;
use super::rows::{check_failures, quant_row_bytes, quant_row_mut};
use super::{src, supports_op};
use crate::first_error::FirstError;
use crate::parallel::Par;

/// Whether `rope`, `rows` (a reshape of its result into `[heads · head
/// size, tokens]`) and `store` (SET_ROWS of those rows) can run as one: an
/// F32 ROPE over `[head size, heads, tokens]`, its result dense, and a
/// SET_ROWS with one index per token.
pub fn fusable(ctx: &Context, rope: TensorId, rows: TensorId, store: TensorId) -> bool {
    let (Some(r), Some(v), Some(s)) = (ctx.get(rope), ctx.get(rows), ctx.get(store)) else { return false };
    let Some(x) = r.srcs[0].and_then(|x| ctx.get(x)) else { return false };
    let Some(idx) = s.srcs[1].and_then(|i| ctx.get(i)) else { return false };
    matches!(r.op, Op::Rope(_))
        && r.dtype == DType::F32
        && x.dtype == DType::F32
        && r.ne[3] == 1
        && r.is_contiguous()
        && r.view_src.is_none()
        && matches!(v.op, Op::Reshape | Op::View)
        && v.view_src == Some(rope)
        && v.view_offset == 0
        && v.srcs[0] == Some(rope)
        && v.ne == [r.ne[0] * r.ne[1], r.ne[2], 1, 1]
        && v.is_contiguous()
        && s.op == Op::SetRows
        && s.view_src.is_some()
        && s.srcs[0] == Some(rows)
        && idx.ne == [r.ne[2], 1, 1, 1]
        && s.ne[0] == v.ne[0]
        && s.ne[2] == 1
        && s.ne[3] == 1
        && [rope, rows, store].into_iter().all(|t| supports_op(ctx, t))
}

/// Rotates the keys and stores them. `Ok(false)` (nothing done) when the
/// three are not [`fusable`]: the caller then computes them one by one.
pub fn compute(
    ctx: &Context,
    rope: TensorId,
    rows: TensorId,
    store: TensorId,
    par: &Par<'_>,
    angles: Option<&Mutex<RopeAngleMemo>>,
) -> Result<bool> {
    if !fusable(ctx, rope, rows, store) {
        return Ok(false);
    }
    let (rd, sd) = (*ctx.desc(rope)?, *ctx.desc(store)?);
    let Op::Rope(p) = rd.op else { return Ok(false) };
    let keys = RopeRows::bind(ctx, rope, &rd, &p)?;
    let idx_id = src(ctx, store, &sd, 1)?;
    let idx = Bound::src(ctx, idx_id)?;
    let dst = Bound::dst(ctx, store)?;
    let (head, heads, tokens) = (keys.x.ne[0], keys.x.ne[1], keys.x.ne[2]);
    // SET_ROWS's own checks: every index inside the cache.
    for i in 0..tokens {
        // SAFETY: i < tokens = the index tensor's length (checked by `fusable`).
        let slot = unsafe { *(idx.at(i, 0, 0, 0) as *const i32) };
        if slot < 0 || slot as usize >= dst.ne[1] {
            return Err(Error::OutOfBounds(format!(
                "SET_ROWS: row index {slot} at [{i}, 0, 0] of {} is outside 0..{}",
                ctx.describe(idx_id),
                dst.ne[1]
            )));
        }
    }
    let quant_bytes = if dst.dtype.is_quantized() { Some(quant_row_bytes(ctx, store, &sd, &dst)?) } else { None };
    let failed = FirstError::default();
    // One thread, tokens in order, as SET_ROWS runs: a slot given twice
    // ends up with the later token's keys.
    let nd = keys.cache_len();
    keys.with_table(par, angles, |table| {
        par.inline(head * heads + nd, |tmp| {
            let (row, cache) = tmp.split_at_mut(head * heads);
            let mut cached_token = usize::MAX;
            for i in 0..tokens {
                let angles = keys.angles_of(table, i, cache, &mut cached_token);
                for (h, key) in row.chunks_exact_mut(head).enumerate() {
                    // SAFETY: head h of token i is inside the ROPE's source (checked at bind).
                    unsafe { keys.x.load_row(h, i, 0, key) };
                    keys.rotate(key, angles);
                }
                // SAFETY: the index was checked above; the cache row holds `head · heads` values.
                unsafe {
                    let slot = *(idx.at(i, 0, 0, 0) as *const i32) as usize;
                    match quant_bytes {
                        Some(bytes) => {
                            failed.note(quantize_row(dst.dtype, row, quant_row_mut(&dst, [slot, 0, 0], bytes)))
                        }
                        None => dst.store_row(slot, 0, 0, row),
                    }
                }
            }
        })
    });
    check_failures(ctx, store, &sd, &failed, "quantizing rows")?;
    Ok(true)
}
