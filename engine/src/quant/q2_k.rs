//! Q2_K: 256 values in 16 groups of 16; `x = d·sc·q − dmin·m` with 2-bit q and
//! 4-bit group scale `sc` / min `m`.
//!
//! Quants are packed 4 per byte: in each half of 128 values, `qs[32h + l]`
//! holds values `l`, `l + 32`, `l + 64`, `l + 96` at bit shifts 0, 2, 4, 6.

use super::{F16Bits, QuantBlock, QuantizeBlock, make_qkx2_quants, nearest_int};
use crate::{DType, QK_K};

/// A Q2_K super-block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub struct BlockQ2K {
    /// Per group of 16: scale in the low nibble, min in the high nibble.
    pub scales: [u8; QK_K / 16],
    /// 2-bit quants.
    pub qs: [u8; QK_K / 4],
    /// Super-block scale of the scales.
    pub d: F16Bits,
    /// Super-block scale of the mins.
    pub dmin: F16Bits,
}

const _: () = assert!(size_of::<BlockQ2K>() == DType::Q2_K.bytes_per_block());

/// Packs 256 two-bit values as Q2_K / Q3_K store them.
pub(crate) fn pack_2bit(l: &[u8; QK_K], qs: &mut [u8; QK_K / 4]) {
    for j in (0..QK_K).step_by(128) {
        for i in 0..32 {
            qs[j / 4 + i] = l[j + i] | (l[j + i + 32] << 2) | (l[j + i + 64] << 4) | (l[j + i + 96] << 6);
        }
    }
}

impl QuantBlock for BlockQ2K {
    const DTYPE: DType = DType::Q2_K;
    const ELEMS: usize = QK_K;

    fn dequantize(&self, y: &mut [f32]) {
        let d = self.d.to_f32();
        let min = self.dmin.to_f32();
        let mut out = 0;
        let mut is = 0;
        for half in 0..2 {
            let q = &self.qs[32 * half..32 * half + 32];
            for shift in [0, 2, 4, 6] {
                for part in 0..2 {
                    let sc = self.scales[is];
                    is += 1;
                    let dl = d * (sc & 0xF) as f32;
                    let ml = min * (sc >> 4) as f32;
                    for &qb in &q[16 * part..16 * part + 16] {
                        y[out] = dl * ((qb >> shift) & 3) as f32 - ml;
                        out += 1;
                    }
                }
            }
        }
    }
}

impl QuantizeBlock for BlockQ2K {
    fn quantize(x: &[f32]) -> Self {
        const Q4SCALE: f32 = 15.0;
        let x = &x[..QK_K];
        let mut l = [0u8; QK_K];
        let mut l_aux = [0u8; 16];
        let mut weights = [0f32; 16];
        let mut mins = [0f32; QK_K / 16];
        let mut scales = [0f32; QK_K / 16];
        let mut out =
            Self { scales: [0; QK_K / 16], qs: [0; QK_K / 4], d: F16Bits::default(), dmin: F16Bits::default() };

        let mut max_scale = 0f32;
        let mut max_min = 0f32;
        for j in 0..QK_K / 16 {
            let xg = &x[16 * j..16 * j + 16];
            for (w, &v) in weights.iter_mut().zip(xg) {
                *w = v.abs();
            }
            let (scale, min) =
                make_qkx2_quants(16, 3, xg, &weights, &mut l[16 * j..16 * j + 16], &mut l_aux, -0.5, 0.1, 15, true);
            scales[j] = scale;
            mins[j] = min;
            if scale > max_scale {
                max_scale = scale;
            }
            if min > max_min {
                max_min = min;
            }
        }

        if max_scale > 0.0 {
            let iscale = Q4SCALE / max_scale;
            for j in 0..QK_K / 16 {
                out.scales[j] = nearest_int(iscale * scales[j]) as u8;
            }
            out.d = F16Bits::from_f32(max_scale / Q4SCALE);
        } else {
            out.d = F16Bits::from_f32(0.0);
        }
        if max_min > 0.0 {
            let iscale = Q4SCALE / max_min;
            for j in 0..QK_K / 16 {
                let m = nearest_int(iscale * mins[j]);
                out.scales[j] |= (m << 4) as u8;
            }
            out.dmin = F16Bits::from_f32(max_min / Q4SCALE);
        } else {
            out.dmin = F16Bits::from_f32(0.0);
        }

        let d_all = out.d.to_f32();
        let dmin_all = out.dmin.to_f32();
        for j in 0..QK_K / 16 {
            let d = d_all * (out.scales[j] & 0xF) as f32;
            if d == 0.0 {
                continue;
            }
            let dm = dmin_all * (out.scales[j] >> 4) as f32;
            for ii in 0..16 {
                l[16 * j + ii] = nearest_int((x[16 * j + ii] + dm) / d).clamp(0, 3) as u8;
            }
        }
        pack_2bit(&l, &mut out.qs);
        out
    }
}
