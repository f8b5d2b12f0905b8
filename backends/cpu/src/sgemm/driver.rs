//! The loops around the micro-kernel, and their split over the job
//! system's tasks.
//!
//! C is cut into one block per task, a band of rows times a band of
//! columns, and each task packs everything it reads: its rows of A and its
//! columns of B, one `kc` step block at a time (BLIS's loop order: columns
//! of `nc`, steps of `kc`, rows of `mc`, then the macro-kernel). No task
//! reads what another packed: on a machine whose cores do not share an L2
//! (all of them), a packed panel written by one core and read by another
//! crosses between caches, and sharing packed B that way made a 2048³
//! product on two Zen 4 cores ~7% slower than packing it twice (and the
//! LLM-sized 576 x 512 x 576 ~20% slower). What is packed twice instead is
//! the cheaper operand: bands of rows each pack all of B's columns, bands
//! of columns all of A's rows, and the split is chosen to pack the least.

use std::ops::Range;

use super::blocking::Blocking;
use super::{Block, Kernels, Lhs, Out, Rhs, Shape};
use crate::parallel::Par;

/// Floats of slack in a scratch vector for starting packed operands on a
/// 64-byte boundary (a `Vec<f32>` is only 4-byte aligned).
const ALIGN_SLACK: usize = 16;

/// Multiply-adds that count as one unit of [`Par::threads_for`]'s work:
/// handing a product to the threads costs a microsecond or two, and each
/// task packs its own operands, so a thread is worth taking only for a few
/// hundred thousand multiply-adds.
const MACS_PER_WORK_UNIT: usize = 8;

/// Rows are split over tasks in multiples of this (a vector of the widest
/// kernel), so that only the last panel of a band is partly empty.
const ROW_GRAIN: usize = 16;

/// Floats of scratch one task needs for `shape` (see [`sgemm_one_thread`]).
pub(crate) fn sgemm_one_thread_floats(kernels: &Kernels, shape: Shape) -> usize {
    task_floats(kernels, &Blocking::new(kernels, shape), shape)
}

/// Floats of scratch a task of a product of `shape` with `blk` needs: a
/// packed B block and a packed A block.
pub(super) fn task_floats(kernels: &Kernels, blk: &Blocking, shape: Shape) -> usize {
    blk.packed_b_floats(kernels, shape.n) + blk.packed_a_floats(kernels, shape.m) + 2 * ALIGN_SLACK
}

/// `C = A · B` over `par`'s threads, each task's packed operands in its
/// per-thread scratch.
///
/// # Safety
/// `a`, `b` and `c` address `shape`'s elements at their strides, in memory
/// valid for the call; C overlaps neither A nor B.
pub(crate) unsafe fn sgemm(kernels: &Kernels, shape: Shape, a: &Lhs, b: &Rhs, c: &Out, par: &Par<'_>) {
    // SAFETY: the caller's guarantee.
    unsafe { sgemm_blocked(kernels, &Blocking::new(kernels, shape), shape, a, b, c, par) }
}

/// [`sgemm`] with the blocks `blk`.
///
/// # Safety
/// As for [`sgemm`].
pub(super) unsafe fn sgemm_blocked(
    kernels: &Kernels,
    blk: &Blocking,
    shape: Shape,
    a: &Lhs,
    b: &Rhs,
    c: &Out,
    par: &Par<'_>,
) {
    let Shape { m, n, k } = shape;
    // More parts than threads only while an abort callback is armed (the
    // parts do not change the sums: each element still adds its k steps in order).
    let threads = par.parts_for(m.saturating_mul(n).saturating_mul(k) / MACS_PER_WORK_UNIT);
    let (row_parts, col_parts) = bands(shape, kernels.nr, threads);
    let scratch = task_floats(kernels, blk, shape);
    if row_parts * col_parts > 1 {
        par.reserve_scratch(scratch);
    }
    par.run(row_parts * col_parts, &|t| {
        let rows = split(m.div_ceil(ROW_GRAIN), row_parts, t / col_parts);
        let rows = (rows.start * ROW_GRAIN).min(m)..(rows.end * ROW_GRAIN).min(m);
        let panels = split(n.div_ceil(kernels.nr), col_parts, t % col_parts);
        let cols = (panels.start * kernels.nr).min(n)..(panels.end * kernels.nr).min(n);
        par.inline(scratch, |scratch| {
            // SAFETY: the caller's guarantee; task t alone writes C's block
            // (rows, cols); its scratch holds both packed blocks.
            unsafe { compute_block(kernels, blk, k, a, b, c, rows, cols, scratch) }
        });
    });
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

/// [`sgemm_one_thread`] with the blocks `blk` (and scratch for them, see
/// [`task_floats`]).
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
    // SAFETY: the caller's guarantee.
    unsafe { compute_block(kernels, blk, shape.k, a, b, c, 0..shape.m, 0..shape.n, scratch) }
}

/// Part `i` of `0..n` cut into `parts` nearly equal ranges.
fn split(n: usize, parts: usize, i: usize) -> Range<usize> {
    i * n / parts..(i + 1) * n / parts
}

/// How C is cut into tasks for `threads` threads: `(bands of rows, bands of
/// columns)`, their product at most `threads`. Each band of rows packs all
/// of B's columns and each band of columns all of A's rows, so of the
/// splits that use every thread, the one that packs the fewest elements:
/// `cols · m·k + rows · k·n`. Bands of rows hold three grains (48 rows) at
/// least, bands of columns a panel.
fn bands(shape: Shape, nr: usize, threads: usize) -> (usize, usize) {
    let Shape { m, n, .. } = shape;
    let max_rows = (m.div_ceil(ROW_GRAIN) / 3).max(1);
    let max_cols = n.div_ceil(nr).max(1);
    let packed = |(r, c): (usize, usize)| c * m + r * n;
    (1..=threads)
        .filter(|r| threads.is_multiple_of(*r))
        .map(|r| (r, threads / r))
        .filter(|&(r, c)| r <= max_rows && c <= max_cols)
        .min_by_key(|&rc| packed(rc))
        // No exact split fits (few rows and few columns): as many of each as there are.
        .unwrap_or((max_rows.min(threads), max_cols.min(threads / max_rows.min(threads)).max(1)))
}

/// Computes C's block `rows x cols`: for every `nc` columns, for every `kc`
/// steps, B's block packed, then for every `mc` rows A's block packed and
/// the macro-kernel run.
///
/// # Safety
/// As for [`sgemm`]; the block is in C; `scratch` holds [`task_floats`].
#[expect(clippy::too_many_arguments, reason = "the block's coordinates in A, B and C, and the scratch")]
unsafe fn compute_block(
    kernels: &Kernels,
    blk: &Blocking,
    k: usize,
    a: &Lhs,
    b: &Rhs,
    c: &Out,
    rows: Range<usize>,
    cols: Range<usize>,
    scratch: &mut [f32],
) {
    if rows.is_empty() || cols.is_empty() {
        return;
    }
    if k == 0 {
        for j in cols {
            // SAFETY: column j's rows are in C (the caller's guarantee).
            unsafe { std::slice::from_raw_parts_mut(c.ptr.add(j * c.col_stride + rows.start), rows.len()) }.fill(0.0);
        }
        return;
    }
    let (b_part, a_part) = scratch.split_at_mut(blk.packed_b_floats(kernels, cols.len()) + ALIGN_SLACK);
    assert!(a_part.len() >= blk.packed_a_floats(kernels, rows.len()) + ALIGN_SLACK, "sgemm scratch too small");
    let (packed_b, packed_a) = (aligned(b_part), aligned(a_part));
    for j0 in cols.clone().step_by(blk.nc) {
        let j1 = (j0 + blk.nc).min(cols.end);
        for p0 in (0..k).step_by(blk.kc) {
            let kcb = blk.kc.min(k - p0);
            // SAFETY: the block's columns and steps are in B; the scratch holds them packed.
            unsafe { (kernels.pack_b)(b, j0..j1, p0..p0 + kcb, packed_b) };
            for i0 in rows.clone().step_by(blk.mc) {
                let i1 = (i0 + blk.mc).min(rows.end);
                // SAFETY: the block's rows and steps are in A, its rows and
                // columns in C; the scratch holds packed A.
                unsafe {
                    (kernels.pack_a)(a, i0..i1, p0..p0 + kcb, packed_a);
                    (kernels.block)(&Block {
                        kc: kcb,
                        a: packed_a,
                        rows: i1 - i0,
                        b: packed_b,
                        cols: j1 - j0,
                        c: c.ptr.add(j0 * c.col_stride + i0),
                        ldc: c.col_stride,
                        accumulate: p0 > 0,
                    });
                }
            }
        }
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
    fn bands_pack_the_least_and_use_every_thread() {
        let shape = |m, n| Shape { m, n, k: 100 };
        // Many rows, few columns: bands of rows (each packs the small B).
        assert_eq!(bands(shape(4096, 512,), 8, 2), (2, 1));
        // Many columns: bands of columns (each packs the small A).
        assert_eq!(bands(shape(512, 4096), 8, 2), (1, 2));
        assert_eq!(bands(shape(2048, 2048), 8, 1), (1, 1));
        // Four threads on a square: two by two packs least.
        assert_eq!(bands(shape(2048, 2048), 8, 4), (2, 2));
        // Few rows: columns whatever the cost.
        assert_eq!(bands(shape(40, 30), 8, 2), (1, 2));
        // Few rows and one panel: one task.
        assert_eq!(bands(shape(40, 3), 8, 4), (1, 1));
        for (m, n, threads) in [(1, 1, 1), (100, 3, 4), (5000, 9, 16), (20, 300, 3)] {
            let (r, c) = bands(shape(m, n), 8, threads);
            assert!(r >= 1 && c >= 1 && r * c <= threads, "{m} x {n} on {threads}: {r} x {c}");
        }
    }
}
