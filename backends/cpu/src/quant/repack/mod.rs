//! Weights repacked at load time into row-interleaved groups, and the
//! quantized products that read them (what ggml's CPU_REPACK buffer type
//! does for its CPU backend; the buffer type is
//! [`crate::repack_buffer_type`]).
//!
//! A group is 16 weight rows, laid out so that one 64-byte load gives the
//! 16 rows' next 4 values in the 16 i32 lanes of an AVX-512 register
//! ([`layout`] has the details). A kernel then multiplies a block of 16
//! rows by an activation column with eight `vpdpbusd` against the column's
//! 4-byte words broadcast, and keeps 16 row sums per column in one register:
//! no horizontal sums, no per-row header work, and the block's weights are
//! loaded once for several columns. The same kernel is the batch-1 mat-vec
//! (streaming the weights) and the micro-kernel of batches.
//!
//! Types: Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0 (the 5-bit types' fifth bits one
//! more 64-byte chunk a block, [`layout`]), and Q2_K, Q3_K, Q4_K, Q5_K and
//! Q6_K, whose 256-value super-blocks have layouts of their own
//! (`k_records`: one record per super-block of 16 rows, the scales and
//! mins unpacked at load) and kernels of their own against Q8_K columns;
//! the lookup types (IQ4_NL, IQ4_XS, MXFP4) keep the plain layout and
//! [`super::quant_mul_mat`].
//!
//! Q2_K and Q3_K (`q23k_layout`) keep their quants in the file's planes,
//! the 2-bit `qs` (and Q3_K's 1-bit `hmask`) cut into 64-byte chunks of 4
//! bytes a row, as Q6_K's planes are: one load, a shift and a mask (and,
//! for Q3_K, a second load, shift, mask and an `or`) give 16 rows' next 4
//! quants of a 16-value sub-block as unsigned bytes. Their 4-bit (Q2_K) or
//! 6-bit (Q3_K) scales are one byte a row and sub-block, Q2_K's mins i16
//! pairs after a zero-extension, as Q4_K's; Q3_K's `−4` offset is a start
//! value per sub-block the column brings (`−4·bsum`), as Q6_K's `−32`. A
//! record is 100 bytes a row for Q2_K (the file's 84) and 116 for Q3_K
//! (110). A K-quant matrix whose rows are not whole
//! super-blocks is not a K-quant file's (llama.cpp falls back to Q5_0,
//! Q5_1 or Q8_0 for such rows).
//!
//! Files:
//! - `layout`: the group and column layouts, the types ([`RepackType`]).
//! - `pack`: repack / unrepack (bit for bit), one row dequantized (GET_ROWS).
//! - `scalar`: the reference kernel every SIMD kernel matches bit for bit.
//! - `avx512`: 16 rows per register, `vpdpbusd` or `vpmaddubsw` + `vpmaddwd`.
//! - `avx2`: 8 rows per register, `vpmaddubsw` + `vpmaddwd`.
//! - `driver`: columns quantized once, tasks over the threads, one or
//!   several matrices (a fused group) per call.
//! - `k_records`: what the K-quants share (records per super-block, Q8_K
//!   columns, packing both ways).
//! - `q4k_layout`: Q4_K's and Q5_K's records.
//! - `q4k_scalar`, `q4k_avx512`, `q4k_avx2`: their kernels, as the above.
//! - `q6k_layout`, `q6k_scalar`, `q6k_avx512`, `q6k_avx2`: the same for Q6_K.
//! - `q23k_layout`, `q23k_scalar`, `q23k_avx512`, `q23k_avx2`: the same for
//!   Q2_K and Q3_K (one kernel of each kind for both, `Q3` telling them apart).
//! - `tests`: every path against the scalar kernel and the plain product.

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;
mod driver;
mod k_records;
pub(crate) mod layout;
mod pack;
#[cfg(target_arch = "x86_64")]
mod q23k_avx2;
#[cfg(target_arch = "x86_64")]
mod q23k_avx512;
pub(crate) mod q23k_layout;
mod q23k_scalar;
#[cfg(target_arch = "x86_64")]
mod q4k_avx2;
#[cfg(target_arch = "x86_64")]
mod q4k_avx512;
pub(crate) mod q4k_layout;
mod q4k_scalar;
#[cfg(target_arch = "x86_64")]
mod q6k_avx2;
#[cfg(target_arch = "x86_64")]
mod q6k_avx512;
pub(crate) mod q6k_layout;
mod q6k_scalar;
mod scalar;

#[cfg(test)]
mod tests;

pub use driver::{RepackedMatrix, repacked_mul_mat, repacked_mul_mat_on, repacked_scratch_size};
pub use layout::{GROUP_ROWS, REPACKED_DTYPES, repacked_size, repacks};
pub use pack::{dequantize_repacked_row, repack_group, repack_matrix, unrepack_group, unrepack_matrix};

pub(crate) use driver::{HalfPass, Job};
