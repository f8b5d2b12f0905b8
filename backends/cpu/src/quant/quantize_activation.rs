//! Activation quantizers: an f32 row into the dot partner types Q8_0, Q8_1
//! and Q8_K, once per mul_mat, so the weights meet integer activations.
//!
//! The scalar path is ggml's reference quantizer. The AVX2 path (which the
//! AVX-512 paths use too: a quantizer runs once per column, a small part of a
//! product) rounds with
//! the CPU's round-to-nearest-even where the Q8_0/Q8_1 references round
//! halves away from zero, so at exact ties a quant may differ by one (as in
//! ggml's own AVX2 path); Q8_K rounds to even in both, so only the sign of
//! `d` can differ (when +max and −max tie), which leaves every product equal.

use gantry_engine::quant::{BlockQ8_0, BlockQ8_1, BlockQ8K, F16Bits, QuantBlock, QuantizeBlock, quantize_blocks};

use super::Isa;

/// Quantizes `x` into Q8_0 blocks (as many as both hold) on `isa`.
pub fn quantize_row_q8_0(isa: Isa, x: &[f32], y: &mut [BlockQ8_0]) {
    match isa {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: an `Isa::Avx2`/`Avx512`/`Avx512Vnni` value exists only when the
        // CPU has AVX2+FMA+F16C (see `Isa::available`).
        Isa::Avx2 | Isa::Avx512 | Isa::Avx512Vnni => unsafe { avx2::quantize_q8_0(x, y) },
        Isa::Scalar => quantize_blocks(x, y),
    }
}

/// Quantizes `x` into Q8_1 blocks (as many as both hold) on `isa`.
pub fn quantize_row_q8_1(isa: Isa, x: &[f32], y: &mut [BlockQ8_1]) {
    match isa {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as in `quantize_row_q8_0`.
        Isa::Avx2 | Isa::Avx512 | Isa::Avx512Vnni => unsafe { avx2::quantize_q8_1(x, y) },
        Isa::Scalar => quantize_blocks(x, y),
    }
}

/// Quantizes `x` into Q8_K blocks (as many as both hold) on `isa`.
pub fn quantize_row_q8_k(isa: Isa, x: &[f32], y: &mut [BlockQ8K]) {
    match isa {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as in `quantize_row_q8_0`.
        Isa::Avx2 | Isa::Avx512 | Isa::Avx512Vnni => unsafe { avx2::quantize_q8_k(x, y) },
        Isa::Scalar => {
            for (xb, yb) in x.chunks_exact(BlockQ8K::ELEMS).zip(y.iter_mut()) {
                *yb = BlockQ8K::quantize(xb);
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    use super::*;
    use crate::isa::avx2_fn;

    avx2_fn! {
        /// Loads 32 floats as 4 vectors.
        #[inline]
        fn load32(x: &[f32]) -> [__m256; 4] {
            let x: &[f32; 32] = x[..32].try_into().unwrap_or(&[0.0; 32]);
            let p = x.as_ptr();
            // SAFETY: `x` is 32 floats; unaligned loads.
            unsafe {
                [_mm256_loadu_ps(p), _mm256_loadu_ps(p.add(8)), _mm256_loadu_ps(p.add(16)), _mm256_loadu_ps(p.add(24))]
            }
        }
    }

    avx2_fn! {
        #[inline]
        fn hmax(v: __m256) -> f32 {
            let m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
            let m = _mm_max_ps(m, _mm_movehl_ps(m, m));
            let m = _mm_max_ss(m, _mm_movehdup_ps(m));
            _mm_cvtss_f32(m)
        }
    }

    avx2_fn! {
        #[inline]
        fn hmin(v: __m256) -> f32 {
            let m = _mm_min_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
            let m = _mm_min_ps(m, _mm_movehl_ps(m, m));
            let m = _mm_min_ss(m, _mm_movehdup_ps(m));
            _mm_cvtss_f32(m)
        }
    }

    avx2_fn! {
        /// Largest |x| of 32 values.
        #[inline]
        fn absmax32(v: &[__m256; 4]) -> f32 {
            let sign = _mm256_set1_ps(-0.0);
            let m01 = _mm256_max_ps(_mm256_andnot_ps(sign, v[0]), _mm256_andnot_ps(sign, v[1]));
            let m23 = _mm256_max_ps(_mm256_andnot_ps(sign, v[2]), _mm256_andnot_ps(sign, v[3]));
            hmax(_mm256_max_ps(m01, m23))
        }
    }

    avx2_fn! {
        /// Rounds `v·id` to integers (nearest, ties to even) and packs the 32
        /// results into bytes in order.
        #[inline]
        fn round_pack(v: &[__m256; 4], id: f32) -> (__m256i, [__m256i; 4]) {
            let mul = _mm256_set1_ps(id);
            let i = [
                _mm256_cvtps_epi32(_mm256_mul_ps(v[0], mul)),
                _mm256_cvtps_epi32(_mm256_mul_ps(v[1], mul)),
                _mm256_cvtps_epi32(_mm256_mul_ps(v[2], mul)),
                _mm256_cvtps_epi32(_mm256_mul_ps(v[3], mul)),
            ];
            // packs work per 128-bit lane; the permute restores the element order.
            let p01 = _mm256_packs_epi32(i[0], i[1]);
            let p23 = _mm256_packs_epi32(i[2], i[3]);
            let p = _mm256_packs_epi16(p01, p23);
            let order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
            (_mm256_permutevar8x32_epi32(p, order), i)
        }
    }

    avx2_fn! {
        #[inline]
        fn hsum_epi32(v: __m256i) -> i32 {
            let s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v));
            let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b01_00_11_10>(s));
            let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b10_11_00_01>(s));
            _mm_cvtsi128_si32(s)
        }
    }

    avx2_fn! {
        pub(super) fn quantize_q8_0(x: &[f32], y: &mut [BlockQ8_0]) {
            for (xb, yb) in x.chunks_exact(32).zip(y.iter_mut()) {
                let v = load32(xb);
                let d = absmax32(&v) / 127.0;
                let id = if d != 0.0 { 1.0 / d } else { 0.0 };
                let (packed, _) = round_pack(&v, id);
                yb.d = F16Bits::from_f32(d);
                // SAFETY: `qs` is 32 bytes; unaligned store.
                unsafe { _mm256_storeu_si256(yb.qs.as_mut_ptr().cast(), packed) };
            }
        }
    }

    avx2_fn! {
        pub(super) fn quantize_q8_1(x: &[f32], y: &mut [BlockQ8_1]) {
            for (xb, yb) in x.chunks_exact(32).zip(y.iter_mut()) {
                let v = load32(xb);
                let d = absmax32(&v) / 127.0;
                let id = if d != 0.0 { 1.0 / d } else { 0.0 };
                let (packed, i) = round_pack(&v, id);
                let sum = hsum_epi32(_mm256_add_epi32(_mm256_add_epi32(i[0], i[1]), _mm256_add_epi32(i[2], i[3])));
                yb.d = F16Bits::from_f32(d);
                yb.s = F16Bits::from_f32(sum as f32 * d);
                // SAFETY: `qs` is 32 bytes; unaligned store.
                unsafe { _mm256_storeu_si256(yb.qs.as_mut_ptr().cast(), packed) };
            }
        }
    }

    avx2_fn! {
        pub(super) fn quantize_q8_k(x: &[f32], y: &mut [BlockQ8K]) {
            for (xb, yb) in x.chunks_exact(256).zip(y.iter_mut()) {
                let mut chunks = [[_mm256_setzero_ps(); 4]; 8];
                for (c, chunk) in chunks.iter_mut().enumerate() {
                    *chunk = load32(&xb[32 * c..]);
                }
                let mut vmax = _mm256_set1_ps(f32::NEG_INFINITY);
                let mut vmin = _mm256_set1_ps(f32::INFINITY);
                for c in &chunks {
                    for &v in c {
                        vmax = _mm256_max_ps(vmax, v);
                        vmin = _mm256_min_ps(vmin, v);
                    }
                }
                let (hi, lo) = (hmax(vmax), hmin(vmin));
                let max = if hi >= -lo { hi } else { lo };
                if max == 0.0 {
                    *yb = BlockQ8K { d: 0.0, qs: [0; 256], bsums: [0; 16] };
                    continue;
                }
                let iscale = -127.0 / max;
                for (c, v) in chunks.iter().enumerate() {
                    // |iscale·x| ≤ 127, so the saturating packs never clip; only
                    // the reference's MIN(127, ·) matters, and 127 is the ceiling.
                    let (packed, _) = round_pack(v, iscale);
                    // SAFETY: 32 bytes at offset 32c of the 256-byte `qs`.
                    unsafe { _mm256_storeu_si256(yb.qs.as_mut_ptr().add(32 * c).cast(), packed) };
                }
                for (s, q) in yb.bsums.iter_mut().zip(yb.qs.chunks_exact(16)) {
                    *s = q.iter().map(|&v| v as i16).sum();
                }
                yb.d = 1.0 / iscale;
            }
        }
    }
}
