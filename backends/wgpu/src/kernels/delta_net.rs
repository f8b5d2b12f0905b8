//! The plan for GATED_DELTA_NET (`delta_net.wgsl`): one invocation per
//! (state row along v, head, sequence) through every token. The shapes
//! are checked as the CPU checks them (q, k and v with dense rows, any
//! strides): the kernel indexes every source by them.

use gantry_engine::{DType, Op, TensorDesc};

use super::{Builder, Kernel, Launch, Refusal, groups_for};

type Planned = Result<Option<Launch>, Refusal>;

pub(super) fn gated_delta_net(b: &mut Builder<'_>) -> Planned {
    let Op::GatedDeltaNet { states } = b.d.op else { return Err("not a GATED_DELTA_NET".into()) };
    b.bind_dst()?;
    let mut srcs = Vec::with_capacity(6);
    for i in 0..6 {
        srcs.push(b.bind_src(i)?);
    }
    let [q, k, v, g, beta, state] = srcs[..] else { return Err("GATED_DELTA_NET needs six sources".into()) };
    let dst = b.d;
    if srcs.iter().any(|s| s.dtype != DType::F32) || dst.dtype != DType::F32 {
        return Err("GATED_DELTA_NET has a wgpu kernel for F32 tensors only".into());
    }
    // No binding is empty: a node over no tokens (only copied states) is left to the CPU.
    if srcs.iter().any(|s| s.nelements() == 0) {
        return Err("GATED_DELTA_NET with an empty source has no wgpu kernel".into());
    }
    let k_states = states as usize;
    let [s, h, n_t, n_seqs] = v.ne;
    let qk_ok = |t: &TensorDesc| {
        let [sq, hq, tq, nq] = t.ne;
        let heads_ok = if hq == 0 { h == 0 } else { h.is_multiple_of(hq) };
        let seqs_ok = if nq == 0 { n_seqs == 0 } else { n_seqs.is_multiple_of(nq) };
        sq == s && tq == n_t && heads_ok && seqs_ok
    };
    let rows_dense = |t: &TensorDesc| t.ne[0] <= 1 || t.nb[0] == t.dtype.bytes_per_block();
    let (y_len, state_len) = (v.nelements(), state.nelements());
    let fits = [q, k, v].iter().all(|t| rows_dense(t))
        && qk_ok(q)
        && qk_ok(k)
        && (g.ne[0] == 1 || g.ne[0] == s)
        && g.ne[1..] == [h, n_t, n_seqs]
        && beta.ne == [1, h, n_t, n_seqs]
        && state.ne == [s, s, h, n_seqs]
        && k_states >= 1
        && dst.is_contiguous()
        && Some(dst.nelements()) == k_states.checked_mul(state_len).and_then(|n| n.checked_add(y_len));
    if !fits {
        return Err(format!(
            "GATED_DELTA_NET of q {:?}, k {:?}, v {:?}, state {:?} does not fit",
            q.ne, k.ne, v.ne, state.ne
        ));
    }
    let per = |t: &TensorDesc| u32::try_from(n_seqs / t.ne[3].max(1)).map_err(|e| e.to_string());
    let kda = g.ne[0] == s && s != 1;
    b.params.u[..4].copy_from_slice(&[states, per(q)?, per(k)?, u32::from(kda)]);
    b.params.f[0] = 1.0 / (s as f32).sqrt();
    b.finish(Kernel::DeltaNet, DType::F32, groups_for(s * h * n_seqs))
}
