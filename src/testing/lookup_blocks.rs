//! Rows of the lookup-table weight types (IQ4_NL, IQ4_XS, MXFP4) from f32
//! values, for seeded test models: each value becomes the table entry
//! nearest to it under a scale taken from the block's largest magnitude.
//! A plain nearest-value rounding, not ggml's search for the best scales:
//! Gantry does not quantize to these types (files bring them), and a test
//! model only needs valid blocks near the values drawn.

use half::f16;

use gantry_engine::DType;
use gantry_engine::quant::{KVALUES_IQ4NL as IQ4, KVALUES_MXFP4 as MXFP4, e8m0_to_f32_half};

use crate::{Error, Result};

/// The index of the table entry nearest to `x` (already divided by the scale).
fn nearest(table: &[i8; 16], x: f32) -> u8 {
    let mut best = 0;
    for (i, &v) in table.iter().enumerate() {
        if (f32::from(v) - x).abs() < (f32::from(table[best]) - x).abs() {
            best = i;
        }
    }
    best as u8
}

/// 32 values as 16 bytes of nibbles: value `j` in the low nibble of byte
/// `j`, value `j + 16` in its high nibble (ggml's order).
fn nibbles(table: &[i8; 16], xs: &[f32], inv_scale: f32) -> [u8; 16] {
    std::array::from_fn(|j| nearest(table, xs[j] * inv_scale) | (nearest(table, xs[j + 16] * inv_scale) << 4))
}

fn inverse(scale: f32) -> f32 {
    if scale > 0.0 { 1.0 / scale } else { 0.0 }
}

fn amax(xs: &[f32]) -> f32 {
    xs.iter().fold(0f32, |m, x| m.max(x.abs()))
}

/// One row of `dtype` blocks holding `row` (its length a whole number of blocks).
pub fn lookup_row(dtype: DType, row: &[f32]) -> Result<Vec<u8>> {
    let block = dtype.block_size();
    if !row.len().is_multiple_of(block) {
        return Err(Error::Model(format!("{} values are not whole {dtype} blocks", row.len())));
    }
    let mut out = Vec::with_capacity(row.len() / block * dtype.bytes_per_block());
    for xs in row.chunks(block) {
        match dtype {
            DType::IQ4_NL => {
                let d = f16::from_f32(amax(xs) / 127.0);
                out.extend_from_slice(&d.to_le_bytes());
                out.extend_from_slice(&nibbles(&IQ4, xs, inverse(d.to_f32())));
            }
            DType::IQ4_XS => {
                // Eight sub-blocks of 32, each scaled by d * (ls - 32) with a
                // 6-bit ls: here 33..=63, so d is the largest sub-scale / 31.
                let sub: Vec<f32> = xs.chunks(32).map(|s| amax(s) / 127.0).collect();
                let d = f16::from_f32(sub.iter().fold(0f32, |m, &s| m.max(s)) / 31.0);
                let ls: Vec<u8> =
                    sub.iter().map(|&s| 32 + (s * inverse(d.to_f32())).round().clamp(1.0, 31.0) as u8).collect();
                let scales_h = ls.iter().enumerate().fold(0u16, |h, (i, &l)| h | (u16::from(l >> 4) << (2 * i)));
                out.extend_from_slice(&d.to_le_bytes());
                out.extend_from_slice(&scales_h.to_le_bytes());
                out.extend((0..4).map(|i| (ls[2 * i] & 15) | ((ls[2 * i + 1] & 15) << 4)));
                for (s, &l) in xs.chunks(32).zip(&ls) {
                    out.extend_from_slice(&nibbles(&IQ4, s, inverse(d.to_f32() * f32::from(l as i8 - 32))));
                }
            }
            DType::MXFP4 => {
                // A power-of-two scale (E8M0, halved as ggml reads it:
                // 2^(e - 128)) that brings the largest value within 12.
                let a = amax(xs);
                let e = if a > 0.0 { (128.0 + (a / 12.0).log2().ceil()).clamp(2.0, 254.0) as u8 } else { 2 };
                out.push(e);
                out.extend_from_slice(&nibbles(&MXFP4, xs, inverse(e8m0_to_f32_half(e))));
            }
            other => return Err(Error::Model(format!("{other} is not a lookup-table weight type"))),
        }
    }
    Ok(out)
}
