//! IQ4_NL: 32 values per block, each a 4-bit index into one fixed
//! non-linear table ([`KVALUES_IQ4NL`]) times the block's f16 scale.
//!
//! Read only (no quantizer here): ggml's quantizer searches the scale per
//! block, which nothing in Gantry needs yet.

use super::{F16Bits, QuantBlock};
use crate::DType;

const QK: usize = 32;

/// ggml's `kvalues_iq4nl`: the 16 values a 4-bit index selects (IQ4_NL and
/// IQ4_XS). Spaced more finely near zero, where most weights lie.
pub const KVALUES_IQ4NL: [i8; 16] = [-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113];

/// IQ4_NL: `x = d·KVALUES_IQ4NL[q]`, q ∈ [0, 15].
#[derive(Debug, Clone, Copy, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub struct BlockIQ4NL {
    /// The scale.
    pub d: F16Bits,
    /// Indices: low nibble = value j, high nibble = value j + 16.
    pub qs: [u8; QK / 2],
}

impl BlockIQ4NL {
    /// The 32 table values (unscaled), in value order.
    #[inline]
    pub fn values(&self) -> [i8; QK] {
        table_nibbles(&self.qs, &KVALUES_IQ4NL)
    }
}

/// The table entries 16 bytes of nibbles select: low nibbles give values
/// 0..16, high nibbles values 16..32 (the layout of every 4-bit lookup type).
#[inline]
pub(crate) fn table_nibbles(qs: &[u8; 16], table: &[i8; 16]) -> [i8; 32] {
    let mut q = [0i8; 32];
    for j in 0..16 {
        q[j] = table[(qs[j] & 0xF) as usize];
        q[j + 16] = table[(qs[j] >> 4) as usize];
    }
    q
}

const _: () = assert!(size_of::<BlockIQ4NL>() == DType::IQ4_NL.bytes_per_block());

impl QuantBlock for BlockIQ4NL {
    const DTYPE: DType = DType::IQ4_NL;
    const ELEMS: usize = QK;

    fn dequantize(&self, y: &mut [f32]) {
        // ggml: d * kvalues[...], the table entry converted to float.
        let d = self.d.to_f32();
        for (o, &v) in y[..QK].iter_mut().zip(&self.values()) {
            *o = d * v as f32;
        }
    }
}
