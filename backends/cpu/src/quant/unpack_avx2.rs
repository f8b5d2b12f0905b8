//! AVX2 row unpacking into the tiled kernel's float form (the form of
//! `weight::WeightType::unpack`: signed bytes, one f32 scale per 16 values,
//! one f32 min per 32 values) for the 32-value types a batched decode
//! meets most: Q4_0, Q4_1 and Q8_0. Each block is one 128-bit nibble split
//! (or a 256-bit copy) and one F16C conversion of its scale (and min),
//! where the scalar form went value by value and through `half`'s run-time
//! dispatch for each f16. The scalar form stays the reference (tested).

use std::arch::x86_64::*;

use gantry_engine::quant::{BlockQ4_0, BlockQ4_1, BlockQ8_0, F16Bits};

use crate::isa::avx2_fn;

avx2_fn! {
    /// The f32 values of two f16 (`a` in lane 0, `b` in lane 1).
    ///
    /// # Safety
    /// The CPU has F16C.
    unsafe fn f16_pair(a: F16Bits, b: F16Bits) -> [f32; 2] {
        let bits = u32::from(u16::from_le_bytes(a.0)) | (u32::from(u16::from_le_bytes(b.0)) << 16);
        let v = _mm_cvtph_ps(_mm_cvtsi32_si128(bits as i32));
        let mut out = [0f32; 4];
        // SAFETY: `out` holds 4 floats, one 128-bit store.
        unsafe { _mm_storeu_ps(out.as_mut_ptr(), v) };
        [out[0], out[1]]
    }
}

avx2_fn! {
    /// The 32 nibbles of `qs` (low nibbles first), minus `offset`.
    ///
    /// # Safety
    /// The CPU has AVX2.
    unsafe fn nibbles(qs: &[u8; 16], offset: i8) -> __m256i {
        // SAFETY: `qs` is 16 bytes, one 128-bit load.
        let x = unsafe { _mm_loadu_si128(qs.as_ptr().cast()) };
        let mask = _mm_set1_epi8(0x0F);
        let lo = _mm_and_si128(x, mask);
        let hi = _mm_and_si128(_mm_srli_epi16(x, 4), mask);
        _mm256_sub_epi8(_mm256_set_m128i(hi, lo), _mm256_set1_epi8(offset))
    }
}

/// Stores 32 bytes at the start of `q` (which holds at least 32).
///
/// # Safety
/// The CPU has AVX2.
#[inline(always)]
unsafe fn store32(q: &mut [i8], v: __m256i) {
    debug_assert!(q.len() >= 32);
    // SAFETY: the callers pass `chunks_exact_mut(32)` chunks: 32 bytes.
    unsafe { _mm256_storeu_si256(q.as_mut_ptr().cast(), v) };
}

avx2_fn! {
    /// Unpacks a row of Q4_0 blocks: `q` (32 per block, q − 8), `scale16` (2 per block).
    /// Stops at the shortest of the three.
    ///
    /// # Safety
    /// The CPU has AVX2 and F16C.
    pub(crate) unsafe fn unpack_q4_0(row: &[BlockQ4_0], q: &mut [i8], scale16: &mut [f32]) {
        for ((b, q), s) in row.iter().zip(q.chunks_exact_mut(32)).zip(scale16.chunks_exact_mut(2)) {
            // SAFETY: AVX2 and F16C (the caller's contract); `q` is 32 bytes.
            unsafe {
                store32(q, nibbles(&b.qs, 8));
                let [d, _] = f16_pair(b.d, b.d);
                s.fill(d);
            }
        }
    }
}

avx2_fn! {
    /// Unpacks a row of Q4_1 blocks: `q` (32 per block), `scale16` (2 per
    /// block), `mins` (1 per block). Stops at the shortest of the four.
    ///
    /// # Safety
    /// The CPU has AVX2 and F16C.
    pub(crate) unsafe fn unpack_q4_1(row: &[BlockQ4_1], q: &mut [i8], scale16: &mut [f32], mins: &mut [f32]) {
        let blocks = row.iter().zip(q.chunks_exact_mut(32)).zip(scale16.chunks_exact_mut(2)).zip(mins.iter_mut());
        for (((b, q), s), m) in blocks {
            // SAFETY: AVX2 and F16C (the caller's contract); `q` is 32 bytes.
            unsafe {
                store32(q, nibbles(&b.qs, 0));
                let [d, min] = f16_pair(b.d, b.m);
                s.fill(d);
                *m = min;
            }
        }
    }
}

avx2_fn! {
    /// Unpacks a row of Q8_0 blocks: `q` (32 per block), `scale16` (2 per block).
    /// Stops at the shortest of the three.
    ///
    /// # Safety
    /// The CPU has AVX2 and F16C.
    pub(crate) unsafe fn unpack_q8_0(row: &[BlockQ8_0], q: &mut [i8], scale16: &mut [f32]) {
        for ((b, q), s) in row.iter().zip(q.chunks_exact_mut(32)).zip(scale16.chunks_exact_mut(2)) {
            // SAFETY: AVX2 and F16C (the caller's contract); `b.qs` and `q` are 32 bytes.
            unsafe {
                store32(q, _mm256_loadu_si256(b.qs.as_ptr().cast()));
                let [d, _] = f16_pair(b.d, b.d);
                s.fill(d);
            }
        }
    }
}
