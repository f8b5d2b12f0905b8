//! Plans for the linear-attention ops with an `S × S` state per head:
//! RWKV_WKV6 (`wkv6.wgsl`), GATED_LINEAR_ATTN (`gla.wgsl`) and RWKV_WKV7
//! (`wkv7.wgsl`), one invocation per (state column or row, head, sequence)
//! through the sequence's tokens. The shapes are checked as the CPU checks
//! them, contiguity included: the kernels index every tensor as a flat
//! array cut by them.

use gantry_engine::{DType, Op};

use super::{Builder, Kernel, Launch, Refusal, groups_for};

type Planned = Result<Option<Launch>, Refusal>;

/// Which of the three ops (each its own shader: they bind different sources).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LinearAttn {
    /// RWKV_WKV6: srcs k, v, r, tf, td, state.
    Wkv6,
    /// GATED_LINEAR_ATTN: srcs k, v, q, g, state.
    Gla,
    /// RWKV_WKV7: srcs r, w, k, v, a, b, state.
    Wkv7,
}

impl LinearAttn {
    /// The number of sources (the state last).
    fn n_srcs(self) -> usize {
        match self {
            LinearAttn::Wkv6 => 6,
            LinearAttn::Gla => 5,
            LinearAttn::Wkv7 => 7,
        }
    }
}

pub(super) fn linear_attn(b: &mut Builder<'_>) -> Planned {
    let name = b.d.op.name();
    let rule = match b.d.op {
        Op::RwkvWkv6 => LinearAttn::Wkv6,
        Op::GatedLinearAttn { scale } => {
            b.params.f[0] = scale;
            LinearAttn::Gla
        }
        Op::RwkvWkv7 => LinearAttn::Wkv7,
        _ => return Err(format!("{name} is not a linear-attention op")),
    };
    let n = rule.n_srcs();
    b.bind_dst()?;
    let mut srcs = Vec::with_capacity(n);
    for i in 0..n {
        srcs.push(b.bind_src(i)?);
    }
    let dst = b.d;
    if srcs.iter().any(|s| s.dtype != DType::F32) || dst.dtype != DType::F32 {
        return Err(format!("{name} has a wgpu kernel for F32 tensors only"));
    }
    // No binding is empty: a node over no tokens (only copied states) is left to the CPU.
    if srcs.iter().any(|s| s.nelements() == 0) {
        return Err(format!("{name} with an empty source has no wgpu kernel"));
    }
    let state_in = srcs[n - 1];
    // The sizes come from k (src 2 of RWKV_WKV7, src 0 of the others), as on the CPU.
    let [s, h, n_t, _] = srcs[if rule == LinearAttn::Wkv7 { 2 } else { 0 }].ne;
    let n_seqs = state_in.ne[1];
    let sizes = s.checked_mul(h).zip(s.checked_mul(n_seqs).and_then(|x| x.checked_add(n_t)));
    let Some((c, rows)) = sizes else { return Err(format!("{name}: sizes overflow")) };
    let per_token_ok = srcs[..n - 1].iter().enumerate().all(|(i, t)| {
        let is_tf = rule == LinearAttn::Wkv6 && i == 3;
        t.ne == if is_tf { [s, h, 1, 1] } else { [s, h, n_t, 1] }
    });
    let state_ok = s.checked_mul(c).and_then(|x| x.checked_mul(n_seqs)) == Some(state_in.nelements());
    let fits = per_token_ok
        && state_ok
        && n_seqs > 0
        && n_t.is_multiple_of(n_seqs)
        && srcs.iter().all(|t| t.is_contiguous())
        && dst.is_contiguous()
        && dst.ne == [c, rows, 1, 1];
    if !fits {
        return Err(format!(
            "{name} of inputs {:?}, state {:?} into {:?} does not fit",
            srcs[0].ne, state_in.ne, dst.ne
        ));
    }
    b.params.u[0] = u32::try_from(n_seqs).map_err(|e| e.to_string())?;
    b.finish(Kernel::LinearAttn(rule), DType::F32, groups_for(s * h * n_seqs))
}
