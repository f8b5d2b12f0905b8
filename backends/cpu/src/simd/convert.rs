//! F16 and BF16 slices to and from F32.

use half::{bf16, f16};

use super::multiversion::multiversion;

/// One bfloat16 value as f32 (exact: a bfloat16 is the top half of an f32).
#[inline(always)]
pub(super) fn bf16_to_f32(x: bf16) -> f32 {
    f32::from_bits((x.to_bits() as u32) << 16)
}

/// Converts halves to floats (exact), eight at a time with F16C where the
/// CPU has it. (`half`'s slice conversion asks the CPU what it has on every
/// call and converts eight values per out-of-line call: with K/V rows of 64
/// values that was a fifth of a 16-sequence decode step.)
pub fn f16_to_f32(src: &[f16], dst: &mut [f32]) {
    let n = src.len().min(dst.len());
    let (src, dst) = (&src[..n], &mut dst[..n]);
    #[cfg(target_arch = "x86_64")]
    if super::has_avx2_fma() && std::arch::is_x86_feature_detected!("f16c") {
        // SAFETY: the CPU has AVX2, FMA and F16C (checked just above).
        unsafe { f16_to_f32_f16c(src, dst) };
        return;
    }
    for (d, s) in dst.iter_mut().zip(src) {
        *d = s.to_f32();
    }
}

#[cfg(target_arch = "x86_64")]
crate::isa::avx2_fn! {
    /// [`f16_to_f32`] with `vcvtph2ps`, eight values per instruction.
    ///
    /// # Safety
    /// AVX2, FMA and F16C; `src` and `dst` have the same length.
    #[inline]
    unsafe fn f16_to_f32_f16c(src: &[f16], dst: &mut [f32]) {
        use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm256_cvtph_ps, _mm256_storeu_ps};
        let mut i = 0;
        while i + 8 <= src.len() {
            // SAFETY: values i .. i + 8 lie inside both slices.
            unsafe {
                let h = _mm_loadu_si128(src.as_ptr().add(i).cast::<__m128i>());
                _mm256_storeu_ps(dst.as_mut_ptr().add(i), _mm256_cvtph_ps(h));
            }
            i += 8;
        }
        for (d, s) in dst[i..].iter_mut().zip(&src[i..]) {
            *d = s.to_f32();
        }
    }
}

/// Converts floats to halves, rounding to nearest even.
pub fn f32_to_f16(src: &[f32], dst: &mut [f16]) {
    use half::slice::HalfFloatSliceExt;
    let n = src.len().min(dst.len());
    dst[..n].convert_from_f32_slice(&src[..n]);
}

multiversion! {
    /// Converts bfloat16 values to floats (exact).
    pub fn bf16_to_f32_slice(src: &[bf16], dst: &mut [f32]) {
        for (d, s) in dst.iter_mut().zip(src) {
            *d = bf16_to_f32(*s);
        }
    }
}

/// Converts floats to bfloat16, rounding to nearest even (NaN stays NaN).
pub fn f32_to_bf16_slice(src: &[f32], dst: &mut [bf16]) {
    for (d, s) in dst.iter_mut().zip(src) {
        *d = bf16::from_f32(*s);
    }
}
