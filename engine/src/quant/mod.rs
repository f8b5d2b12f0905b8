//! ggml's block-quantized formats: layouts, reference quantizers, dequantizers.
//!
//! Every block struct is `#[repr(C)]` with exactly ggml's field order and size
//! (asserted against [`DType::bytes_per_block`]), so a row of blocks is the same
//! bytes ggml writes into a GGUF file. The f16 fields are stored as raw
//! little-endian bytes ([`F16Bits`]), which gives every block except
//! [`BlockQ8K`] an alignment of 1: rows can be viewed in place from any byte
//! offset of a mapped file.
//!
//! The reference quantizers follow ggml's `quantize_row_*_ref` operation by
//! operation (same float expressions in the same order, no fused multiply-add),
//! because bit-identical output is the contract: a model quantized here and by
//! ggml must be the same file.

mod iq4_nl;
mod iq4_xs;
mod k_search;
mod legacy;
mod mxfp4;
mod q2_k;
mod q3_k;
mod q4_k;
mod q5_k;
mod q6_k;
mod q8;

#[cfg(test)]
mod tests;

pub use iq4_nl::{BlockIQ4NL, KVALUES_IQ4NL};
pub use iq4_xs::BlockIQ4XS;
pub use k_search::{get_scale_min_k4, make_q3_quants, make_qkx2_quants, make_qx_quants, nearest_int};
pub use legacy::{BlockQ4_0, BlockQ4_1, BlockQ5_0, BlockQ5_1};
pub use mxfp4::{BlockMXFP4, KVALUES_MXFP4, e8m0_to_f32_half};
pub use q2_k::BlockQ2K;
pub use q3_k::BlockQ3K;
pub use q4_k::BlockQ4K;
pub use q5_k::BlockQ5K;
pub use q6_k::BlockQ6K;
pub use q8::{BlockQ8_0, BlockQ8_1, BlockQ8K};

use crate::{DType, Error, Result};

/// An IEEE half-precision value stored as its two little-endian bytes, so that
/// blocks holding it have alignment 1 (ggml's `ggml_half`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(transparent)]
pub struct F16Bits(pub [u8; 2]);

impl F16Bits {
    /// Rounds `v` to the nearest f16 (ties to even), as ggml's `GGML_FP32_TO_FP16`.
    #[inline]
    pub fn from_f32(v: f32) -> Self {
        Self(half::f16::from_f32(v).to_le_bytes())
    }

    /// The exact f32 value of this f16 (ggml's `GGML_FP16_TO_FP32`).
    #[inline]
    pub fn to_f32(self) -> f32 {
        half::f16::from_le_bytes(self.0).to_f32()
    }

    /// The raw bits.
    #[inline]
    pub fn bits(self) -> u16 {
        u16::from_le_bytes(self.0)
    }
}

/// One quantized block: `ELEMS` values stored in `size_of::<Self>()` bytes.
///
/// `dequantize` works on exactly `ELEMS` values; callers hand it
/// `chunks_exact(ELEMS)` slices (the row functions below do).
pub trait QuantBlock: bytemuck::Pod {
    /// The dtype whose blocks these are.
    const DTYPE: DType;
    /// Values per block.
    const ELEMS: usize;

    /// Writes the block's `ELEMS` values into `y`.
    fn dequantize(&self, y: &mut [f32]);
}

/// A block type Gantry can also write: it has ggml's reference quantizer.
/// (The lookup-table types IQ4_NL, IQ4_XS and MXFP4 are read only: their
/// quantizers search a table per block and nothing here writes them yet.)
pub trait QuantizeBlock: QuantBlock {
    /// ggml's reference quantizer for one block of `ELEMS` values (exactly
    /// `ELEMS` values, as [`QuantBlock::dequantize`]).
    fn quantize(x: &[f32]) -> Self;
}

/// Quantizes whole blocks of `x` into `y` (as many as both hold).
pub fn quantize_blocks<B: QuantizeBlock>(x: &[f32], y: &mut [B]) {
    for (xb, yb) in x.chunks_exact(B::ELEMS).zip(y.iter_mut()) {
        *yb = B::quantize(xb);
    }
}

/// Dequantizes the blocks `x` into `y` (as many as both hold).
pub fn dequantize_blocks<B: QuantBlock>(x: &[B], y: &mut [f32]) {
    for (xb, yb) in x.iter().zip(y.chunks_exact_mut(B::ELEMS)) {
        xb.dequantize(yb);
    }
}

/// Quantizes one row of f32 values into `dtype` blocks with ggml's reference
/// quantizer, writing the first `dtype.row_size(src.len())` bytes of `dst`.
///
/// Errors when `dtype` is not quantized, `src.len()` is not a multiple of the
/// block size, or `dst` is too short.
pub fn quantize_row(dtype: DType, src: &[f32], dst: &mut [u8]) -> Result<()> {
    match dtype {
        DType::Q4_0 => quantize_row_bytes::<BlockQ4_0>(src, dst),
        DType::Q4_1 => quantize_row_bytes::<BlockQ4_1>(src, dst),
        DType::Q5_0 => quantize_row_bytes::<BlockQ5_0>(src, dst),
        DType::Q5_1 => quantize_row_bytes::<BlockQ5_1>(src, dst),
        DType::Q8_0 => quantize_row_bytes::<BlockQ8_0>(src, dst),
        DType::Q8_1 => quantize_row_bytes::<BlockQ8_1>(src, dst),
        DType::Q2_K => quantize_row_bytes::<BlockQ2K>(src, dst),
        DType::Q3_K => quantize_row_bytes::<BlockQ3K>(src, dst),
        DType::Q4_K => quantize_row_bytes::<BlockQ4K>(src, dst),
        DType::Q5_K => quantize_row_bytes::<BlockQ5K>(src, dst),
        DType::Q6_K => quantize_row_bytes::<BlockQ6K>(src, dst),
        DType::Q8_K => quantize_row_bytes::<BlockQ8K>(src, dst),
        DType::IQ4_NL | DType::IQ4_XS | DType::MXFP4 => {
            Err(Error::UnsupportedDType { what: "quantize_row (read only: no quantizer for this type)".into(), dtype })
        }
        DType::F32 | DType::F16 | DType::BF16 | DType::I32 => {
            Err(Error::UnsupportedDType { what: "quantize_row (not a quantized type)".into(), dtype })
        }
    }
}

/// Dequantizes one row of `dtype` blocks into `dst.len()` f32 values.
///
/// Errors when `dtype` is not quantized, `dst.len()` is not a multiple of the
/// block size, or `src` holds fewer than `dtype.row_size(dst.len())` bytes.
pub fn dequantize_row(dtype: DType, src: &[u8], dst: &mut [f32]) -> Result<()> {
    match dtype {
        DType::Q4_0 => dequantize_row_bytes::<BlockQ4_0>(src, dst),
        DType::Q4_1 => dequantize_row_bytes::<BlockQ4_1>(src, dst),
        DType::Q5_0 => dequantize_row_bytes::<BlockQ5_0>(src, dst),
        DType::Q5_1 => dequantize_row_bytes::<BlockQ5_1>(src, dst),
        DType::Q8_0 => dequantize_row_bytes::<BlockQ8_0>(src, dst),
        DType::Q8_1 => dequantize_row_bytes::<BlockQ8_1>(src, dst),
        DType::Q2_K => dequantize_row_bytes::<BlockQ2K>(src, dst),
        DType::Q3_K => dequantize_row_bytes::<BlockQ3K>(src, dst),
        DType::Q4_K => dequantize_row_bytes::<BlockQ4K>(src, dst),
        DType::Q5_K => dequantize_row_bytes::<BlockQ5K>(src, dst),
        DType::Q6_K => dequantize_row_bytes::<BlockQ6K>(src, dst),
        DType::Q8_K => dequantize_row_bytes::<BlockQ8K>(src, dst),
        DType::IQ4_NL => dequantize_row_bytes::<BlockIQ4NL>(src, dst),
        DType::IQ4_XS => dequantize_row_bytes::<BlockIQ4XS>(src, dst),
        DType::MXFP4 => dequantize_row_bytes::<BlockMXFP4>(src, dst),
        DType::F32 | DType::F16 | DType::BF16 | DType::I32 => {
            Err(Error::UnsupportedDType { what: "dequantize_row (not a quantized type)".into(), dtype })
        }
    }
}

/// Checks a row of `n` values of `B` against a byte buffer of `have` bytes and
/// returns the row's size in bytes.
fn checked_row_bytes<B: QuantBlock>(what: &str, n: usize, have: usize) -> Result<usize> {
    let dtype = B::DTYPE;
    let need = dtype.row_size(n).ok_or_else(|| Error::InvalidTensor {
        tensor: format!("{what} row of {n} {dtype} values"),
        reason: format!("the row length must be a multiple of {dtype}'s block size {}", B::ELEMS),
    })?;
    if have < need {
        return Err(Error::OutOfBounds(format!(
            "{what}: a row of {n} {dtype} values needs {need} bytes, the buffer has {have}"
        )));
    }
    Ok(need)
}

fn quantize_row_bytes<B: QuantizeBlock>(src: &[f32], dst: &mut [u8]) -> Result<()> {
    let need = checked_row_bytes::<B>("quantize_row", src.len(), dst.len())?;
    let size = size_of::<B>();
    for (x, y) in src.chunks_exact(B::ELEMS).zip(dst[..need].chunks_exact_mut(size)) {
        y.copy_from_slice(bytemuck::bytes_of(&B::quantize(x)));
    }
    Ok(())
}

fn dequantize_row_bytes<B: QuantBlock>(src: &[u8], dst: &mut [f32]) -> Result<()> {
    let need = checked_row_bytes::<B>("dequantize_row", dst.len(), src.len())?;
    let size = size_of::<B>();
    for (x, y) in src[..need].chunks_exact(size).zip(dst.chunks_exact_mut(B::ELEMS)) {
        // Blocks may sit at any byte offset (Q8_K has alignment 4): read a copy.
        bytemuck::pod_read_unaligned::<B>(x).dequantize(y);
    }
    Ok(())
}
