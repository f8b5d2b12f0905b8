//! Rows of the read-only lookup types (IQ4_NL, IQ4_XS, MXFP4) for tests:
//! Gantry cannot quantize to them, so tests that need such weights take
//! seeded random blocks, with scales in a range where products neither
//! overflow nor vanish.

use crate::quant::F16Bits;
use crate::{DType, SplitMix64};

/// `rows` rows of `k` values of `dtype` (one of [`DType::LOOKUP_WEIGHTS`]),
/// rows `stride` bytes apart (padding bytes 0xAA), from random bits seeded by
/// `seed`: random index nibbles and scale bits, f16 scales of either sign
/// (magnitude 2^-10 to 2^-3), E8M0 exponents 118..=133. `None` for another
/// dtype or a `k` that is not whole blocks.
pub fn lookup_rows(dtype: DType, k: usize, rows: usize, stride: usize, seed: u64) -> Option<Vec<u8>> {
    let row = dtype.row_size(k)?;
    if !DType::LOOKUP_WEIGHTS.contains(&dtype) || stride < row {
        return None;
    }
    let mut rng = SplitMix64::new(seed);
    let half = |rng: &mut SplitMix64| {
        let r = rng.next_u64();
        let v = (1.0 + (r >> 40) as f32 / (1u64 << 24) as f32) * 2f32.powi(-10 + (r % 8) as i32);
        F16Bits::from_f32(if r >> 39 & 1 == 1 { -v } else { v }).0
    };
    let mut data = vec![0xAAu8; stride * rows];
    for r in 0..rows {
        let out = &mut data[r * stride..r * stride + row];
        for block in out.chunks_exact_mut(dtype.bytes_per_block()) {
            for b in block.iter_mut() {
                *b = rng.next_u64() as u8;
            }
            match dtype {
                // d first: an f16.
                DType::IQ4_NL | DType::IQ4_XS => block[..2].copy_from_slice(&half(&mut rng)),
                // e first: 2^(e − 128) of 2^-10 to 2^5.
                _ => block[0] = 118 + rng.below(16) as u8,
            }
        }
    }
    Some(data)
}
