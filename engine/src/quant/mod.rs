//! ggml's block-quantized formats: layouts, reference quantizers, dequantizers.

use crate::{DType, Error, Result};

/// Quantizes one row of f32 values into `dtype` blocks (ggml's reference quantizer).
pub fn quantize_row(dtype: DType, src: &[f32], dst: &mut [u8]) -> Result<()> {
    let _ = (src, dst);
    Err(Error::Unsupported(format!("quantizing to {dtype}")))
}

/// Dequantizes one row of `dtype` blocks into f32 values.
pub fn dequantize_row(dtype: DType, src: &[u8], dst: &mut [f32]) -> Result<()> {
    let _ = (src, dst);
    Err(Error::Unsupported(format!("dequantizing {dtype}")))
}
