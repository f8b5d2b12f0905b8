//! AVX2 dot products of several weight rows with one activation row, for the
//! 32-value block types (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0): the batch-1
//! matrix-vector product of token generation.
//!
//! Against one row at a time ([`super::dot_avx2`]) this saves, per block:
//! - the activation block is loaded, and its f16 header converted, once for
//!   all rows;
//! - a weight block's two f16 header values (`d`, and `m` for the `_1`
//!   types) are converted by one `vcvtph2ps` and multiplied by the
//!   activation's (`d`, `s`) in one `vmulps`, so `d·d'` and `m·s` come out
//!   together;
//! - the offset types (Q4_0: q − 8, Q5_0: q − 16) multiply the unsigned
//!   quants and subtract the offset times the activation's lane sums, which
//!   are formed once per activation block, instead of the sign trick's two
//!   `vpsignb` per row;
//! - each row keeps one accumulator (the rows are the independent chains),
//!   and each row's reduction happens once, at its end.
//!
//! The weights stream from memory (a matrix-vector product reads each byte
//! once), so every row is prefetched [`PREFETCH`] bytes ahead: the hardware
//! prefetcher alone left the loads waiting on memory for about as long as
//! the arithmetic took.
//!
//! Callers must have checked AVX2, FMA and F16C (`Isa::Avx2`).

use std::arch::x86_64::*;

use gantry_engine::quant::{BlockQ4_0, BlockQ4_1, BlockQ5_0, BlockQ5_1, BlockQ8_0, BlockQ8_1, F16Bits};

use super::dot_avx2::{bytes_from_bits_32, bytes_from_nibbles_32, hsum_ps, load256};
use crate::isa::avx2_fn;

/// How far ahead of the block being multiplied each row is prefetched.
const PREFETCH: usize = 1024;
/// Blocks per step of the main loop: one round of prefetches per step.
pub(crate) const STEP: usize = 4;

/// The prefetches of the several-row kernels (this one and
/// [`super::rows_avx512`]): one round per [`STEP`] blocks of every row.
pub(crate) struct RowPrefetch {
    /// Bytes ahead of the current block.
    distance: usize,
    /// Cache lines per round and row.
    lines: usize,
}

impl RowPrefetch {
    /// The prefetches for `rows` rows of `nb` blocks of `B`.
    pub(crate) fn new<B>(nb: usize, rows: usize) -> RowPrefetch {
        // Rows shorter than a page lie several to a page, and R of them read
        // side by side do not look like a stream to the hardware prefetcher:
        // there each row prefetches its counterpart in the next group of R rows
        // (the caller's next call, on a dense matrix), which the whole call
        // leaves time to arrive.
        let row_bytes = nb * size_of::<B>();
        let distance = if row_bytes < 4096 { rows * row_bytes } else { PREFETCH };
        RowPrefetch { distance, lines: (STEP * size_of::<B>()).div_ceil(64) }
    }

    avx2_fn! {
        /// Prefetches the round of every row of `x` for the step at block `b`.
        #[inline]
        pub(crate) fn run<B, const R: usize>(&self, x: &[&[B]; R], b: usize) {
            for row in x {
                let ahead = row.as_ptr().wrapping_add(b).cast::<i8>().wrapping_add(self.distance);
                for l in 0..self.lines {
                    // A prefetch never faults, whatever the address.
                    _mm_prefetch::<_MM_HINT_T0>(ahead.wrapping_add(64 * l));
                }
            }
        }
    }
}

/// One activation block, prepared once for every weight row.
#[derive(Clone, Copy)]
pub(crate) struct Act {
    /// The 32 quants.
    q: __m256i,
    /// The header as f32: `d` in lane 0, `s` (Q8_1) in lane 1.
    h: __m128,
    /// Per i32 lane (4 values each), the weights' offset times the lane's sum
    /// of quants (offset types only), subtracted from the unsigned product.
    off: __m256i,
}

/// A 32-value weight block that [`dot_rows`] multiplies.
pub(crate) trait RowBlock: Sized {
    /// Its dot partner.
    type Y;
    /// Whether the block has a min (`x = d·q + m`), whose `m·s` term comes in lane 1 of the scales.
    const HAS_MIN: bool;

    /// Prepares an activation block for this weight type.
    ///
    /// # Safety
    /// AVX2, FMA and F16C are available.
    unsafe fn act(y: &Self::Y) -> Act;

    /// `Σ q·q'` of this block and `a` (8 f32 lanes), and the scales: `d·d'`
    /// in lane 0, `m·s` in lane 1 (when [`RowBlock::HAS_MIN`]).
    ///
    /// # Safety
    /// AVX2, FMA and F16C are available.
    unsafe fn dot(&self, a: &Act) -> (__m256, __m128);
}

avx2_fn! {
    /// Two consecutive f16 values as f32 in lanes 0 and 1.
    #[inline]
    fn f16_pair(a: F16Bits, b: F16Bits) -> __m128 {
        let bits = u32::from(a.bits()) | (u32::from(b.bits()) << 16);
        _mm_cvtph_ps(_mm_cvtsi32_si128(bits as i32))
    }
}

avx2_fn! {
    /// One f16 value as f32 in lane 0 (lane 1 zero).
    #[inline]
    fn f16_one(a: F16Bits) -> __m128 {
        _mm_cvtph_ps(_mm_cvtsi32_si128(i32::from(a.bits())))
    }
}

avx2_fn! {
    /// The fifth bits of a Q5 block as 0x10 in each byte where set.
    #[inline]
    fn fifth_bits(qh: [u8; 4]) -> __m256i {
        _mm256_and_si256(bytes_from_bits_32(qh), _mm256_set1_epi8(0x10))
    }
}

avx2_fn! {
    /// Σ u·s over 32 byte pairs (u unsigned, s signed, |u·s| pair sums within i16), as 8 i32 lanes.
    #[inline]
    fn mul_sum_us8(u: __m256i, s: __m256i) -> __m256i {
        _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1))
    }
}

avx2_fn! {
    /// The offset term of an activation block: `offset · Σ q` per i32 lane.
    #[inline]
    fn lane_sums_times<const SHIFT: i32>(q: __m256i) -> __m256i {
        _mm256_slli_epi32::<SHIFT>(mul_sum_us8(_mm256_set1_epi8(1), q))
    }
}

impl RowBlock for BlockQ4_0 {
    type Y = BlockQ8_0;
    const HAS_MIN: bool = false;
    avx2_fn! {
        #[inline]
        unsafe fn act(y: &BlockQ8_0) -> Act {
            let q = load256(&y.qs);
            Act { q, h: f16_one(y.d), off: lane_sums_times::<3>(q) }
        }
    }
    avx2_fn! {
        #[inline]
        unsafe fn dot(&self, a: &Act) -> (__m256, __m128) {
            let s = _mm256_sub_epi32(mul_sum_us8(bytes_from_nibbles_32(&self.qs), a.q), a.off);
            (_mm256_cvtepi32_ps(s), _mm_mul_ps(f16_one(self.d), a.h))
        }
    }
}

impl RowBlock for BlockQ4_1 {
    type Y = BlockQ8_1;
    const HAS_MIN: bool = true;
    avx2_fn! {
        #[inline]
        unsafe fn act(y: &BlockQ8_1) -> Act {
            Act { q: load256(&y.qs), h: f16_pair(y.d, y.s), off: _mm256_setzero_si256() }
        }
    }
    avx2_fn! {
        #[inline]
        unsafe fn dot(&self, a: &Act) -> (__m256, __m128) {
            let s = mul_sum_us8(bytes_from_nibbles_32(&self.qs), a.q);
            (_mm256_cvtepi32_ps(s), _mm_mul_ps(f16_pair(self.d, self.m), a.h))
        }
    }
}

impl RowBlock for BlockQ5_0 {
    type Y = BlockQ8_0;
    const HAS_MIN: bool = false;
    avx2_fn! {
        #[inline]
        unsafe fn act(y: &BlockQ8_0) -> Act {
            let q = load256(&y.qs);
            Act { q, h: f16_one(y.d), off: lane_sums_times::<4>(q) }
        }
    }
    avx2_fn! {
        #[inline]
        unsafe fn dot(&self, a: &Act) -> (__m256, __m128) {
            let u = _mm256_or_si256(bytes_from_nibbles_32(&self.qs), fifth_bits(self.qh));
            let s = _mm256_sub_epi32(mul_sum_us8(u, a.q), a.off);
            (_mm256_cvtepi32_ps(s), _mm_mul_ps(f16_one(self.d), a.h))
        }
    }
}

impl RowBlock for BlockQ5_1 {
    type Y = BlockQ8_1;
    const HAS_MIN: bool = true;
    avx2_fn! {
        #[inline]
        unsafe fn act(y: &BlockQ8_1) -> Act {
            Act { q: load256(&y.qs), h: f16_pair(y.d, y.s), off: _mm256_setzero_si256() }
        }
    }
    avx2_fn! {
        #[inline]
        unsafe fn dot(&self, a: &Act) -> (__m256, __m128) {
            let u = _mm256_or_si256(bytes_from_nibbles_32(&self.qs), fifth_bits(self.qh));
            (_mm256_cvtepi32_ps(mul_sum_us8(u, a.q)), _mm_mul_ps(f16_pair(self.d, self.m), a.h))
        }
    }
}

impl RowBlock for BlockQ8_0 {
    type Y = BlockQ8_0;
    const HAS_MIN: bool = false;
    avx2_fn! {
        #[inline]
        unsafe fn act(y: &BlockQ8_0) -> Act {
            Act { q: load256(&y.qs), h: f16_one(y.d), off: _mm256_setzero_si256() }
        }
    }
    avx2_fn! {
        #[inline]
        unsafe fn dot(&self, a: &Act) -> (__m256, __m128) {
            // Signed × signed: |x| times y with x's sign (neither is −128).
            let x = load256(&self.qs);
            let s = mul_sum_us8(_mm256_sign_epi8(x, x), _mm256_sign_epi8(a.q, x));
            (_mm256_cvtepi32_ps(s), _mm_mul_ps(f16_one(self.d), a.h))
        }
    }
}

avx2_fn! {
    /// Adds block `b` of every row to the accumulators.
    #[inline]
    fn accumulate<B: RowBlock, const R: usize>(
        x: &[&[B]; R],
        a: &Act,
        b: usize,
        acc: &mut [__m256; R],
        mins: &mut [__m128; R],
    ) {
        for r in 0..R {
            // SAFETY: the CPU features are this function's own.
            let (s, scales) = unsafe { x[r][b].dot(a) };
            acc[r] = _mm256_fmadd_ps(_mm256_broadcastss_ps(scales), s, acc[r]);
            if B::HAS_MIN {
                mins[r] = _mm_add_ps(mins[r], scales);
            }
        }
    }
}

avx2_fn! {
    /// `[row r · y for r < R]`, each row of `x` and `y` cut to the blocks they all hold.
    pub(crate) fn dot_rows<B: RowBlock, const R: usize>(x: [&[B]; R], y: &[B::Y]) -> [f32; R] {
        let nb = x.iter().fold(y.len(), |n, r| n.min(r.len()));
        let x: [&[B]; R] = x.map(|r| &r[..nb]);
        let y = &y[..nb];
        let mut acc = [_mm256_setzero_ps(); R];
        let mut mins = [_mm_setzero_ps(); R];
        let prefetch = RowPrefetch::new::<B>(nb, R);
        let mut b = 0;
        while b + STEP <= nb {
            prefetch.run(&x, b);
            for u in 0..STEP {
                // SAFETY: the CPU features are this function's own.
                let a = unsafe { B::act(&y[b + u]) };
                accumulate(&x, &a, b + u, &mut acc, &mut mins);
            }
            b += STEP;
        }
        for b in b..nb {
            // SAFETY: as above.
            let a = unsafe { B::act(&y[b]) };
            accumulate(&x, &a, b, &mut acc, &mut mins);
        }
        std::array::from_fn(|r| {
            let min_term = if B::HAS_MIN { _mm_cvtss_f32(_mm_movehdup_ps(mins[r])) } else { 0.0 };
            hsum_ps(acc[r]) + min_term
        })
    }
}
