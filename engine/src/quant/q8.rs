//! The 8-bit formats: Q8_0 (weights and the `_0` types' activations), Q8_1
//! (activations of the `_1` types, with the block sum) and Q8_K (activations
//! of the K-quants, with sums per 16 values).

use super::{F16Bits, QuantBlock, QuantizeBlock, nearest_int};
use crate::{DType, QK_K};

const QK: usize = 32;

/// Q8_0: `x = d·q`, q ∈ [−127, 127].
#[derive(Debug, Clone, Copy, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub struct BlockQ8_0 {
    /// The scale.
    pub d: F16Bits,
    /// The quants.
    pub qs: [i8; QK],
}

/// Q8_1: `x = d·q`, with `s = d·Σq` precomputed for the `_1` dot products.
#[derive(Debug, Clone, Copy, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub struct BlockQ8_1 {
    /// The scale.
    pub d: F16Bits,
    /// `d` times the sum of the quants.
    pub s: F16Bits,
    /// The quants.
    pub qs: [i8; QK],
}

/// Q8_K: `x = d·q` over 256 values, f32 scale, with the sum of every 16 quants.
#[derive(Debug, Clone, Copy, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub struct BlockQ8K {
    /// The scale.
    pub d: f32,
    /// The quants, in [−128, 127].
    pub qs: [i8; QK_K],
    /// `bsums[j]` = sum of `qs[16j .. 16j + 16]`.
    pub bsums: [i16; QK_K / 16],
}

const _: () = assert!(size_of::<BlockQ8_0>() == DType::Q8_0.bytes_per_block());
const _: () = assert!(size_of::<BlockQ8_1>() == DType::Q8_1.bytes_per_block());
const _: () = assert!(size_of::<BlockQ8K>() == DType::Q8_K.bytes_per_block());

fn absmax(x: &[f32]) -> f32 {
    x.iter().fold(0f32, |a, &v| a.max(v.abs()))
}

impl QuantBlock for BlockQ8_0 {
    const DTYPE: DType = DType::Q8_0;
    const ELEMS: usize = QK;

    fn dequantize(&self, y: &mut [f32]) {
        let d = self.d.to_f32();
        for (o, &q) in y[..QK].iter_mut().zip(&self.qs) {
            *o = q as f32 * d;
        }
    }
}

impl QuantizeBlock for BlockQ8_0 {
    fn quantize(x: &[f32]) -> Self {
        let d = absmax(&x[..QK]) / 127.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        let mut qs = [0i8; QK];
        for (q, &v) in qs.iter_mut().zip(x) {
            // C's roundf: half away from zero, like f32::round.
            *q = (v * id).round() as i8;
        }
        Self { d: F16Bits::from_f32(d), qs }
    }
}

impl QuantBlock for BlockQ8_1 {
    const DTYPE: DType = DType::Q8_1;
    const ELEMS: usize = QK;

    fn dequantize(&self, y: &mut [f32]) {
        let d = self.d.to_f32();
        for (o, &q) in y[..QK].iter_mut().zip(&self.qs) {
            *o = q as f32 * d;
        }
    }
}

impl QuantizeBlock for BlockQ8_1 {
    fn quantize(x: &[f32]) -> Self {
        let d = absmax(&x[..QK]) / 127.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        let mut qs = [0i8; QK];
        let mut sum = 0i32;
        for (q, &v) in qs.iter_mut().zip(x) {
            *q = (v * id).round() as i8;
            sum += *q as i32;
        }
        Self { d: F16Bits::from_f32(d), s: F16Bits::from_f32(sum as f32 * d), qs }
    }
}

impl QuantBlock for BlockQ8K {
    const DTYPE: DType = DType::Q8_K;
    const ELEMS: usize = QK_K;

    fn dequantize(&self, y: &mut [f32]) {
        for (o, &q) in y[..QK_K].iter_mut().zip(&self.qs) {
            *o = self.d * q as f32;
        }
    }
}

impl QuantizeBlock for BlockQ8K {
    fn quantize(x: &[f32]) -> Self {
        let x = &x[..QK_K];
        let mut max = 0f32;
        let mut amax = 0f32;
        for &v in x {
            if v.abs() > amax {
                amax = v.abs();
                max = v;
            }
        }
        let mut out = Self { d: 0.0, qs: [0; QK_K], bsums: [0; QK_K / 16] };
        if amax == 0.0 {
            return out;
        }
        // ggml uses −127/max rather than −128/max so that −max maps to −127
        // and +max to +127 (the largest magnitude never needs 128).
        let iscale = -127.0 / max;
        for (q, &v) in out.qs.iter_mut().zip(x) {
            *q = nearest_int(iscale * v).min(127) as i8;
        }
        for (s, q) in out.bsums.iter_mut().zip(out.qs.chunks_exact(16)) {
            *s = q.iter().map(|&v| v as i16).sum();
        }
        out.d = 1.0 / iscale;
        out
    }
}
