//! AVX2 integer dot products (x86-64 with AVX2, FMA and F16C).
//!
//! The core step is `vpmaddubsw`: unsigned bytes times signed bytes, adjacent
//! pairs summed to i16, then `vpmaddwd` to i32. Signed weights use the sign
//! trick (|x| times y with x's sign) so both operands fit. The K-quants keep
//! integer sums over a whole super-block (group scales applied with
//! `vpmaddwd`) and fold the weight offsets and mins in through the
//! activation's per-16 sums `bsums`, so each 32 values cost a handful of
//! instructions.
//!
//! Every function here is `unsafe` only through `#[target_feature]`: callers
//! must have checked AVX2, FMA and F16C (`Isa::Avx2`).

use std::arch::x86_64::*;

use crate::isa::{avx2_fn, avx2_only_fn};
use gantry_engine::quant::{
    BlockIQ4NL, BlockIQ4XS, BlockMXFP4, BlockQ2K, BlockQ3K, BlockQ4_0, BlockQ4_1, BlockQ4K, BlockQ5_0, BlockQ5_1,
    BlockQ5K, BlockQ6K, BlockQ8_0, BlockQ8_1, BlockQ8K, F16Bits, KVALUES_IQ4NL, KVALUES_MXFP4,
};

/// Runs `$step(xb, yb, acc) -> acc` over the block pairs with four
/// independent accumulators, so consecutive blocks do not wait on each
/// other's fused multiply-add (4 cycles of latency) — and sums them.
macro_rules! unrolled_blocks {
    ($x:expr, $y:expr, |$xb:ident, $yb:ident, $acc:ident| $step:expr) => {{
        let (x, y) = ($x, $y);
        let mut accs = [_mm256_setzero_ps(); 4];
        let (mut xs, mut ys) = (x.chunks_exact(4), y.chunks_exact(4));
        for (xc, yc) in (&mut xs).zip(&mut ys) {
            for u in 0..4 {
                let ($xb, $yb, $acc) = (&xc[u], &yc[u], accs[u]);
                accs[u] = $step;
            }
        }
        for ($xb, $yb) in xs.remainder().iter().zip(ys.remainder()) {
            let $acc = accs[0];
            accs[0] = $step;
        }
        _mm256_add_ps(_mm256_add_ps(accs[0], accs[1]), _mm256_add_ps(accs[2], accs[3]))
    }};
}

avx2_fn! {
    #[inline]
    pub(crate) fn f16_to_f32(h: F16Bits) -> f32 {
        _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h.bits() as i32)))
    }
}

avx2_fn! {
    #[inline]
    pub(crate) fn hsum_ps(v: __m256) -> f32 {
        hsum_ps128(_mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v)))
    }
}

avx2_fn! {
    /// 32 unaligned bytes.
    #[inline]
    pub(crate) fn load256(p: &[i8; 32]) -> __m256i {
        // SAFETY: `p` is 32 bytes; unaligned load.
        unsafe { _mm256_loadu_si256(p.as_ptr().cast()) }
    }
}

avx2_fn! {
    /// The first 32 bytes of `p` (which must hold them), unaligned.
    #[inline]
    pub(crate) fn load256_u8(p: &[u8]) -> __m256i {
        let p: &[u8; 32] = p[..32].try_into().unwrap_or(&[0; 32]);
        // SAFETY: `p` is 32 bytes; unaligned load.
        unsafe { _mm256_loadu_si256(p.as_ptr().cast()) }
    }
}

avx2_fn! {
    /// 16 bytes of nibbles to 32 bytes: low nibbles first, then high nibbles.
    #[inline]
    pub(crate) fn bytes_from_nibbles_32(qs: &[u8; 16]) -> __m256i {
        // SAFETY: `qs` is 16 bytes; unaligned load.
        let tmp = unsafe { _mm_loadu_si128(qs.as_ptr().cast()) };
        let both = _mm256_set_m128i(_mm_srli_epi16::<4>(tmp), tmp);
        _mm256_and_si256(both, _mm256_set1_epi8(0x0F))
    }
}

avx2_fn! {
    /// 32 bits to 32 bytes: 0xFF where bit j of `qh` is set, else 0.
    #[inline]
    pub(crate) fn bytes_from_bits_32(qh: [u8; 4]) -> __m256i {
        let x = _mm256_set1_epi32(u32::from_le_bytes(qh) as i32);
        // Byte j takes source byte j / 8 ...
        let spread = _mm256_setr_epi8(
            0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, //
            2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3,
        );
        let x = _mm256_shuffle_epi8(x, spread);
        // ... and is all ones exactly when its bit j % 8 is set.
        let others = _mm256_set1_epi64x(0x7fbf_dfef_f7fb_fdfe_u64 as i64);
        let x = _mm256_or_si256(x, others);
        _mm256_cmpeq_epi8(x, _mm256_set1_epi64x(-1))
    }
}

avx2_fn! {
    /// Σ x·y over 32 byte pairs (x unsigned ≤ 127·2 per pair-sum bound, y signed), as 8 i32 lanes.
    #[inline]
    fn mul_sum_us8_pairs(ax: __m256i, sy: __m256i) -> __m256i {
        _mm256_madd_epi16(_mm256_maddubs_epi16(ax, sy), _mm256_set1_epi16(1))
    }
}

avx2_fn! {
    /// Σ x·y over 32 signed byte pairs (neither −128), as 8 f32 lanes.
    #[inline]
    fn mul_sum_i8_pairs_float(x: __m256i, y: __m256i) -> __m256 {
        let ax = _mm256_sign_epi8(x, x);
        let sy = _mm256_sign_epi8(y, x);
        _mm256_cvtepi32_ps(mul_sum_us8_pairs(ax, sy))
    }
}

avx2_fn! {
    /// Q4_0 · Q8_0.
    pub fn vec_dot_q4_0_q8_0(x: &[BlockQ4_0], y: &[BlockQ8_0]) -> f32 {
        let acc = unrolled_blocks!(x, y, |xb, yb, acc| {
            let d = _mm256_set1_ps(f16_to_f32(xb.d) * f16_to_f32(yb.d));
            let qx = _mm256_sub_epi8(bytes_from_nibbles_32(&xb.qs), _mm256_set1_epi8(8));
            let qy = load256(&yb.qs);
            _mm256_fmadd_ps(d, mul_sum_i8_pairs_float(qx, qy), acc)
        });
        hsum_ps(acc)
    }
}

avx2_fn! {
    /// Q4_1 · Q8_1.
    pub fn vec_dot_q4_1_q8_1(x: &[BlockQ4_1], y: &[BlockQ8_1]) -> f32 {
        let acc = unrolled_blocks!(x, y, |xb, yb, acc| {
            let d = _mm256_set1_ps(f16_to_f32(xb.d) * f16_to_f32(yb.d));
            let qx = bytes_from_nibbles_32(&xb.qs);
            let qy = load256(&yb.qs);
            // m·s spread over the 8 lanes (an exact eighth each) rides on the same accumulator.
            let ms = _mm256_set1_ps(0.125 * f16_to_f32(xb.m) * f16_to_f32(yb.s));
            _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(mul_sum_us8_pairs(qx, qy)), _mm256_add_ps(acc, ms))
        });
        hsum_ps(acc)
    }
}

avx2_fn! {
    /// Q5_0 · Q8_0.
    pub fn vec_dot_q5_0_q8_0(x: &[BlockQ5_0], y: &[BlockQ8_0]) -> f32 {
        let acc = unrolled_blocks!(x, y, |xb, yb, acc| {
            let d = _mm256_set1_ps(f16_to_f32(xb.d) * f16_to_f32(yb.d));
            // Where the fifth bit is clear, OR-ing 0xF0 makes the byte q − 16;
            // where it is set, (q + 16) − 16 = q is the nibble itself.
            let high = _mm256_andnot_si256(bytes_from_bits_32(xb.qh), _mm256_set1_epi8(0xF0u8 as i8));
            let qx = _mm256_or_si256(bytes_from_nibbles_32(&xb.qs), high);
            let qy = load256(&yb.qs);
            _mm256_fmadd_ps(d, mul_sum_i8_pairs_float(qx, qy), acc)
        });
        hsum_ps(acc)
    }
}

avx2_fn! {
    /// Q5_1 · Q8_1.
    pub fn vec_dot_q5_1_q8_1(x: &[BlockQ5_1], y: &[BlockQ8_1]) -> f32 {
        let acc = unrolled_blocks!(x, y, |xb, yb, acc| {
            let d = _mm256_set1_ps(f16_to_f32(xb.d) * f16_to_f32(yb.d));
            let high = _mm256_and_si256(bytes_from_bits_32(xb.qh), _mm256_set1_epi8(0x10));
            let qx = _mm256_or_si256(bytes_from_nibbles_32(&xb.qs), high);
            let qy = load256(&yb.qs);
            // m·s spread over the 8 lanes (an exact eighth each) rides on the same accumulator.
            let ms = _mm256_set1_ps(0.125 * f16_to_f32(xb.m) * f16_to_f32(yb.s));
            _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(mul_sum_us8_pairs(qx, qy)), _mm256_add_ps(acc, ms))
        });
        hsum_ps(acc)
    }
}

avx2_fn! {
    /// Q8_0 · Q8_0.
    pub fn vec_dot_q8_0_q8_0(x: &[BlockQ8_0], y: &[BlockQ8_0]) -> f32 {
        let acc = unrolled_blocks!(x, y, |xb, yb, acc| {
            let d = _mm256_set1_ps(f16_to_f32(xb.d) * f16_to_f32(yb.d));
            _mm256_fmadd_ps(d, mul_sum_i8_pairs_float(load256(&xb.qs), load256(&yb.qs)), acc)
        });
        hsum_ps(acc)
    }
}

/// How far ahead of the super-block being multiplied the K-quant dots
/// prefetch the weights (a few blocks: the row streams from memory once,
/// and the hardware prefetcher alone left the loads waiting).
pub(crate) const K_PREFETCH: usize = 2048;

avx2_fn! {
    /// Prefetches the cache lines of one `T` lying `distance` bytes past `block`.
    #[inline]
    pub(crate) fn prefetch_ahead<T>(block: &T, distance: usize) {
        let p = (block as *const T).cast::<i8>().wrapping_add(distance);
        for l in 0..size_of::<T>().div_ceil(64) {
            // A prefetch never faults, whatever the address.
            _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(64 * l));
        }
    }
}

avx2_fn! {
    /// 16 i16 lanes: group scale `g` in lanes 0..8, group `g + 1` in lanes 8..16 —
    /// the layout `vpmaddubsw` gives the products of 32 bytes of two 16-groups.
    #[inline]
    fn pair_scales(scales8: __m128i, g: usize) -> __m256i {
        let (a, b) = (g as i8, g as i8 + 1);
        let ctrl = _mm_setr_epi8(a, a, a, a, a, a, a, a, b, b, b, b, b, b, b, b);
        _mm256_cvtepi8_epi16(_mm_shuffle_epi8(scales8, ctrl))
    }
}

avx2_fn! {
    /// Σ_g sc_g · bsums_g over the 16 groups, 8 i32 lanes (sum them for the total).
    #[inline]
    pub(crate) fn scaled_bsums(scales8: __m128i, bsums: &[i16; 16]) -> __m256i {
        // SAFETY: `bsums` is 32 bytes; unaligned load.
        let b = unsafe { _mm256_loadu_si256(bsums.as_ptr().cast()) };
        _mm256_madd_epi16(_mm256_cvtepi8_epi16(scales8), b)
    }
}

avx2_fn! {
    /// Q2_K's group scales (the low nibbles of `scales`) and, per i32 lane, the
    /// group mins (the high nibbles) times the activation's per-16 sums.
    #[inline]
    pub(crate) fn q2k_scales_and_min_sums(xb: &BlockQ2K, yb: &BlockQ8K) -> (__m128i, __m256i) {
        // SAFETY: `scales` is 16 bytes; unaligned load.
        let sm = unsafe { _mm_loadu_si128(xb.scales.as_ptr().cast()) };
        let scales8 = _mm_and_si128(sm, _mm_set1_epi8(0xF));
        let mins8 = _mm_and_si128(_mm_srli_epi16::<4>(sm), _mm_set1_epi8(0xF));
        (scales8, scaled_bsums(mins8, &yb.bsums))
    }
}

avx2_fn! {
    /// Q2_K · Q8_K.
    pub fn vec_dot_q2_k_q8_k(x: &[BlockQ2K], y: &[BlockQ8K]) -> f32 {
        let mut acc = _mm256_setzero_ps();
        let mut acc_m = _mm256_setzero_ps();
        let m3 = _mm256_set1_epi8(3);
        for (xb, yb) in x.iter().zip(y) {
            prefetch_ahead(xb, K_PREFETCH);
            let d = yb.d * f16_to_f32(xb.d);
            let dmin = -yb.d * f16_to_f32(xb.dmin);
            let (scales8, min_sums) = q2k_scales_and_min_sums(xb, yb);
            acc_m = _mm256_fmadd_ps(_mm256_set1_ps(dmin), _mm256_cvtepi32_ps(min_sums), acc_m);

            let mut sumi = _mm256_setzero_si256();
            for half in 0..2 {
                let bits = load256_u8(&xb.qs[32 * half..]);
                let q = [
                    _mm256_and_si256(bits, m3),
                    _mm256_and_si256(_mm256_srli_epi16::<2>(bits), m3),
                    _mm256_and_si256(_mm256_srli_epi16::<4>(bits), m3),
                    _mm256_and_si256(_mm256_srli_epi16::<6>(bits), m3),
                ];
                for (k, qk) in q.into_iter().enumerate() {
                    let a = load256_u8_i8(&yb.qs[128 * half + 32 * k..]);
                    let p = _mm256_maddubs_epi16(qk, a);
                    sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, pair_scales(scales8, 8 * half + 2 * k)));
                }
            }
            acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
        }
        hsum_ps(_mm256_add_ps(acc, acc_m))
    }
}

avx2_fn! {
    #[inline]
    fn load256_u8_i8(p: &[i8]) -> __m256i {
        let p: &[i8; 32] = p[..32].try_into().unwrap_or(&[0; 32]);
        load256(p)
    }
}

avx2_fn! {
    /// Q3_K · Q8_K.
    pub fn vec_dot_q3_k_q8_k(x: &[BlockQ3K], y: &[BlockQ8K]) -> f32 {
        let mut acc = _mm256_setzero_ps();
        let m3 = _mm256_set1_epi8(3);
        let one = _mm256_set1_epi8(1);
        for (xb, yb) in x.iter().zip(y) {
            prefetch_ahead(xb, K_PREFETCH);
            let d = yb.d * f16_to_f32(xb.d);
            let sc = xb.unpacked_scales();
            // SAFETY: `sc` is 16 bytes; unaligned load.
            let scales8 = unsafe { _mm_loadu_si128(sc.as_ptr().cast()) };
            let hbits = load256_u8(&xb.hmask);
            // value = (low2 | high << 2) − 4: the −4 goes in through the bsums.
            let mut sumi =
                _mm256_slli_epi32::<2>(_mm256_sub_epi32(_mm256_setzero_si256(), scaled_bsums(scales8, &yb.bsums)));
            for half in 0..2 {
                let bits = load256_u8(&xb.qs[32 * half..]);
                for k in 0..4 {
                    let low = _mm256_and_si256(_mm256_srl_epi16(bits, _mm_cvtsi32_si128(2 * k as i32)), m3);
                    let shift = _mm_cvtsi32_si128((4 * half + k) as i32);
                    let high = _mm256_and_si256(_mm256_srl_epi16(hbits, shift), one);
                    let q = _mm256_or_si256(low, _mm256_slli_epi16::<2>(high));
                    let a = load256_u8_i8(&yb.qs[128 * half + 32 * k..]);
                    let p = _mm256_maddubs_epi16(q, a);
                    sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, pair_scales(scales8, 8 * half + 2 * k)));
                }
            }
            acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
        }
        hsum_ps(acc)
    }
}

avx2_fn! {
    /// Q4_K · Q8_K.
    pub fn vec_dot_q4_k_q8_k(x: &[BlockQ4K], y: &[BlockQ8K]) -> f32 {
        let mut acc = _mm256_setzero_ps();
        let mut acc_m = _mm_setzero_ps();
        let m4 = _mm256_set1_epi8(0xF);
        for (xb, yb) in x.iter().zip(y) {
            prefetch_ahead(xb, K_PREFETCH);
            let d = yb.d * f16_to_f32(xb.d);
            let dmin = yb.d * f16_to_f32(xb.dmin);
            let (scales, mins) = k4_scales_mins_simd(&xb.scales);
            acc_m = _mm_fmadd_ps(_mm_set1_ps(dmin), _mm_cvtepi32_ps(mins_dot_bsums_simd(mins, &yb.bsums)), acc_m);
            let scales = _mm256_broadcastsi128_si256(scales);
            let mut sumi = _mm256_setzero_si256();
            for c in 0..4 {
                let bits = load256_u8(&xb.qs[32 * c..]);
                let lo = _mm256_and_si256(bits, m4);
                let hi = _mm256_and_si256(_mm256_srli_epi16::<4>(bits), m4);
                let p_lo = _mm256_maddubs_epi16(lo, load256_u8_i8(&yb.qs[64 * c..]));
                let p_hi = _mm256_maddubs_epi16(hi, load256_u8_i8(&yb.qs[64 * c + 32..]));
                let p_lo = _mm256_madd_epi16(p_lo, broadcast_lane16(scales, 2 * c));
                let p_hi = _mm256_madd_epi16(p_hi, broadcast_lane16(scales, 2 * c + 1));
                sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(p_lo, p_hi));
            }
            acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
        }
        hsum_ps(acc) - hsum_ps128(acc_m)
    }
}

avx2_only_fn! {
    /// The 8 six-bit scales and 8 six-bit mins of a Q4_K/Q5_K block as i16
    /// lanes (scales, mins), unpacked with whole-word masks instead of per
    /// group: bytes 0..4 hold the low 6 bits of scales 0..4, bytes 4..8 those of
    /// mins 0..4, bytes 8..12 the low 4 bits of scales and mins 4..8 (low and
    /// high nibble), and the top 2 bits of bytes 0..8 complete groups 4..8.
    #[inline]
    pub(crate) fn k4_scales_mins_simd(packed: &[u8; 12]) -> (__m128i, __m128i) {
        const LOW6: u32 = 0x3f3f_3f3f;
        const LOW4: u32 = 0x0f0f_0f0f;
        const LOW2: u32 = 0x0303_0303;
        let w = |i: usize| u32::from_le_bytes([packed[4 * i], packed[4 * i + 1], packed[4 * i + 2], packed[4 * i + 3]]);
        let (w0, w1, w2) = (w(0), w(1), w(2));
        let scales_lo = w0 & LOW6;
        let scales_hi = (w2 & LOW4) | (((w0 >> 6) & LOW2) << 4);
        let mins_lo = w1 & LOW6;
        let mins_hi = ((w2 >> 4) & LOW4) | (((w1 >> 6) & LOW2) << 4);
        let bytes = _mm_set_epi32(mins_hi as i32, mins_lo as i32, scales_hi as i32, scales_lo as i32);
        (_mm_cvtepu8_epi16(bytes), _mm_cvtepu8_epi16(_mm_srli_si128::<8>(bytes)))
    }
}

avx2_only_fn! {
    /// Σ_g mins_g · (bsums[2g] + bsums[2g + 1]), as four i32 partial sums.
    #[inline]
    pub(crate) fn mins_dot_bsums_simd(mins: __m128i, bsums: &[i16; 16]) -> __m128i {
        // SAFETY: `bsums` is 32 bytes; unaligned loads.
        let (lo, hi) =
            unsafe { (_mm_loadu_si128(bsums.as_ptr().cast()), _mm_loadu_si128(bsums.as_ptr().add(8).cast())) };
        // Pairs of 16-value sums: each at most 2 · 16 · 127 in magnitude, no overflow.
        _mm_madd_epi16(mins, _mm_hadd_epi16(lo, hi))
    }
}

avx2_only_fn! {
    /// All sixteen i16 lanes set to lane `lane` (0..8) of the low half of `v`.
    #[inline]
    fn broadcast_lane16(v: __m256i, lane: usize) -> __m256i {
        let b = (2 * lane) as i8;
        _mm256_shuffle_epi8(v, _mm256_set1_epi16(i16::from_le_bytes([b as u8, b as u8 + 1])))
    }
}

avx2_only_fn! {
    /// Sum of the four lanes of `v`.
    #[inline]
    pub(crate) fn hsum_ps128(v: __m128) -> f32 {
        let v = _mm_add_ps(v, _mm_movehl_ps(v, v));
        _mm_cvtss_f32(_mm_add_ss(v, _mm_movehdup_ps(v)))
    }
}

avx2_fn! {
    /// Q5_K · Q8_K.
    pub fn vec_dot_q5_k_q8_k(x: &[BlockQ5K], y: &[BlockQ8K]) -> f32 {
        let mut acc = _mm256_setzero_ps();
        let mut acc_m = _mm_setzero_ps();
        let m4 = _mm256_set1_epi8(0xF);
        let one = _mm256_set1_epi8(1);
        for (xb, yb) in x.iter().zip(y) {
            prefetch_ahead(xb, K_PREFETCH);
            let d = yb.d * f16_to_f32(xb.d);
            let dmin = yb.d * f16_to_f32(xb.dmin);
            let (scales, mins) = k4_scales_mins_simd(&xb.scales);
            acc_m = _mm_fmadd_ps(_mm_set1_ps(dmin), _mm_cvtepi32_ps(mins_dot_bsums_simd(mins, &yb.bsums)), acc_m);
            let scales = _mm256_broadcastsi128_si256(scales);
            let hbits = load256_u8(&xb.qh);
            let mut sumi = _mm256_setzero_si256();
            for c in 0..4 {
                let bits = load256_u8(&xb.qs[32 * c..]);
                let h_lo = _mm256_and_si256(_mm256_srl_epi16(hbits, _mm_cvtsi32_si128(2 * c as i32)), one);
                let h_hi = _mm256_and_si256(_mm256_srl_epi16(hbits, _mm_cvtsi32_si128(2 * c as i32 + 1)), one);
                let lo = _mm256_or_si256(_mm256_and_si256(bits, m4), _mm256_slli_epi16::<4>(h_lo));
                let hi =
                    _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16::<4>(bits), m4), _mm256_slli_epi16::<4>(h_hi));
                let p_lo = _mm256_maddubs_epi16(lo, load256_u8_i8(&yb.qs[64 * c..]));
                let p_hi = _mm256_maddubs_epi16(hi, load256_u8_i8(&yb.qs[64 * c + 32..]));
                let p_lo = _mm256_madd_epi16(p_lo, broadcast_lane16(scales, 2 * c));
                let p_hi = _mm256_madd_epi16(p_hi, broadcast_lane16(scales, 2 * c + 1));
                sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(p_lo, p_hi));
            }
            acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
        }
        hsum_ps(acc) - hsum_ps128(acc_m)
    }
}

avx2_fn! {
    /// Q6_K · Q8_K.
    pub fn vec_dot_q6_k_q8_k(x: &[BlockQ6K], y: &[BlockQ8K]) -> f32 {
        let mut acc = _mm256_setzero_ps();
        let m4 = _mm256_set1_epi8(0xF);
        let m2 = _mm256_set1_epi8(3);
        for (xb, yb) in x.iter().zip(y) {
            prefetch_ahead(xb, K_PREFETCH);
            let d = yb.d * f16_to_f32(xb.d);
            // SAFETY: `scales` is 16 bytes; unaligned load.
            let scales8 = unsafe { _mm_loadu_si128(xb.scales.as_ptr().cast()) };
            // value = q6 − 32: the −32 goes in through the bsums.
            let mut sumi =
                _mm256_slli_epi32::<5>(_mm256_sub_epi32(_mm256_setzero_si256(), scaled_bsums(scales8, &yb.bsums)));
            for h in 0..2 {
                let ql0 = load256_u8(&xb.ql[64 * h..]);
                let ql1 = load256_u8(&xb.ql[64 * h + 32..]);
                let qh = load256_u8(&xb.qh[32 * h..]);
                let q = [
                    _mm256_or_si256(_mm256_and_si256(ql0, m4), _mm256_slli_epi16::<4>(_mm256_and_si256(qh, m2))),
                    _mm256_or_si256(
                        _mm256_and_si256(ql1, m4),
                        _mm256_slli_epi16::<4>(_mm256_and_si256(_mm256_srli_epi16::<2>(qh), m2)),
                    ),
                    _mm256_or_si256(
                        _mm256_and_si256(_mm256_srli_epi16::<4>(ql0), m4),
                        _mm256_slli_epi16::<4>(_mm256_and_si256(_mm256_srli_epi16::<4>(qh), m2)),
                    ),
                    _mm256_or_si256(
                        _mm256_and_si256(_mm256_srli_epi16::<4>(ql1), m4),
                        _mm256_slli_epi16::<4>(_mm256_and_si256(_mm256_srli_epi16::<6>(qh), m2)),
                    ),
                ];
                for (k, qk) in q.into_iter().enumerate() {
                    let a = load256_u8_i8(&yb.qs[128 * h + 32 * k..]);
                    let p = _mm256_maddubs_epi16(qk, a);
                    sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, pair_scales(scales8, 8 * h + 2 * k)));
                }
            }
            acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
        }
        hsum_ps(acc)
    }
}

avx2_fn! {
    /// A 16-entry byte table in both 128-bit lanes, for `vpshufb` lookups.
    #[inline]
    pub(crate) fn table_256(table: &[i8; 16]) -> __m256i {
        // SAFETY: `table` is 16 bytes; unaligned load.
        _mm256_broadcastsi128_si256(unsafe { _mm_loadu_si128(table.as_ptr().cast()) })
    }
}

avx2_fn! {
    /// The 32 table values 16 bytes of 4-bit indices select (low nibbles
    /// first): `vpshufb` reads each index's entry from `table` (a
    /// [`table_256`]).
    #[inline]
    fn lookup_32(qs: &[u8; 16], table: __m256i) -> __m256i {
        _mm256_shuffle_epi8(table, bytes_from_nibbles_32(qs))
    }
}

avx2_fn! {
    /// IQ4_NL · Q8_0.
    pub fn vec_dot_iq4_nl_q8_0(x: &[BlockIQ4NL], y: &[BlockQ8_0]) -> f32 {
        let table = table_256(&KVALUES_IQ4NL);
        let acc = unrolled_blocks!(x, y, |xb, yb, acc| {
            let d = _mm256_set1_ps(f16_to_f32(xb.d) * f16_to_f32(yb.d));
            // Table values −127..=113: the sign trick's |x| stays within a byte.
            _mm256_fmadd_ps(d, mul_sum_i8_pairs_float(lookup_32(&xb.qs, table), load256(&yb.qs)), acc)
        });
        hsum_ps(acc)
    }
}

avx2_fn! {
    /// MXFP4 · Q8_0.
    pub fn vec_dot_mxfp4_q8_0(x: &[BlockMXFP4], y: &[BlockQ8_0]) -> f32 {
        let table = table_256(&KVALUES_MXFP4);
        let acc = unrolled_blocks!(x, y, |xb, yb, acc| {
            let d = _mm256_set1_ps(xb.scale() * f16_to_f32(yb.d));
            _mm256_fmadd_ps(d, mul_sum_i8_pairs_float(lookup_32(&xb.qs, table), load256(&yb.qs)), acc)
        });
        hsum_ps(acc)
    }
}

avx2_fn! {
    /// IQ4_XS · Q8_K: exact i32 sums over the super-block, each sub-block's
    /// byte products scaled by its `ls − 32` with `vpmaddwd`.
    pub fn vec_dot_iq4_xs_q8_k(x: &[BlockIQ4XS], y: &[BlockQ8K]) -> f32 {
        let table = table_256(&KVALUES_IQ4NL);
        let mut acc = _mm256_setzero_ps();
        for (xb, yb) in x.iter().zip(y) {
            prefetch_ahead(xb, K_PREFETCH);
            let d = yb.d * f16_to_f32(xb.d);
            let mut sumi = _mm256_setzero_si256();
            for ib in 0..8 {
                let qs: &[u8; 16] = xb.qs[16 * ib..16 * ib + 16].try_into().unwrap_or(&[0; 16]);
                let qx = lookup_32(qs, table);
                let a = load256_u8_i8(&yb.qs[32 * ib..]);
                // |x|·(±a): pair sums within 2·127·127 < 32767, no saturation.
                let p = _mm256_maddubs_epi16(_mm256_sign_epi8(qx, qx), _mm256_sign_epi8(a, qx));
                let sc = _mm256_set1_epi16(xb.sub_scale(ib) as i16);
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, sc));
            }
            acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
        }
        hsum_ps(acc)
    }
}
