//! Portable integer dot products: integer sums per block (per group for the
//! K-quants), one float multiply-add per block — ggml's generic kernels'
//! arithmetic, written over the unpacked form of [`super::unpack`].

use gantry_engine::quant::{
    BlockIQ4NL, BlockIQ4XS, BlockMXFP4, BlockQ2K, BlockQ3K, BlockQ4_0, BlockQ4_1, BlockQ4K, BlockQ5_0, BlockQ5_1,
    BlockQ5K, BlockQ6K, BlockQ8_0, BlockQ8_1, BlockQ8K,
};

use super::unpack::{UnpackK, UnpackSmall};

fn idot32(x: &[i8; 32], y: &[i8; 32]) -> i32 {
    x.iter().zip(y).map(|(&a, &b)| a as i32 * b as i32).sum()
}

/// Σ over blocks of `d_x·d_y·Σq_x·q_y` (the symmetric 32-value types with Q8_0).
pub(crate) fn dot_small_q8_0<B: UnpackSmall>(x: &[B], y: &[BlockQ8_0]) -> f32 {
    let mut sum = 0f32;
    for (xb, yb) in x.iter().zip(y) {
        let u = xb.unpack();
        sum += idot32(&u.q, &yb.qs) as f32 * (u.d * yb.d.to_f32());
    }
    sum
}

/// Σ over blocks of `d_x·d_y·Σq_x·q_y + m_x·s_y` (the `_1` types with Q8_1).
pub(crate) fn dot_small_q8_1<B: UnpackSmall>(x: &[B], y: &[BlockQ8_1]) -> f32 {
    let mut sum = 0f32;
    for (xb, yb) in x.iter().zip(y) {
        let u = xb.unpack();
        sum += idot32(&u.q, &yb.qs) as f32 * (u.d * yb.d.to_f32()) + u.m * yb.s.to_f32();
    }
    sum
}

/// Σ over super-blocks of `d_y·(d·Σ_g sc_g·Σq·a − dmin·Σ_g m_g·bsum_g)`.
pub(crate) fn dot_k_q8_k<B: UnpackK>(x: &[B], y: &[BlockQ8K]) -> f32 {
    let mut sum = 0f32;
    for (xb, yb) in x.iter().zip(y) {
        let u = xb.unpack();
        let mut isum = 0i32;
        let mut msum = 0i32;
        for g in 0..16 {
            let q = &u.q[16 * g..16 * g + 16];
            let a = &yb.qs[16 * g..16 * g + 16];
            let s: i32 = q.iter().zip(a).map(|(&q, &a)| q as i32 * a as i32).sum();
            isum += u.sc[g] as i32 * s;
            msum += u.m[g] as i32 * yb.bsums[g] as i32;
        }
        sum += yb.d * (u.d * isum as f32 - u.dmin * msum as f32);
    }
    sum
}

/// Q4_0 · Q8_0.
pub fn vec_dot_q4_0_q8_0(x: &[BlockQ4_0], y: &[BlockQ8_0]) -> f32 {
    dot_small_q8_0(x, y)
}
/// Q5_0 · Q8_0.
pub fn vec_dot_q5_0_q8_0(x: &[BlockQ5_0], y: &[BlockQ8_0]) -> f32 {
    dot_small_q8_0(x, y)
}
/// Q8_0 · Q8_0.
pub fn vec_dot_q8_0_q8_0(x: &[BlockQ8_0], y: &[BlockQ8_0]) -> f32 {
    dot_small_q8_0(x, y)
}
/// Q4_1 · Q8_1.
pub fn vec_dot_q4_1_q8_1(x: &[BlockQ4_1], y: &[BlockQ8_1]) -> f32 {
    dot_small_q8_1(x, y)
}
/// Q5_1 · Q8_1.
pub fn vec_dot_q5_1_q8_1(x: &[BlockQ5_1], y: &[BlockQ8_1]) -> f32 {
    dot_small_q8_1(x, y)
}
/// Q2_K · Q8_K.
pub fn vec_dot_q2_k_q8_k(x: &[BlockQ2K], y: &[BlockQ8K]) -> f32 {
    dot_k_q8_k(x, y)
}
/// Q3_K · Q8_K.
pub fn vec_dot_q3_k_q8_k(x: &[BlockQ3K], y: &[BlockQ8K]) -> f32 {
    dot_k_q8_k(x, y)
}
/// Q4_K · Q8_K.
pub fn vec_dot_q4_k_q8_k(x: &[BlockQ4K], y: &[BlockQ8K]) -> f32 {
    dot_k_q8_k(x, y)
}
/// Q5_K · Q8_K.
pub fn vec_dot_q5_k_q8_k(x: &[BlockQ5K], y: &[BlockQ8K]) -> f32 {
    dot_k_q8_k(x, y)
}
/// Q6_K · Q8_K.
pub fn vec_dot_q6_k_q8_k(x: &[BlockQ6K], y: &[BlockQ8K]) -> f32 {
    dot_k_q8_k(x, y)
}
/// IQ4_NL · Q8_0 (the table values are the quants: `d·d'·Σk[q]·q'`).
pub fn vec_dot_iq4_nl_q8_0(x: &[BlockIQ4NL], y: &[BlockQ8_0]) -> f32 {
    dot_small_q8_0(x, y)
}
/// MXFP4 · Q8_0 (doubled E2M1 values against half the exponent's scale).
pub fn vec_dot_mxfp4_q8_0(x: &[BlockMXFP4], y: &[BlockQ8_0]) -> f32 {
    dot_small_q8_0(x, y)
}
/// IQ4_XS · Q8_K (table values with the sub-block scales as group scales).
pub fn vec_dot_iq4_xs_q8_k(x: &[BlockIQ4XS], y: &[BlockQ8K]) -> f32 {
    dot_k_q8_k(x, y)
}
