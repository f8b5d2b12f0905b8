//! The AVX-512 path: a 48 x 8 micro-tile.
//!
//! Why 48 x 8: 24 accumulators (3 zmm of rows x 8 columns) leave 8 of the
//! 32 zmm registers for the 3 loads of packed A and the broadcast of packed
//! B. Each step of `k` is 3 loads, 8 broadcasts (loads too: `vbroadcastss`
//! from memory takes a load port, no shuffle) and 24 FMAs. That keeps both
//! kinds of core fed: Zen 4 runs one 512-bit FMA per cycle (two 256-bit
//! halves) with a 4-cycle latency, Intel's server cores two per cycle with
//! a 4-cycle latency, so 8 independent accumulators would do on the first
//! and 8 are the least on the second; 24 leave slack for both, and 11 loads
//! per 24 FMAs stay within two loads a cycle. Eight columns keep a packed B
//! panel of `kc` steps at 32·kc bytes, half of a 32 KiB L1 at kc = 512.
//! Measured on Zen 4 (one core, packed operands in cache): 48 x 8, 32 x 12,
//! 32 x 14 and 64 x 6 all ran at 100–107 GFLOP/s of the core's ~113, within
//! noise of each other; 48 x 8 also wastes the least on LLM shapes
//! (576, 1536 and 2048 rows are whole or nearly whole 48-row panels, and
//! 8-column panels round token counts up the least).
//!
//! Rows past the end of a panel (the last panel of a band) run the same
//! tile with 2 or 1 vectors of rows and masked loads and stores of C.

use std::arch::x86_64::*;
use std::ops::Range;

use super::transpose::transpose16;
use super::{Block, Kernels, Lhs, LhsType, portable};
use crate::isa::avx512_fn;

/// Rows of the micro-tile.
const MR: usize = 48;
/// Columns of the micro-tile.
const NR: usize = 8;
/// Floats per vector.
const W: usize = 16;

/// The AVX-512 path's kernels.
pub(super) const KERNELS: Kernels = Kernels { mr: MR, nr: NR, pack_a, pack_b: super::avx2::pack_b::<NR>, block };

/// Const-generic tags of [`LhsType`] for the packers.
const F32: u8 = 0;
const F16: u8 = 1;
const BF16: u8 = 2;

avx512_fn! {
    /// Packs A (see [`Kernels::pack_a`]): dense rows 16 at a time through
    /// 16 x 16 transposes, widened to f32 on the way; strided rows element
    /// by element.
    unsafe fn pack_a(a: &Lhs, rows: Range<usize>, ks: Range<usize>, out: *mut f32) {
        // SAFETY: the caller's guarantee (Kernels::pack_a).
        unsafe {
            match (a.dense(), a.dtype) {
                (false, _) => portable::pack_a_general::<MR>(a, rows, ks, out),
                (true, LhsType::F32) => pack_a_dense::<F32>(a, rows, ks, out),
                (true, LhsType::F16) => pack_a_dense::<F16>(a, rows, ks, out),
                (true, LhsType::BF16) => pack_a_dense::<BF16>(a, rows, ks, out),
            }
        }
    }
}

avx512_fn! {
    /// Up to 16 elements of type `T` at `p` (those in `mask`), as f32; the
    /// rest zero.
    #[inline]
    unsafe fn load16<const T: u8>(p: *const u8, mask: __mmask16) -> __m512 {
        // SAFETY: the caller's guarantee: the masked elements are readable
        // (masked-off ones are not touched).
        unsafe {
            match T {
                F32 => _mm512_maskz_loadu_ps(mask, p as *const f32),
                F16 => _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mask, p as *const i16)),
                _ => _mm512_castsi512_ps(_mm512_slli_epi32::<16>(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(
                    mask,
                    p as *const i16,
                )))),
            }
        }
    }
}

avx512_fn! {
    /// [`pack_a`] for dense rows of type `T`.
    unsafe fn pack_a_dense<const T: u8>(a: &Lhs, rows: Range<usize>, ks: Range<usize>, out: *mut f32) {
        let kc = ks.len();
        let size = a.dtype.size();
        for (q, r0) in rows.clone().step_by(MR).enumerate() {
            let prows = (rows.end - r0).min(MR);
            // SAFETY: panel q of the output (the caller's guarantee).
            let panel = unsafe { out.add(q * kc * MR) };
            for g0 in (0..MR).step_by(W) {
                if g0 >= prows {
                    for p in 0..kc {
                        // SAFETY: inside the panel; rows of 48 floats keep 64-byte alignment.
                        unsafe { _mm512_store_ps(panel.add(p * MR + g0), _mm512_setzero_ps()) };
                    }
                    continue;
                }
                let n_rows = (prows - g0).min(W);
                // SAFETY: rows r0 + g0 .. + n_rows of A, from step ks.start.
                let src: [*const u8; W] = std::array::from_fn(|i| unsafe {
                    a.ptr.add((r0 + g0 + i.min(n_rows - 1)) * a.row_stride + ks.start * size)
                });
                for p0 in (0..kc).step_by(W) {
                    let n_steps = (kc - p0).min(W);
                    let mask = (u32::MAX >> (32 - n_steps)) as __mmask16;
                    let mut r = [_mm512_setzero_ps(); W];
                    // SAFETY: n_steps elements of each row from step p0 are in A.
                    unsafe {
                        if n_rows == W {
                            for i in 0..W {
                                r[i] = load16::<T>(src[i].add(p0 * size), mask);
                            }
                        } else {
                            for i in 0..n_rows {
                                r[i] = load16::<T>(src[i].add(p0 * size), mask);
                            }
                        }
                    }
                    transpose16(&mut r);
                    // SAFETY: steps p0.. of the panel, 64-byte aligned.
                    unsafe {
                        let at = panel.add(p0 * MR + g0);
                        if n_steps == W {
                            for t in 0..W {
                                _mm512_store_ps(at.add(t * MR), r[t]);
                            }
                        } else {
                            for t in 0..n_steps {
                                _mm512_store_ps(at.add(t * MR), r[t]);
                            }
                        }
                    }
                }
            }
        }
    }
}

avx512_fn! {
    /// The macro-kernel (see [`Kernels::block`]): every tile of the block,
    /// a panel of packed B kept in L1 while the panels of packed A pass.
    unsafe fn block(blk: &Block) {
        let Block { kc, a, rows, b, cols, c, ldc, accumulate } = *blk;
        for jr in (0..cols).step_by(NR) {
            let n_cols = (cols - jr).min(NR);
            for ir in (0..rows).step_by(MR) {
                let n_rows = (rows - ir).min(MR);
                // SAFETY: panel ir / MR of packed A, panel jr / NR of packed
                // B, and C's tile at (ir, jr) are inside the block.
                unsafe {
                    let t = Tile { kc, a: a.add(ir * kc), b: b.add(jr * kc), c: c.add(jr * ldc + ir), ldc };
                    match n_rows.div_ceil(W) {
                        3 => tile::<3>(t, n_rows, n_cols, accumulate),
                        2 => tile::<2>(t, n_rows, n_cols, accumulate),
                        _ => tile::<1>(t, n_rows, n_cols, accumulate),
                    }
                }
            }
        }
    }
}

/// Where one micro-tile reads and writes.
#[derive(Clone, Copy)]
struct Tile {
    kc: usize,
    a: *const f32,
    b: *const f32,
    c: *mut f32,
    ldc: usize,
}

avx512_fn! {
    /// One `16·MV x NR` tile: `kc` steps of `MV` loads, `NR` broadcasts and
    /// `MV · NR` FMAs, then C's `rows x cols` corner set or added to.
    #[inline]
    unsafe fn tile<const MV: usize>(t: Tile, rows: usize, cols: usize, accumulate: bool) {
        let Tile { kc, a, b, c, ldc } = t;
        // C's lines are wanted at the end; fetch them while the FMAs run.
        for j in 0..NR {
            if j < cols {
                // SAFETY: prefetches do not fault; the addresses are C's tile.
                unsafe {
                    let col = c.add(j * ldc);
                    for v in 0..MV {
                        _mm_prefetch::<_MM_HINT_T0>(col.add(v * W) as *const i8);
                    }
                    _mm_prefetch::<_MM_HINT_T0>(col.add(rows - 1) as *const i8);
                }
            }
        }
        let mut acc = [[_mm512_setzero_ps(); MV]; NR];
        let (mut a, mut b) = (a, b);
        for _ in 0..kc {
            // SAFETY: packed A's panel holds kc steps of MR floats (64-byte
            // aligned), packed B's kc steps of NR.
            unsafe {
                let mut av = [_mm512_setzero_ps(); MV];
                for v in 0..MV {
                    av[v] = _mm512_load_ps(a.add(v * W));
                }
                for j in 0..NR {
                    let bj = _mm512_set1_ps(*b.add(j));
                    for v in 0..MV {
                        acc[j][v] = _mm512_fmadd_ps(av[v], bj, acc[j][v]);
                    }
                }
                a = a.add(MR);
                b = b.add(NR);
            }
        }
        let last = (u32::MAX >> (32 - (rows - (MV - 1) * W))) as __mmask16;
        for j in 0..NR {
            if j < cols {
                for v in 0..MV {
                    let mask = if v + 1 == MV { last } else { 0xFFFF };
                    // SAFETY: C's tile holds `rows x cols`; the masked lanes are its rows.
                    unsafe {
                        let p = c.add(j * ldc + v * W);
                        let r = if accumulate { _mm512_add_ps(_mm512_maskz_loadu_ps(mask, p), acc[j][v]) } else { acc[j][v] };
                        _mm512_mask_storeu_ps(p, mask, r);
                    }
                }
            }
        }
    }
}
