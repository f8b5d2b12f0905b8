//! Conversions between f32 values and the bytes of a tensor's dtype.

use half::{bf16, f16};

use crate::{DType, TensorDesc};

/// Encodes `values` as `dtype` bytes (F32, F16, BF16, I32 by truncation toward
/// zero; quantized types through their reference quantizer). `None` for a
/// dtype that cannot be written from f32, or a length that is not a whole
/// number of blocks.
pub fn f32_to_bytes(dtype: DType, values: &[f32]) -> Option<Vec<u8>> {
    Some(match dtype {
        DType::F32 => bytemuck::cast_slice(values).to_vec(),
        DType::F16 => values.iter().flat_map(|&v| f16::from_f32(v).to_le_bytes()).collect(),
        DType::BF16 => values.iter().flat_map(|&v| bf16::from_f32(v).to_le_bytes()).collect(),
        DType::I32 => values.iter().flat_map(|&v| (v as i32).to_le_bytes()).collect(),
        q => {
            let mut out = vec![0u8; q.row_size(values.len())?];
            crate::quant::quantize_row(q, values, &mut out).ok()?;
            out
        }
    })
}

/// Decodes one element of a plain dtype at the start of `bytes`.
#[inline]
pub fn element_to_f32(dtype: DType, bytes: &[u8]) -> Option<f32> {
    Some(match dtype {
        DType::F32 => f32::from_le_bytes(bytes.get(..4)?.try_into().ok()?),
        DType::F16 => f16::from_le_bytes(bytes.get(..2)?.try_into().ok()?).to_f32(),
        DType::BF16 => bf16::from_le_bytes(bytes.get(..2)?.try_into().ok()?).to_f32(),
        DType::I32 => i32::from_le_bytes(bytes.get(..4)?.try_into().ok()?) as f32,
        _ => return None,
    })
}

/// Reads a tensor's bytes (from its first byte, `nbytes` long) as f32 values
/// in logical order, following its strides. Quantized tensors must have
/// contiguous rows; they are dequantized row by row.
pub fn strided_to_f32(desc: &TensorDesc, bytes: &[u8]) -> Option<Vec<f32>> {
    let ne = desc.ne;
    let mut out = Vec::with_capacity(desc.nelements());
    let quantized = desc.dtype.is_quantized();
    let row_bytes = desc.dtype.row_size(ne[0])?;
    let mut row = if quantized { vec![0f32; ne[0]] } else { Vec::new() };
    for i3 in 0..ne[3] {
        for i2 in 0..ne[2] {
            for i1 in 0..ne[1] {
                let base = i1 * desc.nb[1] + i2 * desc.nb[2] + i3 * desc.nb[3];
                if quantized {
                    crate::quant::dequantize_row(desc.dtype, bytes.get(base..base + row_bytes)?, &mut row).ok()?;
                    out.extend_from_slice(&row);
                } else {
                    for i0 in 0..ne[0] {
                        out.push(element_to_f32(desc.dtype, bytes.get(base + i0 * desc.nb[0]..)?)?);
                    }
                }
            }
        }
    }
    Some(out)
}
