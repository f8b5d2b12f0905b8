//! The legacy 32-value formats: Q4_0, Q4_1, Q5_0, Q5_1.
//!
//! Layout of the quants: value `j` of the first half sits in the low nibble of
//! `qs[j]`, value `j + 16` in its high nibble; the 5-bit types keep the fifth
//! bits in a little-endian `u32` `qh` (bit `j` for value `j`).

use super::{F16Bits, QuantBlock, QuantizeBlock};
use crate::DType;

const QK: usize = 32;

/// Q4_0: `x = d·(q − 8)`, q ∈ [0, 15].
#[derive(Debug, Clone, Copy, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub struct BlockQ4_0 {
    /// The scale.
    pub d: F16Bits,
    /// Nibbles: low = value j, high = value j + 16.
    pub qs: [u8; QK / 2],
}

/// Q4_1: `x = d·q + m`, q ∈ [0, 15].
#[derive(Debug, Clone, Copy, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub struct BlockQ4_1 {
    /// The scale.
    pub d: F16Bits,
    /// The minimum (added).
    pub m: F16Bits,
    /// Nibbles: low = value j, high = value j + 16.
    pub qs: [u8; QK / 2],
}

/// Q5_0: `x = d·(q − 16)`, q ∈ [0, 31].
#[derive(Debug, Clone, Copy, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub struct BlockQ5_0 {
    /// The scale.
    pub d: F16Bits,
    /// Fifth bits, little-endian u32, bit j for value j.
    pub qh: [u8; 4],
    /// Low nibbles: low = value j, high = value j + 16.
    pub qs: [u8; QK / 2],
}

/// Q5_1: `x = d·q + m`, q ∈ [0, 31].
#[derive(Debug, Clone, Copy, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub struct BlockQ5_1 {
    /// The scale.
    pub d: F16Bits,
    /// The minimum (added).
    pub m: F16Bits,
    /// Fifth bits, little-endian u32, bit j for value j.
    pub qh: [u8; 4],
    /// Low nibbles: low = value j, high = value j + 16.
    pub qs: [u8; QK / 2],
}

const _: () = assert!(size_of::<BlockQ4_0>() == DType::Q4_0.bytes_per_block());
const _: () = assert!(size_of::<BlockQ4_1>() == DType::Q4_1.bytes_per_block());
const _: () = assert!(size_of::<BlockQ5_0>() == DType::Q5_0.bytes_per_block());
const _: () = assert!(size_of::<BlockQ5_1>() == DType::Q5_1.bytes_per_block());

/// The value of largest magnitude, keeping its sign (the first one on ties).
fn signed_absmax(x: &[f32]) -> f32 {
    let mut amax = 0f32;
    let mut max = 0f32;
    for &v in x {
        if amax < v.abs() {
            amax = v.abs();
            max = v;
        }
    }
    max
}

/// Minimum and maximum, starting from ±f32::MAX as ggml does.
fn min_max(x: &[f32]) -> (f32, f32) {
    let mut min = f32::MAX;
    let mut max = -f32::MAX;
    for &v in x {
        if v < min {
            min = v;
        }
        if v > max {
            max = v;
        }
    }
    (min, max)
}

/// C's `(int8_t)f` for the small non-negative values these quantizers produce:
/// truncation toward zero.
#[inline]
fn trunc_i8(f: f32) -> i32 {
    f as i32 as i8 as i32
}

impl QuantBlock for BlockQ4_0 {
    const DTYPE: DType = DType::Q4_0;
    const ELEMS: usize = QK;

    fn dequantize(&self, y: &mut [f32]) {
        let d = self.d.to_f32();
        for j in 0..QK / 2 {
            y[j] = ((self.qs[j] & 0x0F) as i32 - 8) as f32 * d;
            y[j + QK / 2] = ((self.qs[j] >> 4) as i32 - 8) as f32 * d;
        }
    }
}

impl QuantizeBlock for BlockQ4_0 {
    fn quantize(x: &[f32]) -> Self {
        let max = signed_absmax(&x[..QK]);
        let d = max / -8.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        let mut qs = [0u8; QK / 2];
        for j in 0..QK / 2 {
            let x0 = x[j] * id;
            let x1 = x[QK / 2 + j] * id;
            let q0 = trunc_i8(x0 + 8.5).min(15) as u8;
            let q1 = trunc_i8(x1 + 8.5).min(15) as u8;
            qs[j] = q0 | (q1 << 4);
        }
        Self { d: F16Bits::from_f32(d), qs }
    }
}

impl QuantBlock for BlockQ4_1 {
    const DTYPE: DType = DType::Q4_1;
    const ELEMS: usize = QK;

    fn dequantize(&self, y: &mut [f32]) {
        let d = self.d.to_f32();
        let m = self.m.to_f32();
        for j in 0..QK / 2 {
            y[j] = (self.qs[j] & 0x0F) as f32 * d + m;
            y[j + QK / 2] = (self.qs[j] >> 4) as f32 * d + m;
        }
    }
}

impl QuantizeBlock for BlockQ4_1 {
    fn quantize(x: &[f32]) -> Self {
        let (min, max) = min_max(&x[..QK]);
        let d = (max - min) / 15.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        let mut qs = [0u8; QK / 2];
        for j in 0..QK / 2 {
            let x0 = (x[j] - min) * id;
            let x1 = (x[QK / 2 + j] - min) * id;
            let q0 = trunc_i8(x0 + 0.5).min(15) as u8;
            let q1 = trunc_i8(x1 + 0.5).min(15) as u8;
            qs[j] = q0 | (q1 << 4);
        }
        Self { d: F16Bits::from_f32(d), m: F16Bits::from_f32(min), qs }
    }
}

impl QuantBlock for BlockQ5_0 {
    const DTYPE: DType = DType::Q5_0;
    const ELEMS: usize = QK;

    fn dequantize(&self, y: &mut [f32]) {
        let d = self.d.to_f32();
        let qh = u32::from_le_bytes(self.qh);
        for j in 0..QK / 2 {
            let h0 = ((qh >> j) << 4) & 0x10;
            let h1 = (qh >> (j + 12)) & 0x10;
            let x0 = ((self.qs[j] & 0x0F) as u32 | h0) as i32 - 16;
            let x1 = ((self.qs[j] >> 4) as u32 | h1) as i32 - 16;
            y[j] = x0 as f32 * d;
            y[j + QK / 2] = x1 as f32 * d;
        }
    }
}

impl QuantizeBlock for BlockQ5_0 {
    fn quantize(x: &[f32]) -> Self {
        let max = signed_absmax(&x[..QK]);
        let d = max / -16.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        let mut qs = [0u8; QK / 2];
        let mut qh = 0u32;
        for j in 0..QK / 2 {
            let x0 = x[j] * id;
            let x1 = x[QK / 2 + j] * id;
            let q0 = trunc_i8(x0 + 16.5).min(31) as u32;
            let q1 = trunc_i8(x1 + 16.5).min(31) as u32;
            qs[j] = ((q0 & 0x0F) | ((q1 & 0x0F) << 4)) as u8;
            qh |= ((q0 & 0x10) >> 4) << j;
            qh |= ((q1 & 0x10) >> 4) << (j + QK / 2);
        }
        Self { d: F16Bits::from_f32(d), qh: qh.to_le_bytes(), qs }
    }
}

impl QuantBlock for BlockQ5_1 {
    const DTYPE: DType = DType::Q5_1;
    const ELEMS: usize = QK;

    fn dequantize(&self, y: &mut [f32]) {
        let d = self.d.to_f32();
        let m = self.m.to_f32();
        let qh = u32::from_le_bytes(self.qh);
        for j in 0..QK / 2 {
            let h0 = ((qh >> j) << 4) & 0x10;
            let h1 = (qh >> (j + 12)) & 0x10;
            y[j] = ((self.qs[j] & 0x0F) as u32 | h0) as f32 * d + m;
            y[j + QK / 2] = ((self.qs[j] >> 4) as u32 | h1) as f32 * d + m;
        }
    }
}

impl QuantizeBlock for BlockQ5_1 {
    fn quantize(x: &[f32]) -> Self {
        let (min, max) = min_max(&x[..QK]);
        let d = (max - min) / 31.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        let mut qs = [0u8; QK / 2];
        let mut qh = 0u32;
        for j in 0..QK / 2 {
            let x0 = (x[j] - min) * id;
            let x1 = (x[QK / 2 + j] - min) * id;
            // ggml casts straight to uint8_t here (no clamp): values stay in [0, 31].
            let q0 = (x0 + 0.5) as u8 as u32;
            let q1 = (x1 + 0.5) as u8 as u32;
            qs[j] = ((q0 & 0x0F) | ((q1 & 0x0F) << 4)) as u8;
            qh |= ((q0 & 0x10) >> 4) << j;
            qh |= ((q1 & 0x10) >> 4) << (j + QK / 2);
        }
        Self { d: F16Bits::from_f32(d), m: F16Bits::from_f32(min), qh: qh.to_le_bytes(), qs }
    }
}
