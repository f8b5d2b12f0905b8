//! Every weight block brought to one integer form: small signed quants with
//! integer group scales and mins, so that `x = d·sc[g]·q − dmin·m[g]` (K-quants,
//! groups of 16) or `x = d·q + m` (the 32-value types).
//!
//! The scalar dot products and the tiled matrix kernel both start here, so
//! the bit layouts of the formats are spelled out once in this crate. The
//! float expressions match the engine's dequantizers exactly (tested).

use gantry_engine::quant::{
    BlockIQ4NL, BlockIQ4XS, BlockMXFP4, BlockQ2K, BlockQ3K, BlockQ4_0, BlockQ4_1, BlockQ4K, BlockQ5_0, BlockQ5_1,
    BlockQ5K, BlockQ6K, BlockQ8_0, get_scale_min_k4,
};

/// A 32-value block as `x = d·q + m`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SmallBlock {
    /// Quants, already offset (Q4_0: q − 8, Q5_0: q − 16).
    pub q: [i8; 32],
    /// Scale.
    pub d: f32,
    /// Added minimum (0 for the symmetric types).
    pub m: f32,
}

/// A 256-value K-quant super-block as `x = (d·sc[g])·q − dmin·m[g]`, g = i / 16.
#[derive(Debug, Clone, Copy)]
pub(crate) struct KBlock {
    /// Quants, already offset (Q3_K: q − 4, Q6_K: q − 32).
    pub q: [i8; 256],
    /// Integer group scales, per 16 values.
    pub sc: [i16; 16],
    /// Integer group mins, per 16 values (0 for the symmetric types).
    pub m: [i16; 16],
    /// Super-block scale.
    pub d: f32,
    /// Super-block scale of the mins.
    pub dmin: f32,
}

/// Blocks that unpack to a [`SmallBlock`].
pub(crate) trait UnpackSmall {
    fn unpack(&self) -> SmallBlock;
}

/// Blocks that unpack to a [`KBlock`].
pub(crate) trait UnpackK {
    fn unpack(&self) -> KBlock;
}

fn nibbles(qs: &[u8; 16], offset: i8) -> [i8; 32] {
    let mut q = [0i8; 32];
    for j in 0..16 {
        q[j] = (qs[j] & 0xF) as i8 - offset;
        q[j + 16] = (qs[j] >> 4) as i8 - offset;
    }
    q
}

fn with_fifth_bits(mut q: [i8; 32], qh: [u8; 4]) -> [i8; 32] {
    let qh = u32::from_le_bytes(qh);
    for (j, v) in q.iter_mut().enumerate() {
        *v += (((qh >> j) & 1) << 4) as i8;
    }
    q
}

impl UnpackSmall for BlockQ4_0 {
    fn unpack(&self) -> SmallBlock {
        SmallBlock { q: nibbles(&self.qs, 8), d: self.d.to_f32(), m: 0.0 }
    }
}

impl UnpackSmall for BlockQ4_1 {
    fn unpack(&self) -> SmallBlock {
        SmallBlock { q: nibbles(&self.qs, 0), d: self.d.to_f32(), m: self.m.to_f32() }
    }
}

impl UnpackSmall for BlockQ5_0 {
    fn unpack(&self) -> SmallBlock {
        // (q | h << 4) − 16 = (q − 16) + (h << 4)
        SmallBlock { q: with_fifth_bits(nibbles(&self.qs, 16), self.qh), d: self.d.to_f32(), m: 0.0 }
    }
}

impl UnpackSmall for BlockQ5_1 {
    fn unpack(&self) -> SmallBlock {
        SmallBlock { q: with_fifth_bits(nibbles(&self.qs, 0), self.qh), d: self.d.to_f32(), m: self.m.to_f32() }
    }
}

impl UnpackSmall for BlockQ8_0 {
    fn unpack(&self) -> SmallBlock {
        SmallBlock { q: self.qs, d: self.d.to_f32(), m: 0.0 }
    }
}

impl UnpackSmall for BlockIQ4NL {
    fn unpack(&self) -> SmallBlock {
        SmallBlock { q: self.values(), d: self.d.to_f32(), m: 0.0 }
    }
}

impl UnpackSmall for BlockMXFP4 {
    fn unpack(&self) -> SmallBlock {
        // The doubled E2M1 values against half the exponent's power of two:
        // ggml's integer form, whose products are exact.
        SmallBlock { q: self.values(), d: self.scale(), m: 0.0 }
    }
}

/// Spreads the 2-bit fields of Q2_K / Q3_K `qs` to one value per byte.
fn two_bit_values(qs: &[u8; 64]) -> [i8; 256] {
    let mut q = [0i8; 256];
    for half in 0..2 {
        for (s, shift) in [0, 2, 4, 6].into_iter().enumerate() {
            for l in 0..32 {
                q[128 * half + 32 * s + l] = ((qs[32 * half + l] >> shift) & 3) as i8;
            }
        }
    }
    q
}

impl UnpackK for BlockQ2K {
    fn unpack(&self) -> KBlock {
        let mut sc = [0i16; 16];
        let mut m = [0i16; 16];
        for g in 0..16 {
            sc[g] = (self.scales[g] & 0xF) as i16;
            m[g] = (self.scales[g] >> 4) as i16;
        }
        KBlock { q: two_bit_values(&self.qs), sc, m, d: self.d.to_f32(), dmin: self.dmin.to_f32() }
    }
}

impl UnpackK for BlockQ3K {
    fn unpack(&self) -> KBlock {
        let mut q = two_bit_values(&self.qs);
        for (i, v) in q.iter_mut().enumerate() {
            let high = (self.hmask[i % 32] >> (i / 32)) & 1;
            *v += 4 * high as i8 - 4;
        }
        let sc = self.unpacked_scales().map(|s| s as i16);
        KBlock { q, sc, m: [0; 16], d: self.d.to_f32(), dmin: 0.0 }
    }
}

/// The Q4_K / Q5_K scales and mins, per 16 values.
fn k4_scales(scales: &[u8; 12]) -> ([i16; 16], [i16; 16]) {
    let mut sc = [0i16; 16];
    let mut m = [0i16; 16];
    for j in 0..8 {
        let (s, mm) = get_scale_min_k4(j, scales);
        sc[2 * j] = s as i16;
        sc[2 * j + 1] = s as i16;
        m[2 * j] = mm as i16;
        m[2 * j + 1] = mm as i16;
    }
    (sc, m)
}

fn k4_nibbles(qs: &[u8; 128]) -> [i8; 256] {
    let mut q = [0i8; 256];
    for c in 0..4 {
        for l in 0..32 {
            q[64 * c + l] = (qs[32 * c + l] & 0xF) as i8;
            q[64 * c + 32 + l] = (qs[32 * c + l] >> 4) as i8;
        }
    }
    q
}

impl UnpackK for BlockQ4K {
    fn unpack(&self) -> KBlock {
        let (sc, m) = k4_scales(&self.scales);
        KBlock { q: k4_nibbles(&self.qs), sc, m, d: self.d.to_f32(), dmin: self.dmin.to_f32() }
    }
}

impl UnpackK for BlockQ5K {
    fn unpack(&self) -> KBlock {
        let (sc, m) = k4_scales(&self.scales);
        let mut q = k4_nibbles(&self.qs);
        for c in 0..4 {
            for l in 0..32 {
                q[64 * c + l] += (((self.qh[l] >> (2 * c)) & 1) << 4) as i8;
                q[64 * c + 32 + l] += (((self.qh[l] >> (2 * c + 1)) & 1) << 4) as i8;
            }
        }
        KBlock { q, sc, m, d: self.d.to_f32(), dmin: self.dmin.to_f32() }
    }
}

impl UnpackK for BlockQ6K {
    fn unpack(&self) -> KBlock {
        let mut q = [0i8; 256];
        for h in 0..2 {
            let (ql, qh) = (&self.ql[64 * h..64 * h + 64], &self.qh[32 * h..32 * h + 32]);
            for l in 0..32 {
                q[128 * h + l] = ((ql[l] & 0xF) | ((qh[l] & 3) << 4)) as i8 - 32;
                q[128 * h + 32 + l] = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) as i8 - 32;
                q[128 * h + 64 + l] = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) as i8 - 32;
                q[128 * h + 96 + l] = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) as i8 - 32;
            }
        }
        KBlock { q, sc: self.scales.map(|s| s as i16), m: [0; 16], d: self.d.to_f32(), dmin: 0.0 }
    }
}

impl UnpackK for BlockIQ4XS {
    fn unpack(&self) -> KBlock {
        let mut q = [0i8; 256];
        let mut sc = [0i16; 16];
        for ib in 0..8 {
            q[32 * ib..32 * ib + 32].copy_from_slice(&self.sub_values(ib));
            sc[2 * ib] = self.sub_scale(ib) as i16;
            sc[2 * ib + 1] = sc[2 * ib];
        }
        KBlock { q, sc, m: [0; 16], d: self.d.to_f32(), dmin: 0.0 }
    }
}

#[cfg(test)]
mod tests {
    use gantry_engine::DType;
    use gantry_engine::quant::{QuantBlock, QuantizeBlock, quantize_blocks};

    use super::*;
    use crate::quant::test_signal;

    fn check_small<B: QuantizeBlock + UnpackSmall>() {
        let x = test_signal(512, 5);
        let mut blocks = vec![B::zeroed(); 16];
        quantize_blocks(&x, &mut blocks);
        check_small_blocks(&blocks);
    }

    /// Random blocks of a read-only lookup type (no quantizer).
    fn random<B: QuantBlock>(n: usize) -> Vec<B> {
        let k = n * B::ELEMS;
        let data = gantry_engine::testing::lookup_rows(B::DTYPE, k, 1, B::DTYPE.row_size(k).unwrap(), 3).unwrap();
        data.chunks_exact(size_of::<B>()).map(bytemuck::pod_read_unaligned).collect()
    }

    fn check_small_blocks<B: QuantBlock + UnpackSmall>(blocks: &[B]) {
        for b in blocks {
            let mut want = [0f32; 32];
            b.dequantize(&mut want);
            let u = b.unpack();
            for (i, &w) in want.iter().enumerate() {
                // The engine computes q·d (+ m) for the 32-value types.
                let got = match B::DTYPE {
                    DType::Q4_1 | DType::Q5_1 => u.q[i] as f32 * u.d + u.m,
                    _ => u.q[i] as f32 * u.d,
                };
                assert_eq!(got.to_bits(), w.to_bits(), "{} value {i}", B::DTYPE);
            }
        }
    }

    fn check_k<B: QuantizeBlock + UnpackK>() {
        let x = test_signal(1024, 9);
        let mut blocks = vec![B::zeroed(); 4];
        quantize_blocks(&x, &mut blocks);
        check_k_blocks(&blocks);
    }

    fn check_k_blocks<B: QuantBlock + UnpackK>(blocks: &[B]) {
        for b in blocks {
            let mut want = [0f32; 256];
            b.dequantize(&mut want);
            let u = b.unpack();
            for (i, &w) in want.iter().enumerate() {
                let g = i / 16;
                let dl = u.d * u.sc[g] as f32;
                let got = if u.dmin == 0.0 { dl * u.q[i] as f32 } else { dl * u.q[i] as f32 - u.dmin * u.m[g] as f32 };
                assert_eq!(got.to_bits(), w.to_bits(), "{} value {i}: {got} vs {w}", B::DTYPE);
            }
        }
    }

    #[test]
    fn unpacked_blocks_match_the_engine_dequantizers() {
        check_small::<BlockQ4_0>();
        check_small::<BlockQ4_1>();
        check_small::<BlockQ5_0>();
        check_small::<BlockQ5_1>();
        check_small::<BlockQ8_0>();
        check_k::<BlockQ2K>();
        check_k::<BlockQ3K>();
        check_k::<BlockQ4K>();
        check_k::<BlockQ5K>();
        check_k::<BlockQ6K>();
        check_small_blocks(&random::<BlockIQ4NL>(16));
        check_small_blocks(&random::<BlockMXFP4>(16));
        check_k_blocks(&random::<BlockIQ4XS>(4));
    }
}
