//! FLASH_ATTN_EXT with the vector kernel (`flash_attn.cu`): Q F32, K and V
//! in F32 / F16 / BF16, an optional F32 / F16 mask, optional F32 attention
//! sinks (one logit per head, gpt-oss), V heads up to
//! `FA_MAX_DV` values (the accumulator lives in registers).

use gantry_engine::{DType, TensorDesc, TensorId};

use super::norm::alibi_bases;
use super::{Planner, Refusal, require, src, strides_aligned};
use crate::kernels::{FA_MAX_DV, FA_WARPS, Kernel, Module};

/// Longest K head: Q is staged in shared memory with the warps' partial results.
const MAX_DK: usize = 4096;

pub fn plan(
    p: &mut Planner<'_>,
    node: TensorId,
    d: &TensorDesc,
    [scale, max_bias, softcap]: [f32; 3],
) -> Result<(), Refusal> {
    let (q_id, q) = src(p, d, 0)?;
    let (k_id, k) = src(p, d, 1)?;
    let (v_id, v) = src(p, d, 2)?;
    require(q.dtype == DType::F32 && k.dtype.is_float() && v.dtype.is_float() && d.dtype == DType::F32, || {
        format!("Q {}, K {}, V {} into {}", q.dtype, k.dtype, v.dtype, d.dtype)
    })?;
    let (dk, dv, n_q, n_head, n_batch, n_kv) = (q.ne[0], v.ne[0], q.ne[1], q.ne[2], q.ne[3], k.ne[1]);
    let divides = |a: usize, b: usize| b > 0 && a.is_multiple_of(b);
    let mut ok = k.ne[0] == dk
        && v.ne[1] == n_kv
        && divides(n_head, k.ne[2])
        && divides(n_head, v.ne[2])
        && divides(n_batch, k.ne[3])
        && divides(n_batch, v.ne[3])
        && d.ne == [dv, n_head, n_q, n_batch]
        && d.nb[0] == 4;
    let mask = d.srcs[3].map(|m_id| p.desc(m_id).map(|m| (m_id, m))).transpose()?;
    if let Some((_, m)) = &mask {
        ok &= matches!(m.dtype, DType::F32 | DType::F16)
            && m.ne[0] == n_kv
            && m.ne[1] >= n_q
            && divides(n_head, m.ne[2])
            && divides(n_batch, m.ne[3])
            && strides_aligned(m);
    }
    let sinks = d.srcs[4].map(|s_id| p.desc(s_id).map(|s| (s_id, s))).transpose()?;
    if let Some((_, s)) = &sinks {
        ok &= s.dtype == DType::F32 && s.ne == [n_head, 1, 1, 1] && strides_aligned(s);
    }
    require(ok, || format!("Q {:?}, K {:?}, V {:?} into {:?}", q.ne, k.ne, v.ne, d.ne))?;
    require(dv <= FA_MAX_DV && dk <= MAX_DK, || {
        format!("heads of {dk} / {dv} values (at most {MAX_DK} / {FA_MAX_DV})")
    })?;
    require([&q, &k, &v, d].iter().all(|t| strides_aligned(t)), || "strides are not whole elements".into())?;
    require(n_q < i32::MAX as usize, || format!("{n_q} queries"))?;
    p.check_grid_yz(n_head, n_batch)?;
    let mut args = p.args(p.tensor(node)?, &[p.tensor(q_id)?, p.tensor(k_id)?, p.tensor(v_id)?]);
    if let Some((m_id, _)) = mask {
        args.src[3] = p.tensor(m_id)?;
    }
    if let Some((s_id, _)) = sinks {
        args.src[4] = p.tensor(s_id)?;
    }
    args.i[3] = i64::from(sinks.is_some());
    // ggml folds the softcap into the scale: s = softcap * tanh(qk * scale / softcap).
    args.f[0] = if softcap != 0.0 { scale / softcap } else { scale };
    args.f[1] = softcap;
    args.i[0] = i64::from(mask.is_some());
    if max_bias > 0.0 {
        let (m0, m1, n_head_log2) = alibi_bases(max_bias, n_head);
        (args.f[2], args.f[3], args.i[1], args.i[2]) = (m0, m1, 1, n_head_log2);
    }
    let shared = (dk + FA_WARPS as usize * (dv + 2)) * 4;
    p.launch(
        Kernel::new(Module::FlashAttn, "flash_attn_vec"),
        [n_q as u32, n_head as u32, n_batch as u32],
        [32 * FA_WARPS, 1, 1],
        shared as u32,
        args,
    );
    Ok(())
}
