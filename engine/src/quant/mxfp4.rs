//! MXFP4 (OCP microscaling FP4): 32 values per block, each an E2M1 float
//! (4 bits) sharing one E8M0 exponent.
//!
//! ggml stores the E2M1 values doubled as small integers ([`KVALUES_MXFP4`])
//! and halves the exponent's power of two instead ([`e8m0_to_f32_half`]).
//! Read only: no quantizer here.

use super::QuantBlock;
use super::iq4_nl::table_nibbles;
use crate::DType;

const QK: usize = 32;

/// ggml's `kvalues_mxfp4`: twice the E2M1 value of each 4-bit code (sign in
/// bit 3), so that every entry is an integer.
pub const KVALUES_MXFP4: [i8; 16] = [0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12];

/// ggml's `GGML_E8M0_TO_FP32_HALF`: half of the power of two an E8M0
/// exponent byte encodes, `2^(e − 128)`, built from its bits (subnormal for
/// `e < 2`) so it is exact for every byte.
#[inline]
pub const fn e8m0_to_f32_half(e: u8) -> f32 {
    let bits = if e < 2 { 0x0020_0000u32 << e } else { ((e - 1) as u32) << 23 };
    f32::from_bits(bits)
}

/// MXFP4: `x = KVALUES_MXFP4[q]·2^(e − 128)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub struct BlockMXFP4 {
    /// The shared exponent (E8M0: the power of two `2^(e − 127)`).
    pub e: u8,
    /// Codes: low nibble = value j, high nibble = value j + 16.
    pub qs: [u8; QK / 2],
}

impl BlockMXFP4 {
    /// The 32 doubled E2M1 values, in value order.
    #[inline]
    pub fn values(&self) -> [i8; QK] {
        table_nibbles(&self.qs, &KVALUES_MXFP4)
    }

    /// The block's scale as ggml applies it (half the E8M0 power of two).
    #[inline]
    pub fn scale(&self) -> f32 {
        e8m0_to_f32_half(self.e)
    }
}

const _: () = assert!(size_of::<BlockMXFP4>() == DType::MXFP4.bytes_per_block());

impl QuantBlock for BlockMXFP4 {
    const DTYPE: DType = DType::MXFP4;
    const ELEMS: usize = QK;

    fn dequantize(&self, y: &mut [f32]) {
        // ggml: kvalues[...] * d (the int8 entry converted to float).
        let d = self.scale();
        for (o, &v) in y[..QK].iter_mut().zip(&self.values()) {
            *o = v as f32 * d;
        }
    }
}
