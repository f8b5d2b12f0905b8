//! The scores' pass of a block read in place: the raw scores `q · key` of
//! a block's visible F16 keys for up to four (query, head) rows that share
//! them, in one call per block. On AVX-512 two keys at a time, one in each
//! 256-bit half of the registers; on AVX2 one at a time, the dot's body
//! inlined.
//!
//! Each AVX-512 half does, lane for lane, what [`crate::simd::dot_f16`] does
//! on AVX2 for one key (eight chunks of eight values into four
//! accumulators in turn, then the same sums: the accumulators in pairs,
//! the two 128-bit halves, then the lanes as `hsum` adds them), so every
//! score has the bits of the key-by-key pass: the model's logits do not
//! depend on the path. Scoring a key took one call per key (the dot of its
//! rows, the CPU's features checked each time) and half the decoding
//! attention's time; here a pair of keys is eight conversions, eight
//! multiply-adds a row and a few shuffles.

use std::arch::x86_64::*;

use half::f16;

use crate::isa::{avx2_fn, avx512_fn};
use crate::simd::avx2::{dot_each, load_f16};

/// Values per K row the kernel takes (a decoder's usual head size).
pub(super) const DK: usize = 64;

avx512_fn! {
    /// `out[r][j] = q[r] · key(j)` for every key `j` of `keys` (bit `j`),
    /// `key(j)` the [`DK`] halves at `keys_at + j · stride`, each score with
    /// the bits of [`crate::simd::dot_f16`] on AVX2.
    ///
    /// # Safety
    /// AVX-512 F/BW/VL/DQ with F16C; each `q[r]` points to [`DK`] floats,
    /// each `out[r]` to 64; `keys_at + j · stride` to [`DK`] halves for
    /// every key of `keys`.
    pub(super) unsafe fn score_keys<const R: usize>(
        q: [*const f32; R],
        keys_at: *const u8,
        stride: usize,
        keys: u64,
        out: [*mut f32; R],
    ) {
        let mut left = keys;
        while left != 0 {
            // Two keys (the last one twice when their number is odd).
            let j0 = left.trailing_zeros() as usize;
            left &= left - 1;
            let j1 = if left == 0 { j0 } else { left.trailing_zeros() as usize };
            left &= left.wrapping_sub(1);
            // SAFETY: the caller's contract, for every access below.
            unsafe {
                let k0 = keys_at.add(j0 * stride).cast::<__m128i>();
                let k1 = keys_at.add(j1 * stride).cast::<__m128i>();
                let mut acc = [[_mm512_setzero_ps(); 4]; R];
                for c in 0..DK / 8 {
                    // Values 8c .. 8c + 8 of both keys, key j0 in the low half.
                    let halves = _mm256_inserti128_si256::<1>(
                        _mm256_castsi128_si256(_mm_loadu_si128(k0.add(c))),
                        _mm_loadu_si128(k1.add(c)),
                    );
                    let x = _mm512_cvtph_ps(halves);
                    for r in 0..R {
                        let qc = _mm512_broadcast_f32x8(_mm256_loadu_ps(q[r].add(8 * c)));
                        acc[r][c % 4] = _mm512_fmadd_ps(x, qc, acc[r][c % 4]);
                    }
                }
                for r in 0..R {
                    let s = _mm512_add_ps(_mm512_add_ps(acc[r][0], acc[r][1]), _mm512_add_ps(acc[r][2], acc[r][3]));
                    // Per key: its two 128-bit quarters added (lanes m and m + 4),
                    let s = _mm512_add_ps(s, _mm512_shuffle_f32x4::<0b10_11_00_01>(s, s));
                    // then lanes 0 + 2 and 1 + 3, then those two.
                    let s = _mm512_add_ps(s, _mm512_permute_ps::<0b11_10_11_10>(s));
                    let s = _mm512_add_ps(s, _mm512_permute_ps::<0b01_01_01_01>(s));
                    *out[r].add(j0) = _mm_cvtss_f32(_mm512_castps512_ps128(s));
                    *out[r].add(j1) = _mm_cvtss_f32(_mm512_extractf32x4_ps::<2>(s));
                }
            }
        }
    }
}

avx2_fn! {
    /// [`score_keys`] on AVX2 (and F16C, FMA): one key at a time through
    /// [`dot_each`], the body of [`crate::simd::dot_f16_each`], inlined
    /// here instead of called (with the CPU's features checked) per key.
    ///
    /// # Safety
    /// AVX2, FMA and F16C; as [`score_keys`] otherwise.
    pub(super) unsafe fn score_keys_avx2<const R: usize>(
        q: [*const f32; R],
        keys_at: *const u8,
        stride: usize,
        keys: u64,
        out: [*mut f32; R],
    ) {
        let mut left = keys;
        while left != 0 {
            let j = left.trailing_zeros() as usize;
            left &= left - 1;
            // SAFETY: the caller's contract, for every access below.
            unsafe {
                let key = std::slice::from_raw_parts(keys_at.add(j * stride).cast::<f16>(), DK);
                let scores = dot_each(key, q.map(|p| std::slice::from_raw_parts(p, DK)), |p, i| load_f16(p, i));
                for (o, s) in out.iter().zip(scores) {
                    *o.add(j) = s;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::isa::Isa;
    use crate::simd;

    #[test]
    fn every_score_has_the_bits_of_the_one_key_dot() {
        let paths: Vec<Isa> = Isa::available().filter(|&i| i != Isa::Scalar).collect();
        if paths.is_empty() {
            eprintln!("skipped: this CPU has no AVX2");
            return;
        }
        let mut rng = gantry_engine::SplitMix64::new(7);
        let stride_halves = DK + 8;
        let keys: Vec<f16> = rng.values(64 * stride_halves, -3.0, 3.0).into_iter().map(f16::from_f32).collect();
        let q: Vec<f32> = rng.values(3 * DK, -2.0, 2.0);
        for isa in paths {
            // Every key, an odd number of keys, one key, none, and scattered ones.
            for live in [u64::MAX, (1 << 37) - 1, 1 << 63, 0, 0x8421_0000_ff00_1235] {
                let mut out = vec![f32::NAN; 3 * 64];
                let o = out.as_mut_ptr();
                let rows = [0, 1, 2].map(|r| q[r * DK..].as_ptr());
                let outs = [0, 1, 2].map(|r| o.wrapping_add(r * 64));
                let at = keys.as_ptr().cast::<u8>();
                // SAFETY: the CPU has the path's features (it is available);
                // the rows, keys and outputs are in range.
                unsafe {
                    match isa {
                        Isa::Avx2 => score_keys_avx2(rows, at, stride_halves * 2, live, outs),
                        _ => score_keys(rows, at, stride_halves * 2, live, outs),
                    }
                }
                for r in 0..3 {
                    for j in 0..64 {
                        let got = out[r * 64 + j];
                        if live >> j & 1 == 1 {
                            let key = &keys[j * stride_halves..j * stride_halves + DK];
                            let want = simd::dot_f16(key, &q[r * DK..(r + 1) * DK]);
                            assert_eq!(got.to_bits(), want.to_bits(), "{isa:?} row {r} key {j}: {got} vs {want}");
                        } else {
                            assert!(got.is_nan(), "{isa:?} row {r} key {j} not live, written");
                        }
                    }
                }
            }
        }
    }
}
