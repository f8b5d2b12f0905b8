//! Register transposes for packing: both operands arrive with `k`
//! contiguous, and both packed layouts want `k` as the slow index.

use std::arch::x86_64::*;

use crate::isa::{avx2_fn, avx512_fn};

avx2_fn! {
    /// Transposes 8 x 8 floats: `r[i]` lane `j` becomes `r[j]` lane `i`.
    #[inline]
    pub(super) fn transpose8(r: &mut [__m256; 8]) {
        // Pairs of rows interleaved: t[2h] = (r[2h][4l], r[2h+1][4l], r[2h][4l+1], r[2h+1][4l+1]) per 128-bit lane l.
        let t = [
            _mm256_unpacklo_ps(r[0], r[1]),
            _mm256_unpackhi_ps(r[0], r[1]),
            _mm256_unpacklo_ps(r[2], r[3]),
            _mm256_unpackhi_ps(r[2], r[3]),
            _mm256_unpacklo_ps(r[4], r[5]),
            _mm256_unpackhi_ps(r[4], r[5]),
            _mm256_unpacklo_ps(r[6], r[7]),
            _mm256_unpackhi_ps(r[6], r[7]),
        ];
        // u[4g + c] lane l: rows 4g..4g+4 of column 4l + c.
        let u = [
            _mm256_shuffle_ps::<0x44>(t[0], t[2]),
            _mm256_shuffle_ps::<0xEE>(t[0], t[2]),
            _mm256_shuffle_ps::<0x44>(t[1], t[3]),
            _mm256_shuffle_ps::<0xEE>(t[1], t[3]),
            _mm256_shuffle_ps::<0x44>(t[4], t[6]),
            _mm256_shuffle_ps::<0xEE>(t[4], t[6]),
            _mm256_shuffle_ps::<0x44>(t[5], t[7]),
            _mm256_shuffle_ps::<0xEE>(t[5], t[7]),
        ];
        for c in 0..4 {
            r[c] = _mm256_permute2f128_ps::<0x20>(u[c], u[4 + c]);
            r[4 + c] = _mm256_permute2f128_ps::<0x31>(u[c], u[4 + c]);
        }
    }
}

avx512_fn! {
    /// Transposes 16 x 16 floats: `r[i]` lane `j` becomes `r[j]` lane `i`.
    #[inline]
    pub(super) fn transpose16(r: &mut [__m512; 16]) {
        // As in `transpose8`, within each 128-bit lane: u[4g + c] lane l
        // holds rows 4g..4g+4 of column 4l + c.
        let mut u = [_mm512_setzero_ps(); 16];
        for g in 0..4 {
            let (r0, r1, r2, r3) = (r[4 * g], r[4 * g + 1], r[4 * g + 2], r[4 * g + 3]);
            let (lo01, hi01) = (_mm512_unpacklo_ps(r0, r1), _mm512_unpackhi_ps(r0, r1));
            let (lo23, hi23) = (_mm512_unpacklo_ps(r2, r3), _mm512_unpackhi_ps(r2, r3));
            u[4 * g] = _mm512_shuffle_ps::<0x44>(lo01, lo23);
            u[4 * g + 1] = _mm512_shuffle_ps::<0xEE>(lo01, lo23);
            u[4 * g + 2] = _mm512_shuffle_ps::<0x44>(hi01, hi23);
            u[4 * g + 3] = _mm512_shuffle_ps::<0xEE>(hi01, hi23);
        }
        // Gather the four 128-bit lanes l of the groups into column 4l + c.
        for c in 0..4 {
            // v: (g0 l0, g0 l2, g1 l0, g1 l2) and (g0 l1, g0 l3, g1 l1, g1 l3); w: the same of g2, g3.
            let v_even = _mm512_shuffle_f32x4::<0x88>(u[c], u[4 + c]);
            let v_odd = _mm512_shuffle_f32x4::<0xDD>(u[c], u[4 + c]);
            let w_even = _mm512_shuffle_f32x4::<0x88>(u[8 + c], u[12 + c]);
            let w_odd = _mm512_shuffle_f32x4::<0xDD>(u[8 + c], u[12 + c]);
            r[c] = _mm512_shuffle_f32x4::<0x88>(v_even, w_even);
            r[8 + c] = _mm512_shuffle_f32x4::<0xDD>(v_even, w_even);
            r[4 + c] = _mm512_shuffle_f32x4::<0x88>(v_odd, w_odd);
            r[12 + c] = _mm512_shuffle_f32x4::<0xDD>(v_odd, w_odd);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Isa;

    #[test]
    fn transposes_move_every_element() {
        if Isa::available().any(|i| i == Isa::Avx2) {
            let src: Vec<f32> = (0..64).map(|i| i as f32).collect();
            // SAFETY: AVX2 is available (checked above); the loads and stores stay in `src` and `out`.
            let out = unsafe {
                let mut r: [__m256; 8] = std::array::from_fn(|i| _mm256_loadu_ps(src.as_ptr().add(8 * i)));
                transpose8(&mut r);
                let mut out = [0f32; 64];
                for (i, v) in r.iter().enumerate() {
                    _mm256_storeu_ps(out.as_mut_ptr().add(8 * i), *v);
                }
                out
            };
            for i in 0..8 {
                for j in 0..8 {
                    assert_eq!(out[8 * j + i], src[8 * i + j]);
                }
            }
        }
        if Isa::available().any(|i| i == Isa::Avx512) {
            let src: Vec<f32> = (0..256).map(|i| i as f32).collect();
            // SAFETY: AVX-512 is available (checked above); the loads and stores stay in `src` and `out`.
            let out = unsafe {
                let mut r: [__m512; 16] = std::array::from_fn(|i| _mm512_loadu_ps(src.as_ptr().add(16 * i)));
                transpose16(&mut r);
                let mut out = [0f32; 256];
                for (i, v) in r.iter().enumerate() {
                    _mm512_storeu_ps(out.as_mut_ptr().add(16 * i), *v);
                }
                out
            };
            for i in 0..16 {
                for j in 0..16 {
                    assert_eq!(out[16 * j + i], src[16 * i + j]);
                }
            }
        }
    }
}
