//! The portable path (no SIMD intrinsics; LLVM vectorizes the tile for the
//! baseline target: SSE2 on x86-64, where it ran at ~34 GFLOP/s on one Zen 4
//! core, a third of the AVX paths; NEON with FMA on AArch64), and the
//! element-by-element packers every path uses for strided operands
//! (permuted views).

use std::ops::Range;

use super::{Block, Kernels, Lhs, Rhs};

/// Rows of the micro-tile.
const MR: usize = 8;
/// Columns of the micro-tile.
const NR: usize = 4;

/// The portable path's kernels.
pub(super) const KERNELS: Kernels =
    Kernels { mr: MR, nr: NR, pack_a: pack_a_general::<MR>, pack_b: pack_b_general::<NR>, block };

/// Packs A (see [`Kernels::pack_a`]) into panels of `MR` rows, element by
/// element (any strides, any element type).
///
/// # Safety
/// As for [`Kernels::pack_a`].
pub(super) unsafe fn pack_a_general<const MR: usize>(a: &Lhs, rows: Range<usize>, ks: Range<usize>, out: *mut f32) {
    let kc = ks.len();
    for (q, r0) in rows.clone().step_by(MR).enumerate() {
        let prows = (rows.end - r0).min(MR);
        // SAFETY: panel q of the output holds kc x MR floats (the caller's guarantee).
        let panel = unsafe { std::slice::from_raw_parts_mut(out.add(q * kc * MR), kc * MR) };
        for (p, step) in panel.chunks_exact_mut(MR).enumerate() {
            for (i, v) in step.iter_mut().enumerate() {
                // SAFETY: element (r0 + i, ks.start + p) is in A for i < prows.
                *v = if i < prows { unsafe { a.get(r0 + i, ks.start + p) } } else { 0.0 };
            }
        }
    }
}

/// Packs B (see [`Kernels::pack_b`]) into panels of `NR` columns, element
/// by element (any strides).
///
/// # Safety
/// As for [`Kernels::pack_b`].
pub(super) unsafe fn pack_b_general<const NR: usize>(b: &Rhs, cols: Range<usize>, ks: Range<usize>, out: *mut f32) {
    let kc = ks.len();
    for (q, j0) in cols.clone().step_by(NR).enumerate() {
        let n_cols = (cols.end - j0).min(NR);
        // SAFETY: panel q of the output holds kc x NR floats (the caller's guarantee).
        let panel = unsafe { std::slice::from_raw_parts_mut(out.add(q * kc * NR), kc * NR) };
        for (p, step) in panel.chunks_exact_mut(NR).enumerate() {
            for (j, v) in step.iter_mut().enumerate() {
                // SAFETY: element (ks.start + p, j0 + j) is in B for j < n_cols.
                *v = if j < n_cols { unsafe { *b.at(ks.start + p, j0 + j) } } else { 0.0 };
            }
        }
    }
}

/// The macro-kernel (see [`Kernels::block`]).
///
/// # Safety
/// As for [`Kernels::block`].
unsafe fn block(blk: &Block) {
    let Block { kc, a, rows, b, cols, c, ldc, accumulate } = *blk;
    for jr in (0..cols).step_by(NR) {
        let n_cols = (cols - jr).min(NR);
        // SAFETY: panel jr / NR of packed B is in the block.
        let bp = unsafe { std::slice::from_raw_parts(b.add(jr * kc), kc * NR) };
        for ir in (0..rows).step_by(MR) {
            let n_rows = (rows - ir).min(MR);
            // SAFETY: panel ir / MR of packed A is in the block.
            let ap = unsafe { std::slice::from_raw_parts(a.add(ir * kc), kc * MR) };
            let acc = tile(ap, bp);
            for (j, col) in acc.iter().enumerate().take(n_cols) {
                // SAFETY: C's column jr + j holds rows ir..ir + n_rows of the block.
                let out = unsafe { std::slice::from_raw_parts_mut(c.add((jr + j) * ldc + ir), n_rows) };
                for (o, &s) in out.iter_mut().zip(col) {
                    *o = if accumulate { *o + s } else { s };
                }
            }
        }
    }
}

/// One `MR x NR` tile of packed A (`kc` steps of `MR`) times packed B (`kc`
/// steps of `NR`), in fixed-size arrays so that LLVM keeps the
/// accumulators in vector registers.
#[inline(always)]
fn tile(a: &[f32], b: &[f32]) -> [[f32; MR]; NR] {
    let mut acc = [[0f32; MR]; NR];
    for (av, bv) in a.chunks_exact(MR).zip(b.chunks_exact(NR)) {
        let av: &[f32; MR] = av.try_into().expect("chunks of MR");
        let bv: &[f32; NR] = bv.try_into().expect("chunks of NR");
        for j in 0..NR {
            for i in 0..MR {
                acc[j][i] = multiply_add(av[i], bv[j], acc[j][i]);
            }
        }
    }
    acc
}

/// `a · b + c`: fused where every CPU of the target has an FMA (AArch64),
/// else a product and a sum (`f32::mul_add` would call `fmaf` in software).
#[inline(always)]
fn multiply_add(a: f32, b: f32, c: f32) -> f32 {
    if cfg!(any(target_arch = "aarch64", target_feature = "fma")) { a.mul_add(b, c) } else { a * b + c }
}
