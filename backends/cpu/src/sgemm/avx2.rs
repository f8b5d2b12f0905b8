//! The AVX2 + FMA path: a 16 x 6 micro-tile (BLIS's Haswell shape).
//!
//! Why 16 x 6: 12 accumulators (2 ymm of rows x 6 columns) leave 4 of the
//! 16 ymm registers for the 2 loads of packed A and the broadcast of packed
//! B; two FMA ports with a 4 or 5-cycle latency need 8 to 10 chains, so 12
//! keep them busy, and 8 loads per 12 FMAs stay within two loads a cycle.
//! On Zen 4 (one core, packed operands in cache) it ran at ~100 GFLOP/s,
//! as fast as the AVX-512 tile: there a 512-bit FMA is two 256-bit ones.
//!
//! Also the packer of B for the AVX-512 path (8 x 8 transposes).

use std::arch::x86_64::*;
use std::ops::Range;

use super::transpose::transpose8;
use super::{Block, Kernels, Lhs, LhsType, Rhs, portable};
use crate::isa::avx2_fn;

/// Rows of the micro-tile.
const MR: usize = 16;
/// Columns of the micro-tile.
const NR: usize = 6;
/// Floats per vector.
const W: usize = 8;

/// The AVX2 path's kernels.
pub(super) const KERNELS: Kernels = Kernels { mr: MR, nr: NR, pack_a, pack_b: pack_b::<NR>, block };

/// Const-generic tags of [`LhsType`] for the packers.
const F32: u8 = 0;
const F16: u8 = 1;
const BF16: u8 = 2;

avx2_fn! {
    /// Packs B (see [`Kernels::pack_b`]) into panels of `NR <= 8` columns:
    /// dense columns 8 steps at a time through 8 x 8 transposes, strided
    /// ones element by element.
    pub(super) unsafe fn pack_b<const NR: usize>(b: &Rhs, cols: Range<usize>, ks: Range<usize>, out: *mut f32) {
        if !b.dense() {
            // SAFETY: the caller's guarantee (Kernels::pack_b).
            return unsafe { portable::pack_b_general::<NR>(b, cols, ks, out) };
        }
        let kc = ks.len();
        // The lanes of a transposed row that belong to the panel.
        // SAFETY: LANE_MASKS[NR] is 8 i32s (NR <= 8: an out-of-range NR panics here).
        let lanes = unsafe { _mm256_loadu_si256(LANE_MASKS[NR].as_ptr() as *const __m256i) };
        for (q, j0) in cols.clone().step_by(NR).enumerate() {
            let n_cols = (cols.end - j0).min(NR);
            // SAFETY: panel q of the output (the caller's guarantee).
            let panel = unsafe { out.add(q * kc * NR) };
            // SAFETY: columns j0.. of B from step ks.start (clamped to a real column).
            let src: [*const f32; 8] = std::array::from_fn(|j| unsafe { b.at(ks.start, j0 + j.min(n_cols - 1)) });
            let mut p0 = 0;
            while p0 + W <= kc {
                let mut r = [_mm256_setzero_ps(); 8];
                // SAFETY: steps p0..p0 + 8 of the panel's columns are in B;
                // the panel's rows p0..p0 + 8 are in the output (masked to NR lanes).
                unsafe {
                    for j in 0..8 {
                        if j < n_cols {
                            r[j] = _mm256_loadu_ps(src[j].add(p0));
                        }
                    }
                    transpose8(&mut r);
                    for t in 0..W {
                        let at = panel.add((p0 + t) * NR);
                        if NR == 8 {
                            _mm256_storeu_ps(at, r[t]);
                        } else {
                            _mm256_maskstore_ps(at, lanes, r[t]);
                        }
                    }
                }
                p0 += W;
            }
            for p in p0..kc {
                for j in 0..NR {
                    // SAFETY: as above, one element at a time.
                    unsafe { *panel.add(p * NR + j) = if j < n_cols { *src[j].add(p) } else { 0.0 } };
                }
            }
        }
    }
}

/// `LANE_MASKS[n]`: the first `n` of 8 lanes set, for `_mm256_maskstore_ps`.
static LANE_MASKS: [[i32; 8]; 9] = {
    let mut masks = [[0; 8]; 9];
    let mut n = 0;
    while n <= 8 {
        let mut i = 0;
        while i < n {
            masks[n][i] = -1;
            i += 1;
        }
        n += 1;
    }
    masks
};

avx2_fn! {
    /// Packs A (see [`Kernels::pack_a`]): dense rows 8 at a time through
    /// 8 x 8 transposes, widened to f32 on the way; strided rows, and the
    /// last steps when fewer than 8, element by element.
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

avx2_fn! {
    /// 8 elements of type `T` at `p`, as f32.
    #[inline]
    unsafe fn load8<const T: u8>(p: *const u8) -> __m256 {
        // SAFETY: the caller's guarantee: 8 elements are readable.
        unsafe {
            match T {
                F32 => _mm256_loadu_ps(p as *const f32),
                F16 => _mm256_cvtph_ps(_mm_loadu_si128(p as *const __m128i)),
                _ => _mm256_castsi256_ps(_mm256_slli_epi32::<16>(_mm256_cvtepu16_epi32(_mm_loadu_si128(
                    p as *const __m128i,
                )))),
            }
        }
    }
}

avx2_fn! {
    /// [`pack_a`] for dense rows of type `T`.
    unsafe fn pack_a_dense<const T: u8>(a: &Lhs, rows: Range<usize>, ks: Range<usize>, out: *mut f32) {
        let kc = ks.len();
        let size = a.dtype.size();
        for (q, r0) in rows.clone().step_by(MR).enumerate() {
            let prows = (rows.end - r0).min(MR);
            // SAFETY: panel q of the output (the caller's guarantee).
            let panel = unsafe { out.add(q * kc * MR) };
            for g0 in (0..MR).step_by(W) {
                let n_rows = prows.saturating_sub(g0).min(W);
                // SAFETY: rows r0 + g0 .. + n_rows of A, from step ks.start (clamped to a real row).
                let src: [*const u8; W] = std::array::from_fn(|i| unsafe {
                    a.ptr.add((r0 + (g0 + i).min(prows - 1)) * a.row_stride + ks.start * size)
                });
                let mut p0 = 0;
                while p0 + W <= kc {
                    let mut r = [_mm256_setzero_ps(); W];
                    // SAFETY: 8 elements of each row from step p0 are in A;
                    // steps p0.. of the panel are in the output, 32-byte aligned.
                    unsafe {
                        if n_rows == W {
                            for i in 0..W {
                                r[i] = load8::<T>(src[i].add(p0 * size));
                            }
                        } else {
                            for i in 0..n_rows {
                                r[i] = load8::<T>(src[i].add(p0 * size));
                            }
                        }
                        transpose8(&mut r);
                        for t in 0..W {
                            _mm256_store_ps(panel.add((p0 + t) * MR + g0), r[t]);
                        }
                    }
                    p0 += W;
                }
                for p in p0..kc {
                    for i in 0..W {
                        // SAFETY: element (row, ks.start + p) is in A; the panel's slot is in the output.
                        unsafe {
                            let v = if i < n_rows { a.get(r0 + g0 + i, ks.start + p) } else { 0.0 };
                            *panel.add(p * MR + g0 + i) = v;
                        }
                    }
                }
            }
        }
    }
}

avx2_fn! {
    /// The macro-kernel (see [`Kernels::block`]).
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
                    if n_rows > W {
                        tile::<2>(t, n_rows, n_cols, accumulate);
                    } else {
                        tile::<1>(t, n_rows, n_cols, accumulate);
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

avx2_fn! {
    /// One `8·MV x NR` tile: `kc` steps of `MV` loads, `NR` broadcasts and
    /// `MV · NR` FMAs, then C's `rows x cols` corner set or added to.
    #[inline]
    unsafe fn tile<const MV: usize>(t: Tile, rows: usize, cols: usize, accumulate: bool) {
        let Tile { kc, a, b, c, ldc } = t;
        for j in 0..NR {
            if j < cols {
                // SAFETY: prefetches do not fault; the addresses are C's tile.
                unsafe {
                    let col = c.add(j * ldc);
                    _mm_prefetch::<_MM_HINT_T0>(col as *const i8);
                    _mm_prefetch::<_MM_HINT_T0>(col.add(rows - 1) as *const i8);
                }
            }
        }
        let mut acc = [[_mm256_setzero_ps(); MV]; NR];
        let (mut a, mut b) = (a, b);
        for _ in 0..kc {
            // SAFETY: packed A's panel holds kc steps of MR floats (32-byte
            // aligned), packed B's kc steps of NR.
            unsafe {
                let mut av = [_mm256_setzero_ps(); MV];
                for v in 0..MV {
                    av[v] = _mm256_load_ps(a.add(v * W));
                }
                for j in 0..NR {
                    let bj = _mm256_broadcast_ss(&*b.add(j));
                    for v in 0..MV {
                        acc[j][v] = _mm256_fmadd_ps(av[v], bj, acc[j][v]);
                    }
                }
                a = a.add(MR);
                b = b.add(NR);
            }
        }
        // SAFETY: LANE_MASKS has 9 rows; the last vector's rows are 1..=8.
        let last = unsafe { _mm256_loadu_si256(LANE_MASKS[rows - (MV - 1) * W].as_ptr() as *const __m256i) };
        for j in 0..NR {
            if j < cols {
                for v in 0..MV {
                    // SAFETY: C's tile holds `rows x cols`; a partial vector is masked to its rows.
                    unsafe {
                        let p = c.add(j * ldc + v * W);
                        if v + 1 < MV || rows == MV * W {
                            let r = if accumulate { _mm256_add_ps(_mm256_loadu_ps(p), acc[j][v]) } else { acc[j][v] };
                            _mm256_storeu_ps(p, r);
                        } else {
                            let r = if accumulate {
                                _mm256_add_ps(_mm256_maskload_ps(p, last), acc[j][v])
                            } else {
                                acc[j][v]
                            };
                            _mm256_maskstore_ps(p, last, r);
                        }
                    }
                }
            }
        }
    }
}
