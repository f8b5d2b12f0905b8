//! Quantized kernels of the CPU backend: activation quantizers, integer dot
//! products of every weight type with its dot partner, the quantized
//! matrix product driver, and row conversions for GET_ROWS / CPY / SET_ROWS.
//!
//! Every kernel has a portable scalar path and, on x86-64, SIMD paths chosen
//! at run time by CPU feature detection ([`Isa`]):
//! - `Avx2` (AVX2 + FMA + F16C): every kernel.
//! - `Avx512` (AVX-512 F, BW, VL, DQ, with AVX2/FMA/F16C) and `Avx512Vnni`
//!   (the same + AVX512_VNNI). 512-bit bodies: the ten integer dot products
//!   (`dot_avx512`: two 32-value blocks or 64 K-quant values per register),
//!   and the batch-1 four-row kernel of the 32-value types (`rows_avx512`).
//!   With VNNI the byte products are `vpdpbusd`, without it `vpmaddubsw` +
//!   `vpmaddwd`: one body each, two entry points. Still on the AVX2 code
//!   under these two paths (which an AVX-512 CPU runs as well): the
//!   activation quantizers (`quantize_activation`: a small part of a
//!   product, once per column) and the tiled micro-kernels of prompt batches
//!   (`tile_avx2`, N ≥ `TILE_MIN_N`). The AVX-512 code was written and
//!   compiled on a CPU without AVX-512; it is tested under an emulator
//!   (the `isa_tests` module: small shapes for that) and nothing here says
//!   how fast it is.
//!
//! [`Isa::available`] lists what this CPU can run; tests run every entry
//! against the scalar path. The F16/F32 mat-vec is a dense kernel on the same
//! paths, [`crate::float_matvec`]; its small-shape checks run in
//! `isa_tests` with these.
//!
//! Dot partners (ggml's `vec_dot_type`): Q8_0 for Q4_0, Q5_0, Q8_0, IQ4_NL,
//! MXFP4; Q8_1 for Q4_1, Q5_1; Q8_K for the K-quants and IQ4_XS.
//!
//! The lookup types (IQ4_NL, IQ4_XS, MXFP4) have their integer dots on
//! every path (the 4-bit indices become table values with one byte shuffle)
//! and the float form of the tiled path; they have no several-row kernel
//! (their batch-1 products go row by row through the dots) and no SIMD row
//! unpacker.
//!
//! Files:
//! - `quantize_activation`: f32 rows into Q8_0 / Q8_1 / Q8_K (scalar, AVX2).
//! - `unpack`: every weight block brought to one integer form.
//! - `unpack_avx2`: rows of Q4_0 / Q4_1 / Q8_0 into the tiled form, AVX2.
//! - `dot_scalar`, `dot_avx2`, `dot_avx512`: one weight row · one
//!   activation row, per path (the `vec_dot_*` functions here dispatch).
//! - `rows_avx2`, `rows_avx512`: several weight rows · one activation row
//!   (the batch-1 kernel of the 32-value types).
//! - `tile_avx2`: the tiled micro-kernels of prompt batches.
//! - `weight`: what the driver knows about a weight type, in one trait.
//! - `mul_mat`: the quantized matrix product driver.
//! - `mul_mat_shared`: several products of one activation, quantized once,
//!   in one dispatch (a fused group's).
//! - `rows`: row conversions for GET_ROWS / CPY / SET_ROWS.
//! - `tests`, `isa_tests`: every path against the scalar one and f64
//!   (`isa_tests`: small shapes, for an emulator).

// `pub(super)`: the float mat-vec (`cpu::float_matvec`) uses its horizontal sum.
#[cfg(target_arch = "x86_64")]
pub(super) mod dot_avx2;
#[cfg(target_arch = "x86_64")]
mod dot_avx512;
mod dot_scalar;
mod mul_mat;
mod mul_mat_shared;
mod quantize_activation;
pub mod repack;
mod rows;
#[cfg(target_arch = "x86_64")]
mod rows_avx2;
#[cfg(target_arch = "x86_64")]
mod rows_avx512;
#[cfg(target_arch = "x86_64")]
mod tile_avx2;
mod unpack;
#[cfg(target_arch = "x86_64")]
mod unpack_avx2;
mod weight;

#[cfg(test)]
mod isa_tests;
#[cfg(test)]
mod tests;

pub use mul_mat::{Columns, ColumnsMut, QuantMatrix, quant_mul_mat, quant_mul_mat_on, quant_mul_mat_scratch_size};
pub use mul_mat_shared::{MAX_SHARED, quant_mul_mat_shared, quant_mul_mat_shared_on, shared_takes};
pub use quantize_activation::{quantize_row_q8_0, quantize_row_q8_1, quantize_row_q8_k};
pub use rows::{dequantize_rows, quantize_rows_ref};

use gantry_engine::DType;
use gantry_engine::quant::{
    BlockIQ4NL, BlockIQ4XS, BlockMXFP4, BlockQ2K, BlockQ3K, BlockQ4_0, BlockQ4_1, BlockQ4K, BlockQ5_0, BlockQ5_1,
    BlockQ5K, BlockQ6K, BlockQ8_0, BlockQ8_1, BlockQ8K,
};

use super::Isa;

/// Defines `vec_dot_<type>_<partner>(n, x, y)` (best path) and
/// `vec_dot_<type>_<partner>_on(isa, n, x, y)` (a chosen path).
macro_rules! vec_dots {
    ($($name:ident, $on:ident, $x:ty, $y:ty, $bs:expr;)*) => {$(
        #[doc = concat!("Dot product of the first `n` values of `", stringify!($x), "` weights and `",
            stringify!($y), "` activations on the fastest path. `n` is rounded down to whole blocks and \
            capped by the blocks both slices hold.")]
        pub fn $name(n: usize, x: &[$x], y: &[$y]) -> f32 {
            $on(Isa::best(), n, x, y)
        }

        #[doc = concat!("[`", stringify!($name), "`] on the path `isa`.")]
        pub fn $on(isa: Isa, n: usize, x: &[$x], y: &[$y]) -> f32 {
            let nb = (n / $bs).min(x.len()).min(y.len());
            let (x, y) = (&x[..nb], &y[..nb]);
            match isa {
                Isa::Scalar => dot_scalar::$name(x, y),
                #[cfg(target_arch = "x86_64")]
                // SAFETY: `Isa::Avx2` is only handed out after checking AVX2, FMA and F16C.
                Isa::Avx2 => unsafe { dot_avx2::$name(x, y) },
                #[cfg(target_arch = "x86_64")]
                // SAFETY: `Isa::Avx512` is only handed out after checking AVX-512 F/BW/VL/DQ and AVX2/FMA/F16C.
                Isa::Avx512 => unsafe { dot_avx512::plain::$name(x, y) },
                #[cfg(target_arch = "x86_64")]
                // SAFETY: `Isa::Avx512Vnni`: as `Isa::Avx512`, and AVX512_VNNI checked too.
                Isa::Avx512Vnni => unsafe { dot_avx512::vnni::$name(x, y) },
            }
        }
    )*};
}

vec_dots! {
    vec_dot_q4_0_q8_0, vec_dot_q4_0_q8_0_on, BlockQ4_0, BlockQ8_0, 32;
    vec_dot_q4_1_q8_1, vec_dot_q4_1_q8_1_on, BlockQ4_1, BlockQ8_1, 32;
    vec_dot_q5_0_q8_0, vec_dot_q5_0_q8_0_on, BlockQ5_0, BlockQ8_0, 32;
    vec_dot_q5_1_q8_1, vec_dot_q5_1_q8_1_on, BlockQ5_1, BlockQ8_1, 32;
    vec_dot_q8_0_q8_0, vec_dot_q8_0_q8_0_on, BlockQ8_0, BlockQ8_0, 32;
    vec_dot_q2_k_q8_k, vec_dot_q2_k_q8_k_on, BlockQ2K, BlockQ8K, 256;
    vec_dot_q3_k_q8_k, vec_dot_q3_k_q8_k_on, BlockQ3K, BlockQ8K, 256;
    vec_dot_q4_k_q8_k, vec_dot_q4_k_q8_k_on, BlockQ4K, BlockQ8K, 256;
    vec_dot_q5_k_q8_k, vec_dot_q5_k_q8_k_on, BlockQ5K, BlockQ8K, 256;
    vec_dot_q6_k_q8_k, vec_dot_q6_k_q8_k_on, BlockQ6K, BlockQ8K, 256;
    vec_dot_iq4_nl_q8_0, vec_dot_iq4_nl_q8_0_on, BlockIQ4NL, BlockQ8_0, 32;
    vec_dot_mxfp4_q8_0, vec_dot_mxfp4_q8_0_on, BlockMXFP4, BlockQ8_0, 32;
    vec_dot_iq4_xs_q8_k, vec_dot_iq4_xs_q8_k_on, BlockIQ4XS, BlockQ8K, 256;
}

/// The dot partner of a quantized weight type (ggml's `vec_dot_type`), or
/// `None` for types that are not weights of a quantized mul_mat here.
pub fn dot_partner(weights: DType) -> Option<DType> {
    Some(match weights {
        DType::Q4_0 | DType::Q5_0 | DType::Q8_0 | DType::IQ4_NL | DType::MXFP4 => DType::Q8_0,
        DType::Q4_1 | DType::Q5_1 => DType::Q8_1,
        DType::Q2_K | DType::Q3_K | DType::Q4_K | DType::Q5_K | DType::Q6_K | DType::IQ4_XS => DType::Q8_K,
        _ => return None,
    })
}

/// A deterministic test signal with a zero run and an outlier every 97 values.
#[cfg(test)]
pub(crate) fn test_signal(n: usize, seed: u32) -> Vec<f32> {
    gantry_engine::testing::test_signal(n, u64::from(seed), 1.0)
}
