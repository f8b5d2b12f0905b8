//! AVX-512 integer dot products (x86-64 with AVX-512 F, BW, VL and DQ, and
//! AVX2, FMA and F16C; the `vnni` entry points need AVX512_VNNI too).
//!
//! The arithmetic is [`super::dot_avx2`]'s, twice as wide: the 32-value
//! types take two blocks per 512-bit register (block `b` in the low 256
//! bits, `b + 1` in the high), the K-quants 64 values of a super-block per
//! register, with the group scales applied to exact i32 sums and the offsets
//! and mins folded in through the activation's per-16 sums `bsums`.
//!
//! Each dot has one body, generic over `VNNI`, and two entry points
//! (modules [`plain`] and [`vnni`]) that compile it with and without
//! AVX512_VNNI. The body differs in one step, the byte products
//! ([`dot_bytes`], [`scaled_dot`]): `vpdpbusd` with VNNI, `vpmaddubsw` +
//! `vpmaddwd` without. `vpmaddubsw` saturates its pair sums to i16 where
//! `vpdpbusd` does not, so every caller keeps a pair's |u·s| sum within
//! i16 (the bound is noted at each one); then both give the exact integer
//! sums, as the scalar path does.
//!
//! Safety: every function here is `unsafe` to call, through
//! `#[target_feature]` or its own contract; the bodies are generic over
//! `VNNI` and must only be instantiated with `VNNI = true` from functions
//! that enable `avx512vnni` (the [`vnni`] entry points).
//!
//! Speed depends on the bodies inlining into their entry points: a body left
//! out of line is compiled without AVX512_VNNI, and its `vpdpbusd` becomes a
//! call (correct, slow). Each body has one call site per entry point for
//! that reason; `objdump -dC` of the test binary should show no call to
//! `_mm512_dpbusd_epi32` (checked for this commit: none).

use std::arch::x86_64::*;

use bytemuck::Zeroable;
use gantry_engine::quant::{
    BlockIQ4NL, BlockIQ4XS, BlockMXFP4, BlockQ2K, BlockQ3K, BlockQ4_0, BlockQ4_1, BlockQ4K, BlockQ5_0, BlockQ5_1,
    BlockQ5K, BlockQ6K, BlockQ8_0, BlockQ8_1, BlockQ8K, F16Bits, KVALUES_IQ4NL, KVALUES_MXFP4,
};

use super::dot_avx2::{
    K_PREFETCH, bytes_from_nibbles_32, f16_to_f32, hsum_ps, hsum_ps128, k4_scales_mins_simd, load256, load256_u8,
    mins_dot_bsums_simd, prefetch_ahead, q2k_scales_and_min_sums, scaled_bsums, table_256,
};
use crate::isa::{avx512_fn, avx512_vnni_fn};

avx512_fn! {
    /// Σ of the four byte products `u·s` (u unsigned, s signed) in each i32
    /// lane, added to `acc`.
    ///
    /// Without VNNI the pair sums go through i16: the caller keeps each pair's
    /// |u₀·s₀ + u₁·s₁| ≤ 32767 so that nothing saturates and both paths agree.
    ///
    /// # Safety
    /// AVX-512 F/BW/VL/DQ; AVX512_VNNI when `VNNI`.
    #[inline]
    pub(crate) unsafe fn dot_bytes<const VNNI: bool>(acc: __m512i, u: __m512i, s: __m512i) -> __m512i {
        if VNNI {
            // SAFETY: the caller's contract: AVX512_VNNI is available when `VNNI`.
            unsafe { _mm512_dpbusd_epi32(acc, u, s) }
        } else {
            _mm512_add_epi32(acc, _mm512_madd_epi16(_mm512_maddubs_epi16(u, s), _mm512_set1_epi16(1)))
        }
    }
}

avx512_fn! {
    /// Σ of the four byte products `u·s` in each i32 lane times that lane's
    /// scale, `scales` laid out by [`scale_lanes`].
    ///
    /// The four-product sums must fit i16 (|Σ| ≤ 32767): with VNNI the i32 sum
    /// is multiplied as its low i16 (its high half, the sign, meets a zero
    /// scale half). Every K-quant here has quants ≤ 63 against |a| ≤ 128:
    /// 4·63·128 = 32256.
    ///
    /// # Safety
    /// AVX-512 F/BW/VL/DQ; AVX512_VNNI when `VNNI`.
    #[inline]
    unsafe fn scaled_dot<const VNNI: bool>(u: __m512i, s: __m512i, scales: __m512i) -> __m512i {
        if VNNI {
            // SAFETY: the caller's contract.
            let sums = unsafe { _mm512_dpbusd_epi32(_mm512_setzero_si512(), u, s) };
            _mm512_madd_epi16(sums, scales)
        } else {
            _mm512_madd_epi16(_mm512_maddubs_epi16(u, s), scales)
        }
    }
}

avx512_fn! {
    /// i32 lanes of scales (each within i16) in the layout [`scaled_dot`]
    /// multiplies by: `(sc, 0)` as i16 halves with VNNI (one four-product sum
    /// per i32 lane, in its low half), `(sc, sc)` without (two pair sums per
    /// i32 lane).
    #[inline]
    fn scale_lanes<const VNNI: bool>(sc: __m512i) -> __m512i {
        let low = _mm512_and_si512(sc, _mm512_set1_epi32(0xFFFF));
        if VNNI { low } else { _mm512_or_si512(low, _mm512_slli_epi32::<16>(low)) }
    }
}

avx512_fn! {
    /// Σ x·y per i32 lane over 64 signed byte pairs (neither −128 in `y`): |x|
    /// times y with x's sign. Pair sums: 2·128·127 < 32767.
    ///
    /// # Safety
    /// As [`dot_bytes`].
    #[inline]
    pub(crate) unsafe fn dot_i8<const VNNI: bool>(x: __m512i, y: __m512i) -> __m512i {
        let negative = _mm512_movepi8_mask(x);
        let sy = _mm512_mask_sub_epi8(y, negative, _mm512_setzero_si512(), y);
        // SAFETY: the caller's contract.
        unsafe { dot_bytes::<VNNI>(_mm512_setzero_si512(), _mm512_abs_epi8(x), sy) }
    }
}

avx512_fn! {
    /// `lo` in the low 256 bits, `hi` in the high.
    #[inline]
    fn join(lo: __m256i, hi: __m256i) -> __m512i {
        _mm512_inserti64x4::<1>(_mm512_castsi256_si512(lo), hi)
    }
}

avx512_fn! {
    /// Four f16 values as f32 lanes 0..4.
    #[inline]
    pub(crate) fn f16x4(v: [F16Bits; 4]) -> __m128 {
        let bits = v.iter().enumerate().fold(0u64, |b, (i, h)| b | u64::from(h.bits()) << (16 * i));
        _mm_cvtph_ps(_mm_cvtsi64_si128(bits as i64))
    }
}

avx512_fn! {
    /// Lane `i` of `v` in lanes 0..8, lane `j` in lanes 8..16.
    #[inline]
    pub(crate) fn spread(v: __m128, i: i32, j: i32) -> __m512 {
        let idx = _mm512_mask_blend_epi32(0xFF00, _mm512_set1_epi32(i), _mm512_set1_epi32(j));
        // Only lanes i, j < 4 are read: the undefined upper lanes of the cast are not.
        _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(v))
    }
}

avx512_fn! {
    /// The nibbles of two 32-value blocks: block 0's 32 values (low nibbles
    /// then high) in the low 256 bits, block 1's in the high.
    #[inline]
    pub(crate) fn nibbles_pair(q0: &[u8; 16], q1: &[u8; 16]) -> __m512i {
        join(bytes_from_nibbles_32(q0), bytes_from_nibbles_32(q1))
    }
}

avx512_fn! {
    /// The 64 signed bytes of two blocks, block 0 in the low 256 bits.
    #[inline]
    pub(crate) fn bytes_pair(q0: &[i8; 32], q1: &[i8; 32]) -> __m512i {
        join(load256(q0), load256(q1))
    }
}

avx512_fn! {
    /// The 5-bit quants `q | h << 4` of two Q5 blocks (nibbles `qs`, fifth bits `qh`).
    #[inline]
    pub(crate) fn five_bit_pair(qs: [&[u8; 16]; 2], qh: [[u8; 4]; 2]) -> __m512i {
        let q = nibbles_pair(qs[0], qs[1]);
        _mm512_mask_add_epi8(q, fifth_bit_mask(qh[0], qh[1]), q, _mm512_set1_epi8(16))
    }
}

/// The fifth bits of two Q5 blocks as a byte mask, block 0 in bits 0..32.
#[inline]
fn fifth_bit_mask(qh0: [u8; 4], qh1: [u8; 4]) -> __mmask64 {
    u64::from(u32::from_le_bytes(qh0)) | u64::from(u32::from_le_bytes(qh1)) << 32
}

avx512_fn! {
    /// `d·d'` of two blocks and their partners, spread over the blocks' lanes.
    #[inline]
    fn scales_pair(dx: [F16Bits; 2], dy: [F16Bits; 2]) -> __m512 {
        let z = F16Bits::default();
        spread(_mm_mul_ps(f16x4([dx[0], dx[1], z, z]), f16x4([dy[0], dy[1], z, z])), 0, 1)
    }
}

/// A 32-value weight block whose dot runs two blocks per register.
trait PairDot: Sized {
    /// Its dot partner.
    type Y: Zeroable;

    /// Two blocks against two partner blocks: Σq·q' per i32 lane as f32
    /// (lanes 0..8 block 0, 8..16 block 1), the scales `d·d'` spread the same
    /// way, and for the types with a min, the `m·s` terms spread the same way
    /// (an eighth in each lane).
    ///
    /// # Safety
    /// As [`dot_bytes`].
    unsafe fn pair<const VNNI: bool>(x: [&Self; 2], y: [&Self::Y; 2]) -> (__m512, __m512, Option<__m512>);
}

avx512_fn! {
    /// [`PairDot::pair`] of two signed weight blocks `qx` (scales `d`) against two Q8_0 blocks.
    ///
    /// # Safety
    /// As [`dot_bytes`].
    #[inline]
    unsafe fn signed_pair<const VNNI: bool>(
        qx: __m512i,
        d: [F16Bits; 2],
        y: [&BlockQ8_0; 2],
    ) -> (__m512, __m512, Option<__m512>) {
        // SAFETY: the caller's contract.
        let s = unsafe { dot_i8::<VNNI>(qx, bytes_pair(&y[0].qs, &y[1].qs)) };
        (_mm512_cvtepi32_ps(s), scales_pair(d, [y[0].d, y[1].d]), None)
    }
}

impl PairDot for BlockQ4_0 {
    type Y = BlockQ8_0;
    avx512_fn! {
        #[inline]
        unsafe fn pair<const VNNI: bool>(x: [&Self; 2], y: [&BlockQ8_0; 2]) -> (__m512, __m512, Option<__m512>) {
            let qx = _mm512_sub_epi8(nibbles_pair(&x[0].qs, &x[1].qs), _mm512_set1_epi8(8));
            // SAFETY: the caller's contract.
            unsafe { signed_pair::<VNNI>(qx, [x[0].d, x[1].d], y) }
        }
    }
}

impl PairDot for BlockQ5_0 {
    type Y = BlockQ8_0;
    avx512_fn! {
        #[inline]
        unsafe fn pair<const VNNI: bool>(x: [&Self; 2], y: [&BlockQ8_0; 2]) -> (__m512, __m512, Option<__m512>) {
            // (q | h << 4) − 16: q − 16 where the fifth bit is clear, q where it is set.
            let q = nibbles_pair(&x[0].qs, &x[1].qs);
            let clear = !fifth_bit_mask(x[0].qh, x[1].qh);
            let qx = _mm512_mask_sub_epi8(q, clear, q, _mm512_set1_epi8(16));
            // SAFETY: the caller's contract.
            unsafe { signed_pair::<VNNI>(qx, [x[0].d, x[1].d], y) }
        }
    }
}

impl PairDot for BlockQ8_0 {
    type Y = BlockQ8_0;
    avx512_fn! {
        #[inline]
        unsafe fn pair<const VNNI: bool>(x: [&Self; 2], y: [&BlockQ8_0; 2]) -> (__m512, __m512, Option<__m512>) {
            // SAFETY: the caller's contract.
            unsafe { signed_pair::<VNNI>(bytes_pair(&x[0].qs, &x[1].qs), [x[0].d, x[1].d], y) }
        }
    }
}

avx512_fn! {
    /// [`PairDot::pair`] of two unsigned weight blocks `qx` (scales `d`, mins
    /// `m`) against two Q8_1 blocks: `d·d'` spread over each block's lanes, and
    /// `m·s` spread as an eighth per lane (exact). The quants' pair sums must
    /// stay within i16 (|q| ≤ 31: 2·31·128 < 32767).
    ///
    /// # Safety
    /// As [`dot_bytes`].
    #[inline]
    unsafe fn unsigned_pair_with_mins<const VNNI: bool>(
        qx: __m512i,
        d: [F16Bits; 2],
        m: [F16Bits; 2],
        y: [&BlockQ8_1; 2],
    ) -> (__m512, __m512, Option<__m512>) {
        let h = _mm_mul_ps(f16x4([d[0], d[1], m[0], m[1]]), f16x4([y[0].d, y[1].d, y[0].s, y[1].s]));
        let ms = _mm512_mul_ps(spread(h, 2, 3), _mm512_set1_ps(0.125));
        // SAFETY: the caller's contract.
        let s = unsafe { dot_bytes::<VNNI>(_mm512_setzero_si512(), qx, bytes_pair(&y[0].qs, &y[1].qs)) };
        (_mm512_cvtepi32_ps(s), spread(h, 0, 1), Some(ms))
    }
}

impl PairDot for BlockQ4_1 {
    type Y = BlockQ8_1;
    avx512_fn! {
        #[inline]
        unsafe fn pair<const VNNI: bool>(x: [&Self; 2], y: [&BlockQ8_1; 2]) -> (__m512, __m512, Option<__m512>) {
            let qx = nibbles_pair(&x[0].qs, &x[1].qs);
            // SAFETY: the caller's contract; quants ≤ 15.
            unsafe { unsigned_pair_with_mins::<VNNI>(qx, [x[0].d, x[1].d], [x[0].m, x[1].m], y) }
        }
    }
}

impl PairDot for BlockQ5_1 {
    type Y = BlockQ8_1;
    avx512_fn! {
        #[inline]
        unsafe fn pair<const VNNI: bool>(x: [&Self; 2], y: [&BlockQ8_1; 2]) -> (__m512, __m512, Option<__m512>) {
            let qx = five_bit_pair([&x[0].qs, &x[1].qs], [x[0].qh, x[1].qh]);
            // SAFETY: the caller's contract; quants ≤ 31.
            unsafe { unsigned_pair_with_mins::<VNNI>(qx, [x[0].d, x[1].d], [x[0].m, x[1].m], y) }
        }
    }
}

avx512_fn! {
    /// A 16-entry byte table in all four 128-bit lanes, for `vpshufb` lookups.
    #[inline]
    fn table_512(table: &[i8; 16]) -> __m512i {
        let t = table_256(table);
        _mm512_inserti64x4::<1>(_mm512_castsi256_si512(t), t)
    }
}

impl PairDot for BlockIQ4NL {
    type Y = BlockQ8_0;
    avx512_fn! {
        #[inline]
        unsafe fn pair<const VNNI: bool>(x: [&Self; 2], y: [&BlockQ8_0; 2]) -> (__m512, __m512, Option<__m512>) {
            let qx = _mm512_shuffle_epi8(table_512(&KVALUES_IQ4NL), nibbles_pair(&x[0].qs, &x[1].qs));
            // SAFETY: the caller's contract; table values −127..=113.
            unsafe { signed_pair::<VNNI>(qx, [x[0].d, x[1].d], y) }
        }
    }
}

impl PairDot for BlockMXFP4 {
    type Y = BlockQ8_0;
    avx512_fn! {
        #[inline]
        unsafe fn pair<const VNNI: bool>(x: [&Self; 2], y: [&BlockQ8_0; 2]) -> (__m512, __m512, Option<__m512>) {
            let qx = _mm512_shuffle_epi8(table_512(&KVALUES_MXFP4), nibbles_pair(&x[0].qs, &x[1].qs));
            // SAFETY: the caller's contract; table values −12..=12.
            let s = unsafe { dot_i8::<VNNI>(qx, bytes_pair(&y[0].qs, &y[1].qs)) };
            let z = F16Bits::default();
            let dx = _mm_setr_ps(x[0].scale(), x[1].scale(), 0.0, 0.0);
            let d = _mm_mul_ps(dx, f16x4([y[0].d, y[1].d, z, z]));
            (_mm512_cvtepi32_ps(s), spread(d, 0, 1), None)
        }
    }
}

avx512_fn! {
    /// `acc + ms + d·s` for one [`PairDot::pair`] result.
    #[inline]
    fn add_pair(acc: __m512, (s, d, ms): (__m512, __m512, Option<__m512>)) -> __m512 {
        let acc = match ms {
            Some(ms) => _mm512_add_ps(acc, ms),
            None => acc,
        };
        _mm512_fmadd_ps(d, s, acc)
    }
}

avx512_fn! {
    /// The dot of the 32-value blocks `x` and `y` (cut to the shorter), two
    /// blocks per step and four independent accumulators. An odd last block is
    /// paired with itself against an all-zero partner block, whose products and
    /// scales are exactly zero.
    ///
    /// # Safety
    /// As [`dot_bytes`].
    #[inline]
    unsafe fn sum_pairs<X: PairDot, const VNNI: bool>(x: &[X], y: &[X::Y]) -> f32 {
        let n = x.len().min(y.len());
        let (x, y) = (&x[..n], &y[..n]);
        let mut accs = [_mm512_setzero_ps(); 4];
        let (mut xs, mut ys) = (x.chunks_exact(8), y.chunks_exact(8));
        for (xc, yc) in (&mut xs).zip(&mut ys) {
            for u in 0..4 {
                // SAFETY: the caller's contract.
                let p = unsafe { X::pair::<VNNI>([&xc[2 * u], &xc[2 * u + 1]], [&yc[2 * u], &yc[2 * u + 1]]) };
                accs[u] = add_pair(accs[u], p);
            }
        }
        let (mut xp, mut yp) = (xs.remainder().chunks_exact(2), ys.remainder().chunks_exact(2));
        for (u, (xc, yc)) in (&mut xp).zip(&mut yp).enumerate() {
            // SAFETY: the caller's contract.
            let p = unsafe { X::pair::<VNNI>([&xc[0], &xc[1]], [&yc[0], &yc[1]]) };
            accs[u] = add_pair(accs[u], p);
        }
        if let (Some(xb), Some(yb)) = (xp.remainder().first(), yp.remainder().first()) {
            let zero = X::Y::zeroed();
            // SAFETY: the caller's contract.
            let p = unsafe { X::pair::<VNNI>([xb, xb], [yb, &zero]) };
            accs[3] = add_pair(accs[3], p);
        }
        _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(accs[0], accs[1]), _mm512_add_ps(accs[2], accs[3])))
    }
}

avx512_fn! {
    /// 64 activation quants from the start of `p` (which must hold them).
    #[inline]
    fn load512_i8(p: &[i8]) -> __m512i {
        let p: &[i8; 64] = p[..64].try_into().unwrap_or(&[0; 64]);
        // SAFETY: `p` is 64 bytes; unaligned load.
        unsafe { _mm512_loadu_si512(p.as_ptr().cast()) }
    }
}

avx512_fn! {
    /// 32 bytes from the start of `p` in both 256-bit halves.
    #[inline]
    fn both_halves(p: &[u8]) -> __m512i {
        _mm512_broadcast_i64x4(load256_u8(p))
    }
}

avx512_fn! {
    /// Each 16-bit lane of `v` shifted right by `lo` in the low 256 bits, by
    /// `hi` in the high.
    #[inline]
    fn shift_halves(v: __m512i, lo: i16, hi: i16) -> __m512i {
        let counts = _mm512_mask_blend_epi16(0xFFFF_0000, _mm512_set1_epi16(lo), _mm512_set1_epi16(hi));
        _mm512_srlv_epi16(v, counts)
    }
}

avx512_fn! {
    /// A byte mask of where `v` has bit `lo` set (low 256 bits) and bit `hi`
    /// (high 256 bits).
    #[inline]
    fn bit_halves(v: __m512i, lo: u32, hi: u32) -> __mmask64 {
        let bits = _mm512_mask_blend_epi8(
            0xFFFF_FFFF_0000_0000,
            _mm512_set1_epi8((1u8 << lo) as i8),
            _mm512_set1_epi8((1u8 << hi) as i8),
        );
        _mm512_test_epi8_mask(v, bits)
    }
}

avx512_fn! {
    /// The scales of 64-value chunk `c` of a super-block, for [`scaled_dot`]:
    /// from `scales` (one i32 lane per group of `GROUP` values, laid out by
    /// [`scale_lanes`]) to one per i32 lane (4 values each).
    #[inline]
    fn chunk_scales<const GROUP: usize>(scales: __m512i, c: usize) -> __m512i {
        // Lane i of chunk c holds values 64c + 4i .. + 4: group (64c + 4i) / GROUP.
        let idx: [i32; 16] = std::array::from_fn(|i| ((64 * c + 4 * i) / GROUP) as i32);
        // SAFETY: 16 i32 are 64 bytes; unaligned load.
        let idx = unsafe { _mm512_loadu_si512(idx.as_ptr().cast()) };
        _mm512_permutexvar_epi32(idx, scales)
    }
}

avx512_fn! {
    /// The 2-bit fields of Q2_K / Q3_K `qs` for 64-value chunk `c` of a
    /// super-block: values `128·(c/2) + 32k + l` are bits `2k..2k+2` of byte
    /// `32·(c/2) + l`; the chunk holds `k = 2·(c%2)` (low half) and `k + 1`.
    #[inline]
    fn two_bit_chunk(qs: &[u8; 64], c: usize) -> __m512i {
        let k = 2 * (c % 2) as i16;
        let bits = both_halves(&qs[32 * (c / 2)..]);
        _mm512_and_si512(shift_halves(bits, 2 * k, 2 * k + 2), _mm512_set1_epi8(3))
    }
}

avx512_fn! {
    /// Q2_K · Q8_K.
    ///
    /// # Safety
    /// As [`dot_bytes`].
    #[inline]
    unsafe fn q2_k<const VNNI: bool>(x: &[BlockQ2K], y: &[BlockQ8K]) -> f32 {
        let mut acc = _mm512_setzero_ps();
        let mut acc_m = _mm256_setzero_ps();
        for (xb, yb) in x.iter().zip(y) {
            prefetch_ahead(xb, K_PREFETCH);
            let d = yb.d * f16_to_f32(xb.d);
            let dmin = -yb.d * f16_to_f32(xb.dmin);
            let (scales8, min_sums) = q2k_scales_and_min_sums(xb, yb);
            acc_m = _mm256_fmadd_ps(_mm256_set1_ps(dmin), _mm256_cvtepi32_ps(min_sums), acc_m);
            let scales = scale_lanes::<VNNI>(_mm512_cvtepu8_epi32(scales8));
            let mut sumi = _mm512_setzero_si512();
            for c in 0..4 {
                let q = two_bit_chunk(&xb.qs, c);
                let a = load512_i8(&yb.qs[64 * c..]);
                // SAFETY: the caller's contract; quants ≤ 3.
                sumi = _mm512_add_epi32(sumi, unsafe { scaled_dot::<VNNI>(q, a, chunk_scales::<16>(scales, c)) });
            }
            acc = _mm512_fmadd_ps(_mm512_set1_ps(d), _mm512_cvtepi32_ps(sumi), acc);
        }
        _mm512_reduce_add_ps(acc) + hsum_ps(acc_m)
    }
}

avx512_fn! {
    /// Q3_K · Q8_K.
    ///
    /// # Safety
    /// As [`dot_bytes`].
    #[inline]
    unsafe fn q3_k<const VNNI: bool>(x: &[BlockQ3K], y: &[BlockQ8K]) -> f32 {
        let mut acc = _mm512_setzero_ps();
        for (xb, yb) in x.iter().zip(y) {
            prefetch_ahead(xb, K_PREFETCH);
            let d = yb.d * f16_to_f32(xb.d);
            let sc = xb.unpacked_scales();
            // SAFETY: `sc` is 16 bytes; unaligned load.
            let scales8 = unsafe { _mm_loadu_si128(sc.as_ptr().cast()) };
            let scales = scale_lanes::<VNNI>(_mm512_cvtepi8_epi32(scales8));
            // value = (low2 | high << 2) − 4: the −4 goes in through the bsums.
            let offset = _mm256_slli_epi32::<2>(scaled_bsums(scales8, &yb.bsums));
            let mut sumi = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_zextsi256_si512(offset));
            let hbits = both_halves(&xb.hmask);
            for c in 0..4 {
                let low = two_bit_chunk(&xb.qs, c);
                // Value i's high bit is bit i / 32 of hmask[i % 32].
                let high = bit_halves(hbits, 2 * c as u32, 2 * c as u32 + 1);
                let q = _mm512_mask_add_epi8(low, high, low, _mm512_set1_epi8(4));
                let a = load512_i8(&yb.qs[64 * c..]);
                // SAFETY: the caller's contract; quants ≤ 7.
                sumi = _mm512_add_epi32(sumi, unsafe { scaled_dot::<VNNI>(q, a, chunk_scales::<16>(scales, c)) });
            }
            acc = _mm512_fmadd_ps(_mm512_set1_ps(d), _mm512_cvtepi32_ps(sumi), acc);
        }
        _mm512_reduce_add_ps(acc)
    }
}

avx512_fn! {
    /// The nibbles of 32 bytes of Q4_K / Q5_K `qs`: the low nibbles (64 values'
    /// first 32) in the low 256 bits, the high nibbles in the high.
    #[inline]
    fn nibbles_64(qs: &[u8]) -> __m512i {
        let b = both_halves(qs);
        _mm512_and_si512(_mm512_mask_srli_epi16::<4>(b, 0xFFFF_0000, b), _mm512_set1_epi8(0xF))
    }
}

/// The parts of a Q4_K or Q5_K block that the shared body reads.
trait K4Block {
    /// Super-block scale and min scale.
    fn d_dmin(&self) -> (F16Bits, F16Bits);
    /// The packed six-bit scales and mins.
    fn packed(&self) -> &[u8; 12];
    /// The nibbles.
    fn qs(&self) -> &[u8; 128];
    /// The fifth bits (Q5_K).
    fn qh(&self) -> Option<&[u8; 32]>;
}

impl K4Block for BlockQ4K {
    fn d_dmin(&self) -> (F16Bits, F16Bits) {
        (self.d, self.dmin)
    }
    fn packed(&self) -> &[u8; 12] {
        &self.scales
    }
    fn qs(&self) -> &[u8; 128] {
        &self.qs
    }
    fn qh(&self) -> Option<&[u8; 32]> {
        None
    }
}

impl K4Block for BlockQ5K {
    fn d_dmin(&self) -> (F16Bits, F16Bits) {
        (self.d, self.dmin)
    }
    fn packed(&self) -> &[u8; 12] {
        &self.scales
    }
    fn qs(&self) -> &[u8; 128] {
        &self.qs
    }
    fn qh(&self) -> Option<&[u8; 32]> {
        Some(&self.qh)
    }
}

avx512_fn! {
    /// Q4_K and Q5_K · Q8_K: the 8 six-bit scales (per 32 values) and mins
    /// unpacked as in the AVX2 path, 64 values per step.
    ///
    /// # Safety
    /// As [`dot_bytes`].
    #[inline]
    unsafe fn k4_k5<B: K4Block, const VNNI: bool>(x: &[B], y: &[BlockQ8K]) -> f32 {
        let mut acc = _mm512_setzero_ps();
        let mut acc_m = _mm_setzero_ps();
        for (xb, yb) in x.iter().zip(y) {
            prefetch_ahead(xb, K_PREFETCH);
            let (xd, xdmin) = xb.d_dmin();
            let d = yb.d * f16_to_f32(xd);
            let dmin = yb.d * f16_to_f32(xdmin);
            let (scales, mins) = k4_scales_mins_simd(xb.packed());
            acc_m = _mm_fmadd_ps(_mm_set1_ps(dmin), _mm_cvtepi32_ps(mins_dot_bsums_simd(mins, &yb.bsums)), acc_m);
            let scales = scale_lanes::<VNNI>(_mm512_cvtepu16_epi32(_mm256_zextsi128_si256(scales)));
            let hbits = xb.qh().map(|qh| both_halves(qh));
            let mut sumi = _mm512_setzero_si512();
            for c in 0..4 {
                let mut q = nibbles_64(&xb.qs()[32 * c..]);
                if let Some(hbits) = hbits {
                    // Value 64c + l takes bit 2c of qh[l], value 64c + 32 + l bit 2c + 1.
                    let high = bit_halves(hbits, 2 * c as u32, 2 * c as u32 + 1);
                    q = _mm512_mask_add_epi8(q, high, q, _mm512_set1_epi8(16));
                }
                let a = load512_i8(&yb.qs[64 * c..]);
                // SAFETY: the caller's contract; quants ≤ 31.
                sumi = _mm512_add_epi32(sumi, unsafe { scaled_dot::<VNNI>(q, a, chunk_scales::<32>(scales, c)) });
            }
            acc = _mm512_fmadd_ps(_mm512_set1_ps(d), _mm512_cvtepi32_ps(sumi), acc);
        }
        _mm512_reduce_add_ps(acc) - hsum_ps128(acc_m)
    }
}

avx512_fn! {
    /// Q6_K · Q8_K.
    ///
    /// # Safety
    /// As [`dot_bytes`].
    #[inline]
    unsafe fn q6_k<const VNNI: bool>(x: &[BlockQ6K], y: &[BlockQ8K]) -> f32 {
        let mut acc = _mm512_setzero_ps();
        let m4 = _mm512_set1_epi8(0xF);
        let m2 = _mm512_set1_epi8(3);
        for (xb, yb) in x.iter().zip(y) {
            prefetch_ahead(xb, K_PREFETCH);
            let d = yb.d * f16_to_f32(xb.d);
            // SAFETY: `scales` is 16 bytes; unaligned load.
            let scales8 = unsafe { _mm_loadu_si128(xb.scales.as_ptr().cast()) };
            let scales = scale_lanes::<VNNI>(_mm512_cvtepi8_epi32(scales8));
            // value = q6 − 32: the −32 goes in through the bsums.
            let offset = _mm256_slli_epi32::<5>(scaled_bsums(scales8, &yb.bsums));
            let mut sumi = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_zextsi256_si512(offset));
            for h in 0..2 {
                // SAFETY: 64 of the 128 bytes of `ql`; unaligned load.
                let ql = unsafe { _mm512_loadu_si512(xb.ql[64 * h..64 * h + 64].as_ptr().cast()) };
                let qh = both_halves(&xb.qh[32 * h..]);
                // Values 128h + 0..64: low nibbles of ql[64h..64h + 64], high bits
                // 0..2 of qh[32h + l] (first 32), bits 2..4 (next 32).
                let high = _mm512_and_si512(shift_halves(qh, 0, 2), m2);
                let q0 = _mm512_or_si512(_mm512_and_si512(ql, m4), _mm512_slli_epi16::<4>(high));
                // Values 128h + 64..128: high nibbles, high bits 4..6 and 6..8.
                let high = _mm512_and_si512(shift_halves(qh, 4, 6), m2);
                let q1 =
                    _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16::<4>(ql), m4), _mm512_slli_epi16::<4>(high));
                for (k, q) in [q0, q1].into_iter().enumerate() {
                    let c = 2 * h + k;
                    let a = load512_i8(&yb.qs[64 * c..]);
                    // SAFETY: the caller's contract; quants ≤ 63.
                    sumi = _mm512_add_epi32(sumi, unsafe { scaled_dot::<VNNI>(q, a, chunk_scales::<16>(scales, c)) });
                }
            }
            acc = _mm512_fmadd_ps(_mm512_set1_ps(d), _mm512_cvtepi32_ps(sumi), acc);
        }
        _mm512_reduce_add_ps(acc)
    }
}

avx512_fn! {
    /// IQ4_XS · Q8_K: two sub-blocks per register (table lookups by
    /// `vpshufb`), exact i32 sums times each sub-block's `ls − 32`.
    ///
    /// # Safety
    /// As [`dot_bytes`].
    #[inline]
    unsafe fn iq4_xs<const VNNI: bool>(x: &[BlockIQ4XS], y: &[BlockQ8K]) -> f32 {
        let table = table_512(&KVALUES_IQ4NL);
        let mut acc = _mm512_setzero_ps();
        for (xb, yb) in x.iter().zip(y) {
            prefetch_ahead(xb, K_PREFETCH);
            let d = yb.d * f16_to_f32(xb.d);
            let mut sumi = _mm512_setzero_si512();
            for c in 0..4 {
                let q0: &[u8; 16] = xb.qs[32 * c..32 * c + 16].try_into().unwrap_or(&[0; 16]);
                let q1: &[u8; 16] = xb.qs[32 * c + 16..32 * c + 32].try_into().unwrap_or(&[0; 16]);
                let qx = _mm512_shuffle_epi8(table, nibbles_pair(q0, q1));
                // SAFETY: the caller's contract; |table value| ≤ 127.
                let s = unsafe { dot_i8::<VNNI>(qx, load512_i8(&yb.qs[64 * c..])) };
                let sc = _mm512_mask_blend_epi32(
                    0xFF00,
                    _mm512_set1_epi32(xb.sub_scale(2 * c)),
                    _mm512_set1_epi32(xb.sub_scale(2 * c + 1)),
                );
                sumi = _mm512_add_epi32(sumi, _mm512_mullo_epi32(s, sc));
            }
            acc = _mm512_fmadd_ps(_mm512_set1_ps(d), _mm512_cvtepi32_ps(sumi), acc);
        }
        _mm512_reduce_add_ps(acc)
    }
}

/// Defines the entry points of one flavour: a module of `vec_dot_*`
/// functions compiled with the features of `$isa_fn` (an ISA macro of
/// `cpu::isa`), each calling its body with `VNNI = $vnni`.
macro_rules! entry_points {
    ($(#[$doc:meta])* $module:ident, $isa_fn:ident, $vnni:literal) => {
        $(#[$doc])*
        pub(crate) mod $module {
            use super::*;

            entry_points!(@dots $isa_fn, $vnni,
                vec_dot_q4_0_q8_0(BlockQ4_0, BlockQ8_0) => sum_pairs::<BlockQ4_0, $vnni>,
                vec_dot_q4_1_q8_1(BlockQ4_1, BlockQ8_1) => sum_pairs::<BlockQ4_1, $vnni>,
                vec_dot_q5_0_q8_0(BlockQ5_0, BlockQ8_0) => sum_pairs::<BlockQ5_0, $vnni>,
                vec_dot_q5_1_q8_1(BlockQ5_1, BlockQ8_1) => sum_pairs::<BlockQ5_1, $vnni>,
                vec_dot_q8_0_q8_0(BlockQ8_0, BlockQ8_0) => sum_pairs::<BlockQ8_0, $vnni>,
                vec_dot_q2_k_q8_k(BlockQ2K, BlockQ8K) => q2_k::<$vnni>,
                vec_dot_q3_k_q8_k(BlockQ3K, BlockQ8K) => q3_k::<$vnni>,
                vec_dot_q4_k_q8_k(BlockQ4K, BlockQ8K) => k4_k5::<BlockQ4K, $vnni>,
                vec_dot_q5_k_q8_k(BlockQ5K, BlockQ8K) => k4_k5::<BlockQ5K, $vnni>,
                vec_dot_q6_k_q8_k(BlockQ6K, BlockQ8K) => q6_k::<$vnni>,
                vec_dot_iq4_nl_q8_0(BlockIQ4NL, BlockQ8_0) => sum_pairs::<BlockIQ4NL, $vnni>,
                vec_dot_mxfp4_q8_0(BlockMXFP4, BlockQ8_0) => sum_pairs::<BlockMXFP4, $vnni>,
                vec_dot_iq4_xs_q8_k(BlockIQ4XS, BlockQ8K) => iq4_xs::<$vnni>,
            );
        }
    };
    (@dots $isa_fn:ident, $vnni:literal, $($name:ident($x:ty, $y:ty) => $body:expr,)*) => {$(
        $isa_fn! {
            #[doc = concat!("`", stringify!($x), "` · `", stringify!($y), "` (blocks up to the shorter slice).")]
            pub(crate) fn $name(x: &[$x], y: &[$y]) -> f32 {
                // SAFETY: this function enables the features its body needs
                // (AVX512_VNNI exactly where `VNNI` is true).
                unsafe { $body(x, y) }
            }
        }
    )*};
}

entry_points!(
    /// The dots with byte products by `vpmaddubsw` + `vpmaddwd` (AVX-512 F/BW/VL/DQ).
    plain,
    avx512_fn,
    false
);
entry_points!(
    /// The dots with byte products by `vpdpbusd` (AVX-512 F/BW/VL/DQ and AVX512_VNNI).
    vnni,
    avx512_vnni_fn,
    true
);
