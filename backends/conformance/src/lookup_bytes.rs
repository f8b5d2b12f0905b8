//! Inputs of the read-only lookup types (IQ4_NL, IQ4_XS, MXFP4): Gantry
//! cannot quantize f32 values into them, so their leafs get seeded random
//! blocks instead (random index nibbles and scale bits) with scales in a
//! range where the values are neither huge nor vanishing. The reference
//! reads the same bytes back through the engine's dequantizer.

use gantry_engine::quant::F16Bits;
use gantry_engine::{DType, SplitMix64};

/// `nbytes` bytes of whole `dtype` blocks from `rng`, or `None` when `dtype`
/// is not a lookup type.
pub(crate) fn lookup_bytes(dtype: DType, nbytes: usize, rng: &mut SplitMix64) -> Option<Vec<u8>> {
    if !DType::LOOKUP_WEIGHTS.contains(&dtype) {
        return None;
    }
    let mut out = vec![0u8; nbytes];
    for block in out.chunks_mut(dtype.bytes_per_block()) {
        for b in block.iter_mut() {
            *b = rng.next_u64() as u8;
        }
        if dtype == DType::MXFP4 {
            // 2^(e − 128) of 2^-6 to 2^1.
            block[0] = 122 + rng.below(8) as u8;
        } else if block.len() >= 2 {
            // d: an f16 of either sign, 2^-9 to 2^-4 (values up to about 127·d).
            let v = rng.range(1.0, 2.0) * 2f32.powi(-9 + rng.below(6) as i32);
            let d = if rng.next_u64() & 1 == 1 { -v } else { v };
            block[..2].copy_from_slice(&F16Bits::from_f32(d).0);
        }
    }
    Some(out)
}
