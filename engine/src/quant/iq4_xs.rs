//! IQ4_XS: 256-value super-blocks of eight 32-value sub-blocks, each value a
//! 4-bit index into [`KVALUES_IQ4NL`], each sub-block with a 6-bit scale
//! (offset by 32) times the super-block's f16 scale.
//!
//! Read only, as IQ4_NL.

use super::iq4_nl::{KVALUES_IQ4NL, table_nibbles};
use super::{F16Bits, QuantBlock};
use crate::{DType, QK_K};

/// IQ4_XS: `x = d·(ls − 32)·KVALUES_IQ4NL[q]`, `ls` the sub-block's 6-bit scale.
#[derive(Debug, Clone, Copy, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub struct BlockIQ4XS {
    /// The super-block scale.
    pub d: F16Bits,
    /// The high 2 bits of the eight sub-block scales (bits 2·ib, 2·ib + 1),
    /// a little-endian u16 kept as bytes so the block has alignment 1.
    pub scales_h: [u8; 2],
    /// The low 4 bits of the sub-block scales: sub-block ib in the low
    /// nibble of byte ib / 2 when ib is even, the high nibble when odd.
    pub scales_l: [u8; QK_K / 64],
    /// Indices: sub-block ib's 16 bytes at 16·ib, low nibble = value j,
    /// high nibble = value j + 16 of the sub-block.
    pub qs: [u8; QK_K / 2],
}

impl BlockIQ4XS {
    /// The 6-bit scale `ls` of sub-block `ib` (0..8), minus 32: −32..=31.
    #[inline]
    pub fn sub_scale(&self, ib: usize) -> i32 {
        let low = (self.scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF;
        let high = (u16::from_le_bytes(self.scales_h) >> (2 * ib)) & 3;
        (low as i32 | (high as i32) << 4) - 32
    }

    /// The 32 table values (unscaled) of sub-block `ib` (0..8), in value order.
    #[inline]
    pub fn sub_values(&self, ib: usize) -> [i8; 32] {
        let qs: &[u8; 16] = self.qs[16 * ib..16 * ib + 16].try_into().unwrap_or(&[0; 16]);
        table_nibbles(qs, &KVALUES_IQ4NL)
    }
}

const _: () = assert!(size_of::<BlockIQ4XS>() == DType::IQ4_XS.bytes_per_block());

impl QuantBlock for BlockIQ4XS {
    const DTYPE: DType = DType::IQ4_XS;
    const ELEMS: usize = QK_K;

    fn dequantize(&self, y: &mut [f32]) {
        let d = self.d.to_f32();
        for (ib, out) in y[..QK_K].chunks_exact_mut(32).enumerate() {
            // ggml: dl = d * (ls - 32) in float, then dl * kvalues[...].
            let dl = d * self.sub_scale(ib) as f32;
            for (o, &v) in out.iter_mut().zip(&self.sub_values(ib)) {
                *o = dl * v as f32;
            }
        }
    }
}
