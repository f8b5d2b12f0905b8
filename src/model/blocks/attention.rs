//! Multi-head attention over keys and values with an additive mask:
//! grouped-query (fewer KV heads than query heads), logit soft-capping,
//! causal or bidirectional by what the mask hides ([`super::mask`]), and
//! computed either fused or as explicit products.

use gantry_engine::{Context, TensorId};

use crate::{Error, Result};

/// How a graph computes attention (llama.cpp's `--flash-attn on|off`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Attention {
    /// One FLASH_ATTN_EXT node per layer: scores never materialised.
    #[default]
    Flash,
    /// The scores as a product `K·Q`, a masked soft max, and the product
    /// with `V` (what llama.cpp runs without flash attention).
    Explicit,
}

/// The shape and scalars of one attention layer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AttentionSpec {
    /// Query heads.
    pub n_head: usize,
    /// Key/value heads (`n_head` a multiple of it).
    pub n_head_kv: usize,
    /// Width of each head.
    pub head_dim: usize,
    /// Multiplies `Q·K` (usually `1 / sqrt(head_dim)`).
    pub kq_scale: f32,
    /// Logit soft-capping `c · tanh(s / c)` (0 = off).
    pub softcap: f32,
    /// Fused or explicit.
    pub attention: Attention,
}

/// `softmax(Q·K · scale + mask) · V` per head; with `sinks` (F32
/// `[n_head]`, gpt-oss), each head's logit joins its softmax with no value
/// of its own, so the keys' weights sum to less than one.
///
/// `q` is `[head_dim, n_head, n_q, n_seq]`; `k` and `v` are
/// `[head_dim, n_kv, n_head_kv, n_seq]` (views of a cache or of projections);
/// `mask` is F16 `[n_kv, n_q, 1, n_seq]`. The result is
/// `[head_dim * n_head, n_q * n_seq]`, heads merged, ready for the output
/// projection.
pub fn attend(
    ctx: &mut Context,
    spec: &AttentionSpec,
    q: TensorId,
    k: TensorId,
    v: TensorId,
    mask: TensorId,
    sinks: Option<TensorId>,
) -> Result<TensorId> {
    let (hd, nh) = (spec.head_dim, spec.n_head);
    let dq = *ctx.desc(q)?;
    if dq.ne[0] != hd || dq.ne[1] != nh || spec.n_head_kv == 0 || !nh.is_multiple_of(spec.n_head_kv) {
        return Err(Error::Model(format!("attention: queries {:?} do not fit {spec:?}", dq.ne)));
    }
    let (n_q, n_seq) = (dq.ne[2], dq.ne[3]);
    // [head_dim, n_q, n_head, n_seq]: each query head's rows together.
    let qp = ctx.permute(q, [0, 2, 1, 3])?;
    match spec.attention {
        Attention::Flash => {
            let attn = match sinks {
                // Only the CPU has this kernel; the scheduler places the
                // node there when the layer's device refuses it.
                Some(s) => ctx.flash_attn_ext_sinks(qp, k, v, Some(mask), s, spec.kq_scale, 0.0, spec.softcap)?,
                None => ctx.flash_attn_ext(qp, k, v, Some(mask), spec.kq_scale, 0.0, spec.softcap)?,
            };
            Ok(ctx.reshape(attn, [hd * nh, n_q * n_seq])?)
        }
        Attention::Explicit => {
            // [n_kv, n_q, n_head, n_seq]: each KV head's keys serve n_head / n_head_kv query heads.
            let kq = ctx.mul_mat(k, qp)?;
            let kq = if spec.softcap > 0.0 {
                let s = ctx.scale(kq, spec.kq_scale / spec.softcap, 0.0)?;
                let s = ctx.tanh(s)?;
                let s = ctx.scale(s, spec.softcap, 0.0)?;
                soft_max(ctx, s, mask, sinks, 1.0)?
            } else {
                soft_max(ctx, kq, mask, sinks, spec.kq_scale)?
            };
            // V with the keys as its columns, [n_kv, head_dim, n_head_kv, n_seq].
            let vt = ctx.transpose(v)?;
            let vt = ctx.cont(vt)?;
            let kqv = ctx.mul_mat(vt, kq)?; // [head_dim, n_q, n_head, n_seq]
            let merged = ctx.permute(kqv, [0, 2, 1, 3])?; // [head_dim, n_head, n_q, n_seq]
            Ok(ctx.cont_shape(merged, [hd * nh, n_q * n_seq])?)
        }
    }
}

/// The masked soft max of the scores, with the sinks where there are some.
fn soft_max(ctx: &mut Context, kq: TensorId, mask: TensorId, sinks: Option<TensorId>, scale: f32) -> Result<TensorId> {
    Ok(match sinks {
        Some(s) => ctx.soft_max_ext_sinks(kq, Some(mask), s, scale, 0.0)?,
        None => ctx.soft_max_ext(kq, Some(mask), scale, 0.0)?,
    })
}
