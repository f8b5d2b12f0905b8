//! F16 and BF16 slices to and from F32.

use half::{bf16, f16};

use super::multiversion::multiversion;

/// One bfloat16 value as f32 (exact: a bfloat16 is the top half of an f32).
#[inline(always)]
pub(super) fn bf16_to_f32(x: bf16) -> f32 {
    f32::from_bits((x.to_bits() as u32) << 16)
}

/// Converts halves to floats (F16C when available, through `half`).
pub fn f16_to_f32(src: &[f16], dst: &mut [f32]) {
    use half::slice::HalfFloatSliceExt;
    let n = src.len().min(dst.len());
    src[..n].convert_to_f32_slice(&mut dst[..n]);
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
