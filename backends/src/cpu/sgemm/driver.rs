//! The loops around the micro-kernel, and their split over the job
//! system's tasks: B packed once and shared, then C computed in bands of
//! rows (and of columns when the rows are few), each task packing its own
//! blocks of A.

use std::ops::Range;

use gantry_engine::Result;

use super::blocking::Blocking;
use super::{Block, Kernels, Lhs, Out, Rhs, Shape};
use crate::cpu::ops::grow_scratch;
use crate::cpu::parallel::{Par, SendPtr};

/// Floats of slack in a scratch vector for starting packed operands on a
/// 64-byte boundary (a `Vec<f32>` is only 4-byte aligned).
const ALIGN_SLACK: usize = 16;

/// Multiply-adds that count as one unit of [`Par::threads_for`]'s work:
/// handing a product to the threads is two jobs (packing B, computing C),
/// each worth about a microsecond, so a thread is worth taking only for a
/// few hundred thousand multiply-adds.
const MACS_PER_WORK_UNIT: usize = 8;

/// Rows are split over tasks in multiples of this (a vector of the widest
/// kernel), so that only the last panel of a band is partly empty.
const ROW_GRAIN: usize = 16;

/// Floats of the backend's shared scratch that [`sgemm`] needs for `shape`.
pub(crate) fn sgemm_shared_floats(kernels: &Kernels, shape: Shape) -> usize {
    Blocking::new(kernels, shape).packed_b_floats(kernels, shape.k) + ALIGN_SLACK
}

/// Floats of scratch that [`sgemm_one_thread`] needs for `shape`.
pub(crate) fn sgemm_one_thread_floats(kernels: &Kernels, shape: Shape) -> usize {
    one_thread_floats(kernels, &Blocking::new(kernels, shape), shape)
}

/// Floats of scratch that [`sgemm_one_thread_blocked`] needs with `blk`.
pub(super) fn one_thread_floats(kernels: &Kernels, blk: &Blocking, shape: Shape) -> usize {
    blk.packed_b_floats(kernels, shape.k) + blk.packed_a_floats(kernels, shape.m) + 2 * ALIGN_SLACK
}

/// `C = A · B` over `par`'s threads: B packed into `shared` (grown to
/// [`sgemm_shared_floats`] if needed), each task's blocks of A packed into
/// its per-thread scratch.
///
/// # Safety
/// `a`, `b` and `c` address `shape`'s elements at their strides, in memory
/// valid for the call; C overlaps neither A nor B.
pub(crate) unsafe fn sgemm(
    kernels: &Kernels,
    shape: Shape,
    a: &Lhs,
    b: &Rhs,
    c: &Out,
    par: &Par<'_>,
    shared: &mut Vec<f32>,
) -> Result<()> {
    // SAFETY: the caller's guarantee.
    unsafe { sgemm_blocked(kernels, &Blocking::new(kernels, shape), shape, a, b, c, par, shared) }
}

/// [`sgemm`] with the blocks `blk`.
///
/// # Safety
/// As for [`sgemm`].
#[expect(clippy::too_many_arguments, reason = "sgemm's arguments and the blocks")]
pub(super) unsafe fn sgemm_blocked(
    kernels: &Kernels,
    blk: &Blocking,
    shape: Shape,
    a: &Lhs,
    b: &Rhs,
    c: &Out,
    par: &Par<'_>,
    shared: &mut Vec<f32>,
) -> Result<()> {
    let Shape { m, n, k } = shape;
    if m == 0 || n == 0 {
        return Ok(());
    }
    if k == 0 {
        // SAFETY: the caller's guarantee.
        unsafe { zero(c, m, n) };
        return Ok(());
    }
    let threads = par.threads_for(m.saturating_mul(n).saturating_mul(k) / MACS_PER_WORK_UNIT);
    grow_scratch(shared, blk.packed_b_floats(kernels, k) + ALIGN_SLACK)?;
    let packed_b = SendPtr(aligned(shared));
    let a_floats = blk.packed_a_floats(kernels, m) + ALIGN_SLACK;
    for j0 in (0..n).step_by(blk.nc) {
        let cols = blk.nc.min(n - j0);
        let panels = cols.div_ceil(kernels.nr);
        let b_tasks = threads.min(panels);
        par.run(b_tasks, &|t| {
            // SAFETY: the caller's guarantee for B; task t alone writes its
            // panels of packed B, which holds `packed_b_floats` floats.
            unsafe { pack_b_panels(kernels, blk, b, j0, cols, split(panels, b_tasks, t), k, packed_b.get()) }
        });
        let (row_parts, col_parts) = bands(m, panels, threads);
        par.run(row_parts * col_parts, &|t| {
            let rows = split(m.div_ceil(ROW_GRAIN), row_parts, t / col_parts);
            let rows = (rows.start * ROW_GRAIN).min(m)..(rows.end * ROW_GRAIN).min(m);
            let panels = split(panels, col_parts, t % col_parts);
            par.inline(a_floats, |scratch| {
                // SAFETY: the caller's guarantee; packed B is complete (the
                // job above returned) and only read; task t alone writes
                // C's rows `rows` of its columns; its scratch holds a
                // packed A block.
                unsafe { compute_band(kernels, blk, a, rows, j0, cols, panels, k, packed_b.get(), c, aligned(scratch)) }
            });
        });
    }
    Ok(())
}

/// `C = A · B` on the calling thread, with `scratch` (at least
/// [`sgemm_one_thread_floats`] floats) for the packed operands: for
/// products that are one task among many (batches spread over threads).
///
/// # Safety
/// As for [`sgemm`].
pub(crate) unsafe fn sgemm_one_thread(kernels: &Kernels, shape: Shape, a: &Lhs, b: &Rhs, c: &Out, scratch: &mut [f32]) {
    // SAFETY: the caller's guarantee.
    unsafe { sgemm_one_thread_blocked(kernels, &Blocking::new(kernels, shape), shape, a, b, c, scratch) }
}

/// [`sgemm_one_thread`] with the blocks `blk` (and scratch for them).
///
/// # Safety
/// As for [`sgemm`].
pub(super) unsafe fn sgemm_one_thread_blocked(
    kernels: &Kernels,
    blk: &Blocking,
    shape: Shape,
    a: &Lhs,
    b: &Rhs,
    c: &Out,
    scratch: &mut [f32],
) {
    let Shape { m, n, k } = shape;
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        // SAFETY: the caller's guarantee.
        unsafe { zero(c, m, n) };
        return;
    }
    let (b_part, a_part) = scratch.split_at_mut(blk.packed_b_floats(kernels, k) + ALIGN_SLACK);
    assert!(a_part.len() >= blk.packed_a_floats(kernels, m) + ALIGN_SLACK, "sgemm scratch too small");
    let (packed_b, packed_a) = (aligned(b_part), aligned(a_part));
    for j0 in (0..n).step_by(blk.nc) {
        let cols = blk.nc.min(n - j0);
        let panels = cols.div_ceil(kernels.nr);
        // SAFETY: the caller's guarantee; the scratch holds both packed operands.
        unsafe {
            pack_b_panels(kernels, blk, b, j0, cols, 0..panels, k, packed_b);
            compute_band(kernels, blk, a, 0..m, j0, cols, 0..panels, k, packed_b, c, packed_a);
        }
    }
}

/// The `k` blocks: `(first step, steps)`.
fn k_blocks(k: usize, kc: usize) -> impl Iterator<Item = (usize, usize)> {
    (0..k).step_by(kc).map(move |p0| (p0, kc.min(k - p0)))
}

/// Part `i` of `0..n` cut into `parts` nearly equal ranges.
fn split(n: usize, parts: usize, i: usize) -> Range<usize> {
    i * n / parts..(i + 1) * n / parts
}

/// How C's block of `m` rows and `panels` column panels is cut into tasks
/// for `threads` threads: `(row bands, column bands)`. Rows first (each
/// task then packs only its own rows of A), at least three grains of rows
/// per band; columns too when the rows are too few to go round.
fn bands(m: usize, panels: usize, threads: usize) -> (usize, usize) {
    let row_parts = threads.min((m.div_ceil(ROW_GRAIN) / 3).max(1));
    let col_parts = threads.div_ceil(row_parts).clamp(1, panels.max(1));
    (row_parts, col_parts)
}

/// Packs B's panels `panels` (of `nr` columns from column `j0`, `cols`
/// columns in all) for every `k` block: block `(p0, kcb)` lies at `p0 *
/// all_panels * nr` floats, its panel `q` at `q * kcb * nr` after that.
///
/// # Safety
/// B holds `k x (j0 + cols)`; `packed_b` holds [`Blocking::packed_b_floats`].
#[expect(
    clippy::too_many_arguments,
    reason = "the block's coordinates: B, its columns, its panels, k, the destination"
)]
unsafe fn pack_b_panels(
    kernels: &Kernels,
    blk: &Blocking,
    b: &Rhs,
    j0: usize,
    cols: usize,
    panels: Range<usize>,
    k: usize,
    packed_b: *mut f32,
) {
    if panels.is_empty() {
        return;
    }
    let nr = kernels.nr;
    let all_panels = cols.div_ceil(nr);
    let cols = j0 + panels.start * nr..j0 + (panels.end * nr).min(cols);
    for (p0, kcb) in k_blocks(k, blk.kc) {
        // SAFETY: the caller's guarantee; the panels' region of this k block is in packed B.
        unsafe {
            let out = packed_b.add(p0 * all_panels * nr + panels.start * kcb * nr);
            (kernels.pack_b)(b, cols.clone(), p0..p0 + kcb, out);
        }
    }
}

/// Computes C's rows `rows` of the columns in B's panels `panels` (of the
/// block of `cols` columns from `j0`), packing A one `mc x kc` block at a
/// time into `packed_a`.
///
/// # Safety
/// As for [`sgemm`]; packed B holds the whole block (see [`pack_b_panels`]);
/// `packed_a` holds [`Blocking::packed_a_floats`], 64-byte aligned.
#[expect(clippy::too_many_arguments, reason = "the band's coordinates in A, B and C, and the two packed operands")]
unsafe fn compute_band(
    kernels: &Kernels,
    blk: &Blocking,
    a: &Lhs,
    rows: Range<usize>,
    j0: usize,
    cols: usize,
    panels: Range<usize>,
    k: usize,
    packed_b: *const f32,
    c: &Out,
    packed_a: *mut f32,
) {
    if rows.is_empty() || panels.is_empty() {
        return;
    }
    let nr = kernels.nr;
    let all_panels = cols.div_ceil(nr);
    let band_cols = (panels.end * nr).min(cols) - panels.start * nr;
    for i0 in rows.clone().step_by(blk.mc) {
        let i1 = (i0 + blk.mc).min(rows.end);
        for (p0, kcb) in k_blocks(k, blk.kc) {
            // SAFETY: the caller's guarantee: the block's rows, steps and
            // columns lie in A, packed B and C.
            unsafe {
                (kernels.pack_a)(a, i0..i1, p0..p0 + kcb, packed_a);
                (kernels.block)(&Block {
                    kc: kcb,
                    a: packed_a,
                    rows: i1 - i0,
                    b: packed_b.add(p0 * all_panels * nr + panels.start * kcb * nr),
                    cols: band_cols,
                    c: c.ptr.add((j0 + panels.start * nr) * c.col_stride + i0),
                    ldc: c.col_stride,
                    accumulate: p0 > 0,
                });
            }
        }
    }
}

/// Sets C to zero (a product over `k = 0`).
///
/// # Safety
/// C holds `m x n` at its strides.
unsafe fn zero(c: &Out, m: usize, n: usize) {
    for j in 0..n {
        // SAFETY: the caller's guarantee.
        unsafe { std::slice::from_raw_parts_mut(c.ptr.add(j * c.col_stride), m).fill(0.0) };
    }
}

/// The first 64-byte aligned float of `scratch` (which has
/// [`ALIGN_SLACK`] floats to spare).
fn aligned(scratch: &mut [f32]) -> *mut f32 {
    let skip = scratch.as_ptr().align_offset(64).min(ALIGN_SLACK - 1);
    scratch[skip..].as_mut_ptr()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_cover_everything_once() {
        for (n, parts) in [(0, 1), (1, 2), (7, 3), (43, 2), (100, 8)] {
            let mut next = 0;
            for i in 0..parts {
                let r = split(n, parts, i);
                assert_eq!(r.start, next);
                next = r.end;
            }
            assert_eq!(next, n);
        }
    }

    #[test]
    fn bands_prefer_rows_and_use_every_thread() {
        assert_eq!(bands(2048, 256, 2), (2, 1));
        assert_eq!(bands(2048, 256, 1), (1, 1));
        // Few rows: split the columns.
        assert_eq!(bands(40, 256, 2), (1, 2));
        // Few rows and one panel: one task.
        assert_eq!(bands(40, 1, 4), (1, 1));
        for (m, panels, threads) in [(1, 1, 1), (100, 3, 4), (5000, 9, 16)] {
            let (r, c) = bands(m, panels, threads);
            assert!(r >= 1 && c >= 1 && c <= panels && r <= threads);
        }
    }
}
