//! Q6_K: 256 values in 16 groups of 16; `x = d·sc·(q − 32)` with 6-bit q and
//! signed 8-bit group scales.
//!
//! In each half of 128 values: `ql[64h + l]` holds values `l` (low nibble) and
//! `l + 64` (high nibble), `ql[64h + 32 + l]` values `l + 32` and `l + 96`;
//! `qh[32h + l]` holds the top 2 bits of values `l`, `l + 32`, `l + 64`,
//! `l + 96` at shifts 0, 2, 4, 6.

use super::k_search::GROUP_MAX_EPS;
use super::{F16Bits, QuantBlock, QuantizeBlock, make_qx_quants, nearest_int};
use crate::{DType, QK_K};

/// A Q6_K super-block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub struct BlockQ6K {
    /// Low 4 bits of the quants.
    pub ql: [u8; QK_K / 2],
    /// High 2 bits of the quants.
    pub qh: [u8; QK_K / 4],
    /// Group scales.
    pub scales: [i8; QK_K / 16],
    /// Super-block scale.
    pub d: F16Bits,
}

const _: () = assert!(size_of::<BlockQ6K>() == DType::Q6_K.bytes_per_block());

impl QuantBlock for BlockQ6K {
    const DTYPE: DType = DType::Q6_K;
    const ELEMS: usize = QK_K;

    fn dequantize(&self, y: &mut [f32]) {
        let d = self.d.to_f32();
        for h in 0..2 {
            let ql = &self.ql[64 * h..64 * h + 64];
            let qh = &self.qh[32 * h..32 * h + 32];
            let sc = &self.scales[8 * h..8 * h + 8];
            let y = &mut y[128 * h..128 * h + 128];
            for i in 0..32 {
                let is = i / 16;
                let q1 = ((ql[i] & 0xF) | ((qh[i] & 3) << 4)) as i32 - 32;
                let q2 = ((ql[i + 32] & 0xF) | (((qh[i] >> 2) & 3) << 4)) as i32 - 32;
                let q3 = ((ql[i] >> 4) | (((qh[i] >> 4) & 3) << 4)) as i32 - 32;
                let q4 = ((ql[i + 32] >> 4) | (((qh[i] >> 6) & 3) << 4)) as i32 - 32;
                y[i] = d * sc[is] as f32 * q1 as f32;
                y[i + 32] = d * sc[is + 2] as f32 * q2 as f32;
                y[i + 64] = d * sc[is + 4] as f32 * q3 as f32;
                y[i + 96] = d * sc[is + 6] as f32 * q4 as f32;
            }
        }
    }
}

impl QuantizeBlock for BlockQ6K {
    fn quantize(x: &[f32]) -> Self {
        let x = &x[..QK_K];
        let mut l = [0i8; QK_K];
        let mut scales = [0f32; QK_K / 16];
        let mut out = Self { ql: [0; QK_K / 2], qh: [0; QK_K / 4], scales: [0; QK_K / 16], d: F16Bits::default() };

        let mut max_scale = 0f32;
        let mut max_abs_scale = 0f32;
        for ib in 0..QK_K / 16 {
            let scale = make_qx_quants(16, 32, &x[16 * ib..16 * ib + 16], &mut l[16 * ib..16 * ib + 16], 1, None);
            scales[ib] = scale;
            if scale.abs() > max_abs_scale {
                max_abs_scale = scale.abs();
                max_scale = scale;
            }
        }
        if max_abs_scale < GROUP_MAX_EPS {
            out.d = F16Bits::from_f32(0.0);
            return out;
        }

        let iscale = -128.0 / max_scale;
        out.d = F16Bits::from_f32(1.0 / iscale);
        for ib in 0..QK_K / 16 {
            // ggml: MIN(127, nearest_int(..)) stored in an int8_t.
            out.scales[ib] = nearest_int(iscale * scales[ib]).min(127) as i8;
        }
        let d_all = out.d.to_f32();
        for j in 0..QK_K / 16 {
            let d = d_all * out.scales[j] as f32;
            if d == 0.0 {
                continue;
            }
            for ii in 0..16 {
                l[16 * j + ii] = (nearest_int(x[16 * j + ii] / d).clamp(-32, 31) + 32) as i8;
            }
        }

        for h in 0..2 {
            let (ql, qh) = (&mut out.ql[64 * h..64 * h + 64], &mut out.qh[32 * h..32 * h + 32]);
            let l = &l[128 * h..128 * h + 128];
            for i in 0..32 {
                let (v1, v2, v3, v4) = (l[i] as u8, l[i + 32] as u8, l[i + 64] as u8, l[i + 96] as u8);
                ql[i] = (v1 & 0xF) | ((v3 & 0xF) << 4);
                ql[i + 32] = (v2 & 0xF) | ((v4 & 0xF) << 4);
                qh[i] = (v1 >> 4) | ((v2 >> 4) << 2) | ((v3 >> 4) << 4) | ((v4 >> 4) << 6);
            }
        }
        out
    }
}
