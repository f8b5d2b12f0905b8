//! Gantry's op parameters in ggml's layout: the 16 `int32_t` of a ggml
//! tensor's `op_params`, as ggml.c's builders fill them.
//!
//! The enum values ggml keeps in `op_params[0]` of GGML_OP_UNARY and
//! GGML_OP_GLU nodes are left at 0 here: the driver resolves those ops by
//! name (`ggml_unary_op_name`, `ggml_glu_op_name`) and sets them itself, so
//! nothing here depends on the order of ggml's enums.

use gantry_engine::Op;

/// ggml's `GGML_MAX_OP_PARAMS / sizeof(int32_t)`.
pub const N_OP_PARAMS: usize = 16;

/// `op_params` of a ggml tensor computing `op`.
pub fn ggml_op_params(op: &Op, view_offset: usize) -> [i32; N_OP_PARAMS] {
    let mut p = [0i32; N_OP_PARAMS];
    let f = |x: f32| x.to_bits() as i32;
    match *op {
        // ggml_scale_impl: { s, b }.
        Op::Scale { scale, bias } => {
            p[0] = f(scale);
            p[1] = f(bias);
        }
        // ggml_clamp_impl: { min, max }.
        Op::Clamp { min, max } => {
            p[0] = f(min);
            p[1] = f(max);
        }
        // ggml_leaky_relu: { negative_slope }.
        Op::LeakyRelu { negative_slope } => p[0] = f(negative_slope),
        // ggml_glu_impl: { op, swapped }.
        Op::Glu { swapped, .. } => p[1] = i32::from(swapped),
        // ggml_swiglu_oai: ggml_glu_impl's { op, swapped }, then alpha, limit.
        // ggml's builder always passes swapped = false; its CPU kernel reads
        // the flag all the same.
        Op::SwigluOai { alpha, limit, swapped } => {
            p[1] = i32::from(swapped);
            p[2] = f(alpha);
            p[3] = f(limit);
        }
        // ggml_norm_impl, ggml_rms_norm_impl: { eps }.
        Op::Norm { eps } | Op::RmsNorm { eps } => p[0] = f(eps),
        // ggml_soft_max_impl: { scale, max_bias }.
        Op::SoftMax { scale, max_bias } => {
            p[0] = f(scale);
            p[1] = f(max_bias);
        }
        // ggml_diag_mask_inf_impl: { n_past }.
        Op::DiagMaskInf { n_past } => p[0] = n_past as i32,
        // ggml_rope_impl: { n_past = 0, n_dims, mode, n_ctx = 0, n_ctx_orig,
        // freq_base, freq_scale, ext_factor, attn_factor, beta_fast,
        // beta_slow, sections[4] = 0, n_offs = 0 }.
        Op::Rope(r) => {
            p[1] = r.n_dims as i32;
            p[2] = r.mode.ggml_mode();
            p[4] = r.n_ctx_orig as i32;
            p[5] = f(r.freq_base);
            p[6] = f(r.freq_scale);
            p[7] = f(r.ext_factor);
            p[8] = f(r.attn_factor);
            p[9] = f(r.beta_fast);
            p[10] = f(r.beta_slow);
        }
        // ggml_concat: { dim }.
        Op::Concat { dim } => p[0] = i32::from(dim),
        // ggml_argsort: { order }.
        Op::Argsort { order } => p[0] = order.ggml_code(),
        // ggml_flash_attn_ext: { scale, max_bias, logit_softcap }, then the
        // precision (GGML_PREC_DEFAULT = 0; ggml's CPU kernel computes in F32
        // either way).
        Op::FlashAttnExt { scale, max_bias, softcap } => {
            p[0] = f(scale);
            p[1] = f(max_bias);
            p[2] = f(softcap);
        }
        // ggml_view_impl: the byte offset, a size_t (the CPU backend ignores it).
        Op::View => {
            let bytes = (view_offset as u64).to_le_bytes();
            p[0] = i32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
            p[1] = i32::from_le_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]);
        }
        // ggml_permute: the destination of each axis.
        Op::Permute { axes } => {
            for (slot, &a) in p.iter_mut().zip(&axes) {
                *slot = i32::from(a);
            }
        }
        // No parameters: ggml's builders leave op_params zero (TOP_K's k is
        // its result's ne[0]; the unary op is set by the driver).
        Op::None
        | Op::Reshape
        | Op::Transpose
        | Op::Cpy
        | Op::Cont
        | Op::Dup
        | Op::GetRows
        | Op::SetRows
        | Op::Binary(_)
        | Op::Unary(_)
        | Op::Sum
        | Op::SumRows
        | Op::Mean
        | Op::Argmax
        | Op::MulMat
        | Op::Repeat
        | Op::MulMatId
        | Op::AddId
        | Op::TopK
        | Op::Cumsum => {}
        // The vision, diffusion and mask ops are not translated yet: their
        // cases run with zero parameters and show as over tolerance.
        _ => {}
    }
    p
}

#[cfg(test)]
mod tests {
    use gantry_engine::{RopeMode, RopeParams};

    use super::*;

    #[test]
    fn rope_follows_ggml_rope_impl() {
        let r = RopeParams { n_ctx_orig: 512, ..RopeParams::new(64, RopeMode::Neox, 10000.0) };
        let p = ggml_op_params(&Op::Rope(r), 0);
        assert_eq!(&p[..5], &[0, 64, 2, 0, 512]);
        assert_eq!(f32::from_bits(p[5] as u32), 10000.0);
        assert_eq!(f32::from_bits(p[9] as u32), 32.0);
        assert_eq!(&p[11..], &[0; 5]);
    }

    #[test]
    fn glu_leaves_the_unit_to_the_driver() {
        let p = ggml_op_params(&Op::SwigluOai { alpha: 1.702, limit: 7.0, swapped: true }, 0);
        assert_eq!((p[0], p[1], f32::from_bits(p[3] as u32)), (0, 1, 7.0));
    }
}
