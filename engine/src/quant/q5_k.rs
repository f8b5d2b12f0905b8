//! Q5_K: Q4_K with a fifth bit per value; `x = d·sc·q − dmin·m`, q ∈ [0, 31].
//!
//! Low nibbles are laid out as in Q4_K; the fifth bit of value `64c + l` is bit
//! `2c` of `qh[l]`, that of value `64c + l + 32` bit `2c + 1`.

use super::q4_k::quantize_k4_groups;
use super::{F16Bits, QuantBlock, QuantizeBlock, get_scale_min_k4};
use crate::{DType, QK_K};

/// A Q5_K super-block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub struct BlockQ5K {
    /// Super-block scale of the scales.
    pub d: F16Bits,
    /// Super-block scale of the mins.
    pub dmin: F16Bits,
    /// 8 six-bit scales and 8 six-bit mins, packed as in Q4_K.
    pub scales: [u8; 12],
    /// Fifth bits of the quants.
    pub qh: [u8; QK_K / 8],
    /// Low 4 bits of the quants.
    pub qs: [u8; QK_K / 2],
}

const _: () = assert!(size_of::<BlockQ5K>() == DType::Q5_K.bytes_per_block());

impl QuantBlock for BlockQ5K {
    const DTYPE: DType = DType::Q5_K;
    const ELEMS: usize = QK_K;

    fn dequantize(&self, y: &mut [f32]) {
        let d = self.d.to_f32();
        let min = self.dmin.to_f32();
        for c in 0..QK_K / 64 {
            let (sc1, m1) = get_scale_min_k4(2 * c, &self.scales);
            let (sc2, m2) = get_scale_min_k4(2 * c + 1, &self.scales);
            let (d1, m1) = (d * sc1 as f32, min * m1 as f32);
            let (d2, m2) = (d * sc2 as f32, min * m2 as f32);
            let (u1, u2) = (1u8 << (2 * c), 2u8 << (2 * c));
            let q = &self.qs[32 * c..32 * c + 32];
            let y = &mut y[64 * c..64 * c + 64];
            for i in 0..32 {
                let h1 = if self.qh[i] & u1 != 0 { 16 } else { 0 };
                let h2 = if self.qh[i] & u2 != 0 { 16 } else { 0 };
                y[i] = d1 * ((q[i] & 0xF) + h1) as f32 - m1;
                y[i + 32] = d2 * ((q[i] >> 4) + h2) as f32 - m2;
            }
        }
    }
}

impl QuantizeBlock for BlockQ5K {
    fn quantize(x: &[f32]) -> Self {
        let (d, dmin, scales, l) = quantize_k4_groups(x, 31, -0.5, 15);
        let mut qs = [0u8; QK_K / 2];
        let mut qh = [0u8; QK_K / 8];
        for c in 0..QK_K / 64 {
            let (m1, m2) = (1u8 << (2 * c), 2u8 << (2 * c));
            for i in 0..32 {
                let mut l1 = l[64 * c + i];
                if l1 > 15 {
                    l1 -= 16;
                    qh[i] |= m1;
                }
                let mut l2 = l[64 * c + i + 32];
                if l2 > 15 {
                    l2 -= 16;
                    qh[i] |= m2;
                }
                qs[32 * c + i] = l1 | (l2 << 4);
            }
        }
        Self { d, dmin, scales, qh, qs }
    }
}
