//! Plans for row normalizations: NORM, RMS_NORM, L2_NORM, SOFT_MAX, DIAG_MASK_INF.

use gantry_engine::DType;

use super::{Builder, Kernel, Launch, Refusal, groups_for};

type Planned = Result<Option<Launch>, Refusal>;

pub(super) fn norm(b: &mut Builder<'_>, rms: bool, eps: f32) -> Planned {
    b.bind_dst()?;
    let s = b.bind_src(0)?;
    b.params.f[0] = eps;
    b.finish(Kernel::Norm { rms }, DType::F32, s.nrows() as u64)
}

pub(super) fn l2_norm(b: &mut Builder<'_>, eps: f32) -> Planned {
    b.bind_dst()?;
    let s = b.bind_src(0)?;
    b.params.f[0] = eps;
    b.finish(Kernel::L2Norm, DType::F32, s.nrows() as u64)
}

/// ALiBi's per-head slope bases (ggml's `soft_max` and `flash_attn_ext`):
/// `(n_head_log2, m0, m1)`.
pub(super) fn alibi(n_head: usize, max_bias: f32) -> (u32, f32, f32) {
    let n_head_log2 = if n_head == 0 { 1 } else { 1u32 << (usize::BITS - 1 - n_head.leading_zeros()) };
    let m0 = 2f32.powf(-max_bias / n_head_log2 as f32);
    let m1 = 2f32.powf(-(max_bias / 2.0) / n_head_log2 as f32);
    (n_head_log2, m0, m1)
}

pub(super) fn soft_max(b: &mut Builder<'_>, scale: f32, max_bias: f32) -> Planned {
    b.bind_dst()?;
    let s = b.bind_src(0)?;
    if b.d.srcs[1].is_some() {
        b.bind_src(1)?;
    }
    if b.d.srcs[2].is_some() {
        let sinks = b.bind_src(2)?;
        if sinks.dtype != DType::F32 || sinks.ne != [s.ne[2], 1, 1, 1] {
            return Err(format!("sinks {} {:?} for {} heads", sinks.dtype, sinks.ne, s.ne[2]));
        }
    }
    let (n_head_log2, m0, m1) = alibi(s.ne[2], max_bias);
    b.params.f[..4].copy_from_slice(&[scale, max_bias, m0, m1]);
    b.params.u[0] = n_head_log2;
    b.finish(Kernel::SoftMax, DType::F32, s.nrows() as u64)
}

pub(super) fn diag_mask_inf(b: &mut Builder<'_>, n_past: usize) -> Planned {
    b.bind_dst()?;
    b.bind_src(0)?;
    b.params.u[0] = u32::try_from(n_past).unwrap_or(u32::MAX);
    b.finish(Kernel::DiagMaskInf, DType::F32, groups_for(b.d.nelements()))
}

#[cfg(test)]
mod tests {
    #[test]
    fn alibi_bases() {
        let (n, m0, m1) = super::alibi(12, 8.0);
        assert_eq!(n, 8);
        assert!((m0 - 0.5).abs() < 1e-6, "2^(-8/8)");
        assert!((m1 - 2f32.powf(-0.5)).abs() < 1e-6);
    }
}
