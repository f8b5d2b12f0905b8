//! Gantry's op parameters in ggml's layout: the 16 `int32_t` of a ggml
//! tensor's `op_params`, as ggml.c's builders fill them.
//!
//! The enum values ggml keeps in `op_params[0]` of GGML_OP_UNARY and
//! GGML_OP_GLU nodes are left at 0 here: the driver resolves those ops by
//! name (`ggml_unary_op_name`, `ggml_glu_op_name`) and sets them itself, so
//! nothing here depends on the order of ggml's enums.

use gantry_engine::{Op, TriType};

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
        // ggml_ssm_scan: { K }, the states kept per sequence.
        Op::SsmScan { states } => p[0] = states as i32,
        // ggml_gated_linear_attn: { scale }.
        Op::GatedLinearAttn { scale } => p[0] = f(scale),
        // ggml_gated_delta_net: { K }, the states kept per sequence.
        Op::GatedDeltaNet { states } => p[0] = states as i32,
        // ggml_win_part: { npx, npy, w }.
        Op::WinPart { npx, npy, w } => p[..3].copy_from_slice(&[npx as i32, npy as i32, w as i32]),
        // ggml_win_unpart: { w }.
        Op::WinUnpart { w } => p[0] = w as i32,
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
        // ggml_im2col: { s0, s1, p0, p1, d0, d1, is_2D }. ggml_conv_1d, the
        // 1-D caller, passes 0 for the second dim's three.
        Op::Im2col { conv, is_2d } => {
            let dims = if is_2d { 2 } else { 1 };
            for d in 0..dims {
                p[d] = conv.stride[d] as i32;
                p[2 + d] = conv.pad[d] as i32;
                p[4 + d] = conv.dilation[d] as i32;
            }
            p[6] = i32::from(is_2d);
        }
        // ggml_conv_2d_direct, ggml_conv_2d_dw_direct: { s0, s1, p0, p1, d0,
        // d1 }.
        Op::Conv2d(conv) | Op::Conv2dDw(conv) => {
            for d in 0..2 {
                p[d] = conv.stride[d] as i32;
                p[2 + d] = conv.pad[d] as i32;
                p[4 + d] = conv.dilation[d] as i32;
            }
        }
        // ggml_conv_transpose_1d: { s0, p0, d0 }, which it asserts are
        // { s0, 0, 1 }.
        Op::ConvTranspose1d { stride } => {
            p[0] = stride as i32;
            p[2] = 1;
        }
        // ggml_conv_transpose_2d_p0: { stride }.
        Op::ConvTranspose2d { stride } => p[0] = stride as i32,
        // ggml_pool_1d: { op, k0, s0, p0 }.
        Op::Pool1d { op, k, s, p: pad } => {
            p[..4].copy_from_slice(&[op.ggml_code(), k as i32, s as i32, pad as i32]);
        }
        // ggml_pool_2d: { op, k0, k1, s0, s1, p0, p1 }, all int32_t (its
        // float paddings converted by the array's initializer; the CPU kernel
        // reads ints).
        Op::Pool2d { op, k, s, p: pad } => {
            p[..7].copy_from_slice(&[
                op.ggml_code(),
                k[0] as i32,
                k[1] as i32,
                s[0] as i32,
                s[1] as i32,
                pad[0] as i32,
                pad[1] as i32,
            ]);
        }
        // ggml_interpolate_impl: { mode | flags } (GGML_SCALE_FLAG_ALIGN_CORNERS
        // = 1 << 8).
        Op::Upscale { mode, align_corners } => p[0] = mode.ggml_code() | (i32::from(align_corners) << 8),
        // ggml_pad_ext: { lp0, rp0, lp1, rp1, lp2, rp2, lp3, rp3, circular }.
        Op::Pad { lp, rp, circular } => {
            for d in 0..4 {
                p[2 * d] = lp[d] as i32;
                p[2 * d + 1] = rp[d] as i32;
            }
            p[8] = i32::from(circular);
        }
        // ggml_pad_reflect_1d: { p0, p1 }.
        Op::PadReflect1d { p0, p1 } => {
            p[0] = p0 as i32;
            p[1] = p1 as i32;
        }
        // ggml_roll: { shift0, shift1, shift2, shift3 }.
        Op::Roll { shift } => p[..4].copy_from_slice(&shift),
        // ggml_group_norm_impl: { n_groups (i32), eps (f32) }.
        Op::GroupNorm { n_groups, eps } => {
            p[0] = n_groups as i32;
            p[1] = f(eps);
        }
        // ggml_l2_norm_impl: { eps }.
        Op::L2Norm { eps } => p[0] = f(eps),
        // ggml_arange: { start, stop, step }.
        Op::Arange { start, stop, step } => {
            p[0] = f(start);
            p[1] = f(stop);
            p[2] = f(step);
        }
        // ggml_timestep_embedding: { dim, max_period }.
        Op::TimestepEmbedding { dim, max_period } => {
            p[0] = dim as i32;
            p[1] = max_period;
        }
        // ggml_xielu: a GGML_OP_UNARY node, { GGML_UNARY_OP_XIELU (set by the
        // driver), beta + softplus(alpha_n), softplus(alpha_p), beta, eps }:
        // Gantry keeps the parameters as ggml stores them.
        Op::Xielu { alpha_n, alpha_p, beta, eps } => {
            p[1] = f(alpha_n);
            p[2] = f(alpha_p);
            p[3] = f(beta);
            p[4] = f(eps);
        }
        // ggml_fill_impl: { c }.
        Op::Fill { c } => p[0] = f(c),
        // ggml_tri: { type }, TriType::ALL being ggml's enum order.
        Op::Tri(kind) => p[0] = TriType::ALL.iter().position(|&t| t == kind).unwrap_or(0) as i32,
        // ggml_diag_mask_zero_impl: { n_past }.
        Op::DiagMaskZero { n_past } => p[0] = n_past as i32,
        // ggml_set_impl, ggml_acc_impl: { nb1, nb2, nb3, offset, inplace }
        // (Gantry's results are never in place; ggml's CPU kernels copy src0
        // first unless the flag is set).
        Op::Set { nb, offset } | Op::Acc { nb, offset } => {
            p[..4].copy_from_slice(&[nb[0] as i32, nb[1] as i32, nb[2] as i32, offset as i32]);
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
        | Op::Cumsum
        | Op::Diag
        | Op::Add1
        | Op::CountEqual
        | Op::SsmConv
        | Op::SolveTri
        | Op::RwkvWkv6
        | Op::RwkvWkv7
        | Op::GetRelPos => {}
        // ggml_add_rel_pos_impl: { inplace } (Gantry's result is never in
        // place: ggml's CPU kernel copies the scores first when it is 0).
        Op::AddRelPos => p[0] = 0,
    }
    p
}

#[cfg(test)]
mod tests {
    use gantry_engine::{ConvParams, PoolOp, RopeMode, RopeParams, ScaleMode};

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
    fn vision_ops_follow_their_builders() {
        let conv = ConvParams { stride: [2, 3], pad: [1, 0], dilation: [1, 2] };
        let p = ggml_op_params(&Op::Im2col { conv, is_2d: true }, 0);
        assert_eq!(&p[..8], &[2, 3, 1, 0, 1, 2, 1, 0]);
        let p = ggml_op_params(&Op::Im2col { conv, is_2d: false }, 0);
        assert_eq!(&p[..8], &[2, 0, 1, 0, 1, 0, 0, 0]);
        let pool = Op::Pool2d { op: PoolOp::Avg, k: [3, 2], s: [1, 2], p: [1, 0] };
        assert_eq!(&ggml_op_params(&pool, 0)[..8], &[1, 3, 2, 1, 2, 1, 0, 0]);
        let pad = Op::Pad { lp: [1, 0, 2, 0], rp: [0, 3, 0, 4], circular: true };
        assert_eq!(&ggml_op_params(&pad, 0)[..10], &[1, 0, 0, 3, 2, 0, 0, 4, 1, 0]);
        let up = Op::Upscale { mode: ScaleMode::Bilinear, align_corners: true };
        assert_eq!(ggml_op_params(&up, 0)[0], 0x101);
        assert_eq!(ggml_op_params(&Op::Tri(TriType::LowerDiag), 0)[0], 2);
        let p = ggml_op_params(&Op::GroupNorm { n_groups: 4, eps: 1e-6 }, 0);
        assert_eq!((p[0], f32::from_bits(p[1] as u32)), (4, 1e-6));
        let p = ggml_op_params(&Op::Acc { nb: [16, 64, 256], offset: 8 }, 0);
        assert_eq!(&p[..5], &[16, 64, 256, 8, 0]);
    }

    #[test]
    fn sequence_and_window_ops_follow_their_builders() {
        assert_eq!(&ggml_op_params(&Op::WinPart { npx: 3, npy: 2, w: 14 }, 0)[..4], &[3, 2, 14, 0]);
        assert_eq!(&ggml_op_params(&Op::WinUnpart { w: 14 }, 0)[..2], &[14, 0]);
        assert_eq!(ggml_op_params(&Op::GatedDeltaNet { states: 4 }, 0)[0], 4);
        let p = ggml_op_params(&Op::GatedLinearAttn { scale: 0.125 }, 0);
        assert_eq!(f32::from_bits(p[0] as u32), 0.125);
        assert_eq!(ggml_op_params(&Op::AddRelPos, 0), [0; N_OP_PARAMS]);
    }

    #[test]
    fn glu_leaves_the_unit_to_the_driver() {
        let p = ggml_op_params(&Op::SwigluOai { alpha: 1.702, limit: 7.0, swapped: true }, 0);
        assert_eq!((p[0], p[1], f32::from_bits(p[3] as u32)), (0, 1, 7.0));
    }
}
