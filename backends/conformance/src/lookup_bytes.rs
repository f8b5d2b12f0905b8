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
        // Values of order one at most, so that a wrong output element stands
        // out of the product's error.
        if dtype == DType::MXFP4 {
            // 2^(e − 128) of 2^-10 to 2^-3: values up to 12·2^-3.
            block[0] = 118 + rng.below(8) as u8;
        } else if block.len() >= 2 {
            // d: an f16 of either sign; values up to 127·d (IQ4_NL, d up to
            // 2^-6) or 32·127·d (IQ4_XS, d up to 2^-10).
            let top = if dtype == DType::IQ4_XS { -11 } else { -7 };
            let v = rng.range(1.0, 2.0) * 2f32.powi(top - rng.below(4) as i32);
            let d = if rng.next_u64() & 1 == 1 { -v } else { v };
            block[..2].copy_from_slice(&F16Bits::from_f32(d).0);
        }
    }
    Some(out)
}
