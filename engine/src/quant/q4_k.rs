//! Q4_K: 256 values in 8 groups of 32; `x = d·sc·q − dmin·m` with 4-bit q and
//! 6-bit group scale `sc` and min `m` packed into 12 bytes
//! (see [`get_scale_min_k4`]).
//!
//! Quants: in each chunk of 64 values, `qs[32c + l]` holds value `l` in its
//! low nibble and value `l + 32` in its high nibble.

use super::{F16Bits, QuantBlock, QuantizeBlock, get_scale_min_k4, make_qkx2_quants, nearest_int};
use crate::{DType, QK_K};

/// A Q4_K super-block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub struct BlockQ4K {
    /// Super-block scale of the scales.
    pub d: F16Bits,
    /// Super-block scale of the mins.
    pub dmin: F16Bits,
    /// 8 six-bit scales and 8 six-bit mins, packed.
    pub scales: [u8; 12],
    /// 4-bit quants.
    pub qs: [u8; QK_K / 2],
}

const _: () = assert!(size_of::<BlockQ4K>() == DType::Q4_K.bytes_per_block());

/// What the Q4_K and Q5_K reference quantizers share: per group of 32, an
/// asymmetric `make_qkx2_quants` fit with weights `rms(x) + |x|`; the group
/// scales and mins quantized to 6 bits against their maxima; then the values
/// requantized against the rounded scales. Returns `(d, dmin, packed scales,
/// quants L[i] ∈ [0, nmax])`.
pub(crate) fn quantize_k4_groups(
    x: &[f32],
    nmax: i32,
    rmin: f32,
    nstep: i32,
) -> (F16Bits, F16Bits, [u8; 12], [u8; QK_K]) {
    let x = &x[..QK_K];
    let mut l = [0u8; QK_K];
    let mut l_aux = [0u8; 32];
    let mut weights = [0f32; 32];
    let mut mins = [0f32; QK_K / 32];
    let mut scales = [0f32; QK_K / 32];

    let mut max_scale = 0f32;
    let mut max_min = 0f32;
    for j in 0..QK_K / 32 {
        let xg = &x[32 * j..32 * j + 32];
        let mut sum_x2 = 0f32;
        for &v in xg {
            sum_x2 += v * v;
        }
        let av_x = (sum_x2 / 32.0).sqrt();
        for (w, &v) in weights.iter_mut().zip(xg) {
            *w = av_x + v.abs();
        }
        let (scale, min) =
            make_qkx2_quants(32, nmax, xg, &weights, &mut l[32 * j..32 * j + 32], &mut l_aux, rmin, 0.1, nstep, false);
        scales[j] = scale;
        mins[j] = min;
        if scale > max_scale {
            max_scale = scale;
        }
        if min > max_min {
            max_min = min;
        }
    }

    let inv_scale = if max_scale > 0.0 { 63.0 / max_scale } else { 0.0 };
    let inv_min = if max_min > 0.0 { 63.0 / max_min } else { 0.0 };
    let mut packed = [0u8; 12];
    for j in 0..QK_K / 32 {
        // ggml stores nearest_int's result in a uint8_t before clamping to 63.
        let ls = (nearest_int(inv_scale * scales[j]) as u8).min(63);
        let lm = (nearest_int(inv_min * mins[j]) as u8).min(63);
        if j < 4 {
            packed[j] = ls;
            packed[j + 4] = lm;
        } else {
            packed[j + 4] = (ls & 0xF) | ((lm & 0xF) << 4);
            packed[j - 4] |= (ls >> 4) << 6;
            packed[j] |= (lm >> 4) << 6;
        }
    }
    let d = F16Bits::from_f32(max_scale / 63.0);
    let dmin = F16Bits::from_f32(max_min / 63.0);

    for j in 0..QK_K / 32 {
        let (sc, m) = get_scale_min_k4(j, &packed);
        let dj = d.to_f32() * sc as f32;
        if dj == 0.0 {
            continue;
        }
        let dm = dmin.to_f32() * m as f32;
        for ii in 0..32 {
            l[32 * j + ii] = nearest_int((x[32 * j + ii] + dm) / dj).clamp(0, nmax) as u8;
        }
    }
    (d, dmin, packed, l)
}

impl QuantBlock for BlockQ4K {
    const DTYPE: DType = DType::Q4_K;
    const ELEMS: usize = QK_K;

    fn dequantize(&self, y: &mut [f32]) {
        let d = self.d.to_f32();
        let min = self.dmin.to_f32();
        for c in 0..QK_K / 64 {
            let (sc1, m1) = get_scale_min_k4(2 * c, &self.scales);
            let (sc2, m2) = get_scale_min_k4(2 * c + 1, &self.scales);
            let (d1, m1) = (d * sc1 as f32, min * m1 as f32);
            let (d2, m2) = (d * sc2 as f32, min * m2 as f32);
            let q = &self.qs[32 * c..32 * c + 32];
            let y = &mut y[64 * c..64 * c + 64];
            for i in 0..32 {
                y[i] = d1 * (q[i] & 0xF) as f32 - m1;
                y[i + 32] = d2 * (q[i] >> 4) as f32 - m2;
            }
        }
    }
}

impl QuantizeBlock for BlockQ4K {
    fn quantize(x: &[f32]) -> Self {
        let (d, dmin, scales, l) = quantize_k4_groups(x, 15, -1.0, 20);
        let mut qs = [0u8; QK_K / 2];
        for c in 0..QK_K / 64 {
            for i in 0..32 {
                qs[32 * c + i] = l[64 * c + i] | (l[64 * c + i + 32] << 4);
            }
        }
        Self { d, dmin, scales, qs }
    }
}
