//! Vector primitives the kernels are built from, one file per kind:
//!
//! - `dot`: dot products of a row (F32, F16 or BF16) with one or four F32
//!   columns, and of an F16 row with several, each as alone;
//! - `axpy`: `y += alpha x` (x in F32 or F16; F16 into several `y` at
//!   once) and `y *= s`;
//! - `reduce`: sums accumulated in f64, and the maximum;
//! - `exp`: a vectorizable `exp` and what is built on it (softmax's shifted
//!   exponentials, SiLU, GELU, quick GELU, sigmoid);
//! - `piecewise`: functions of comparisons, clamps and roundings (hard
//!   swish and sigmoid, step, sign, floor, ceil, trunc, round, leaky ReLU);
//! - `convert`: F16 and BF16 slices to and from F32;
//! - `detect`: the CPU features the primitives choose between.
//!
//! Most are written once in plain Rust over fixed-width lane arrays, which
//! LLVM turns into SIMD code, and compiled twice by [`multiversion!`]
//! (`multiversion`): for the baseline target and with AVX2 + FMA, chosen at
//! run time. The dots and the F16 axpy use AVX2/F16C intrinsics directly
//! (`avx2`), since converting halves one by one does not vectorize.

// `pub(crate)`: kernels compiled for AVX2 inline its bodies (the attention's in-place scores).
#[cfg(target_arch = "x86_64")]
pub(crate) mod avx2;
mod axpy;
mod convert;
mod detect;
mod dot;
mod exp;
pub(crate) mod multiversion;
mod piecewise;
mod reduce;

#[cfg(test)]
mod tests;

pub use axpy::{axpy, axpy_f16, axpy_f16_each, scale};
pub use convert::{bf16_to_f32_slice, f16_to_f32, f32_to_bf16_slice, f32_to_f16};
pub use detect::has_avx2_fma;
pub use dot::{dot_bf16, dot_f16, dot_f16_each, dot_f32, dot4_bf16, dot4_f16, dot4_f32};
pub use exp::{exp_in_place, exp_shifted, gelu_in_place, gelu_quick_in_place, sigmoid_in_place, silu_in_place};
pub(crate) use multiversion::multiversion;
pub use piecewise::{
    ceil_in_place, floor_in_place, hardsigmoid_in_place, hardswish_in_place, leaky_relu_in_place, round_in_place,
    sgn_in_place, step_in_place, trunc_in_place,
};
pub use reduce::{max, sum_f64, sum_sq_f64};
