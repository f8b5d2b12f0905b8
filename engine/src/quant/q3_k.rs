//! Q3_K: 256 values in 16 groups of 16; `x = d·(sc − 32)·(q − 4)` with 3-bit q
//! (2 low bits in `qs`, packed as in Q2_K, the high bit in `hmask`) and 6-bit
//! group scales packed into 12 bytes.
//!
//! `hmask[m]` bit `b` is the high bit of value `32·b + m`. Scale `j`'s low
//! nibble is in `scales[j % 8]` (low nibble for j < 8, high for j ≥ 8); its two
//! high bits are in `scales[8 + j % 4]` at shift `2·(j / 4)`.

use super::q2_k::pack_2bit;
use super::{F16Bits, QuantBlock, QuantizeBlock, make_q3_quants, nearest_int};
use crate::{DType, QK_K};

/// A Q3_K super-block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub struct BlockQ3K {
    /// High bits of the quants.
    pub hmask: [u8; QK_K / 8],
    /// Low 2 bits of the quants.
    pub qs: [u8; QK_K / 4],
    /// 16 six-bit scales (offset by 32), packed.
    pub scales: [u8; 12],
    /// Super-block scale.
    pub d: F16Bits,
}

const _: () = assert!(size_of::<BlockQ3K>() == DType::Q3_K.bytes_per_block());

impl BlockQ3K {
    /// The 16 group scales, unpacked to `sc − 32` ∈ [−32, 31].
    pub fn unpacked_scales(&self) -> [i8; 16] {
        // Four scales per u32 at a time: low nibbles from bytes 0..8, high
        // two bits from bytes 8..12 (see the module comment).
        const LOW4: u32 = 0x0f0f_0f0f;
        const LOW2: u32 = 0x0303_0303;
        let word =
            |i: usize| u32::from_le_bytes([self.scales[i], self.scales[i + 1], self.scales[i + 2], self.scales[i + 3]]);
        let (a0, a1, high) = (word(0), word(4), word(8));
        let words = [
            (a0 & LOW4) | ((high & LOW2) << 4),
            (a1 & LOW4) | (((high >> 2) & LOW2) << 4),
            ((a0 >> 4) & LOW4) | (((high >> 4) & LOW2) << 4),
            ((a1 >> 4) & LOW4) | (((high >> 6) & LOW2) << 4),
        ];
        let mut out = [0i8; 16];
        for (o, w) in out.chunks_exact_mut(4).zip(words) {
            for (v, b) in o.iter_mut().zip(w.to_le_bytes()) {
                *v = b as i8 - 32;
            }
        }
        out
    }
}

impl QuantBlock for BlockQ3K {
    const DTYPE: DType = DType::Q3_K;
    const ELEMS: usize = QK_K;

    fn dequantize(&self, y: &mut [f32]) {
        let d_all = self.d.to_f32();
        let scales = self.unpacked_scales();
        let mut out = 0;
        let mut is = 0;
        let mut m = 1u8;
        for half in 0..2 {
            let q = &self.qs[32 * half..32 * half + 32];
            for shift in [0, 2, 4, 6] {
                for part in 0..2 {
                    let dl = d_all * scales[is] as f32;
                    is += 1;
                    for i in 16 * part..16 * part + 16 {
                        let low = ((q[i] >> shift) & 3) as i32;
                        let v = low - if self.hmask[i] & m != 0 { 0 } else { 4 };
                        y[out] = dl * v as f32;
                        out += 1;
                    }
                }
                m <<= 1;
            }
        }
    }
}

impl QuantizeBlock for BlockQ3K {
    fn quantize(x: &[f32]) -> Self {
        let x = &x[..QK_K];
        let mut l = [0i8; QK_K];
        let mut scales = [0f32; QK_K / 16];
        let mut out = Self { hmask: [0; QK_K / 8], qs: [0; QK_K / 4], scales: [0; 12], d: F16Bits::default() };

        let mut max_scale = 0f32;
        let mut amax = 0f32;
        for j in 0..QK_K / 16 {
            scales[j] = make_q3_quants(16, 4, &x[16 * j..16 * j + 16], &mut l[16 * j..16 * j + 16], true);
            let scale = scales[j].abs();
            if scale > amax {
                amax = scale;
                max_scale = scales[j];
            }
        }

        if max_scale != 0.0 {
            let iscale = -32.0 / max_scale;
            for j in 0..QK_K / 16 {
                // ggml stores nearest_int's result in an int8_t before clamping.
                let mut q = nearest_int(iscale * scales[j]) as i8;
                q = q.clamp(-32, 31) + 32;
                if j < 8 {
                    out.scales[j] = (q & 0xF) as u8;
                } else {
                    out.scales[j - 8] |= ((q as u8) & 0xF) << 4;
                }
                q >>= 4;
                out.scales[j % 4 + 8] |= (q as u8) << (2 * (j / 4));
            }
            out.d = F16Bits::from_f32(1.0 / iscale);
        } else {
            out.d = F16Bits::from_f32(0.0);
        }

        let d_all = out.d.to_f32();
        let sc = out.unpacked_scales();
        for j in 0..QK_K / 16 {
            let d = d_all * sc[j] as f32;
            if d == 0.0 {
                continue;
            }
            for ii in 0..16 {
                l[16 * j + ii] = (nearest_int(x[16 * j + ii] / d).clamp(-4, 3) + 4) as i8;
            }
        }

        // High bit of the first 32 values into bit 0 of hmask[0..32], the next 32 into bit 1, ...
        let mut low = [0u8; QK_K];
        for j in 0..QK_K {
            let mut v = l[j] as u8;
            if v > 3 {
                out.hmask[j % 32] |= 1 << (j / 32);
                v -= 4;
            }
            low[j] = v;
        }
        pack_2bit(&low, &mut out.qs);
        out
    }
}
