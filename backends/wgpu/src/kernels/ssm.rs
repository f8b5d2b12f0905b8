//! Plans for the state-space (Mamba) ops: SSM_CONV (one invocation per
//! result element) and SSM_SCAN (one invocation per state row, through
//! every token of its sequence). Both check the shapes the CPU checks: the
//! kernels index by them and a node may come from somewhere other than the
//! builder.

use gantry_engine::{DType, Op};

use super::{Builder, Kernel, Launch, Refusal, groups_for};

type Planned = Result<Option<Launch>, Refusal>;

pub(super) fn ssm_conv(b: &mut Builder<'_>) -> Planned {
    b.bind_dst()?;
    let sx = b.bind_src(0)?;
    let c = b.bind_src(1)?;
    if [sx.dtype, c.dtype, b.d.dtype].iter().any(|&t| t != DType::F32) {
        return Err(format!(
            "SSM_CONV of {} with a {} kernel into {} has no wgpu kernel",
            sx.dtype, c.dtype, b.d.dtype
        ));
    }
    let (d_conv, d_inner, dst) = (c.ne[0], c.ne[1], b.d.ne);
    let fits = d_conv >= 1
        && sx.ne[0] + 1 == d_conv + dst[1]
        && sx.ne[1] == d_inner
        && c.ne[2] == 1
        && c.ne[3] == 1
        && dst == [d_inner, dst[1], sx.ne[2], 1]
        && sx.ne[3] == 1;
    if !fits {
        return Err(format!("SSM_CONV of {:?} with kernel {:?} into {dst:?} does not fit", sx.ne, c.ne));
    }
    b.finish(Kernel::SsmConv, DType::F32, groups_for(b.d.nelements()))
}

pub(super) fn ssm_scan(b: &mut Builder<'_>) -> Planned {
    let Op::SsmScan { states } = b.d.op else { return Err("not an SSM_SCAN".into()) };
    b.bind_dst()?;
    let mut srcs = Vec::with_capacity(7);
    for i in 0..7 {
        srcs.push(b.bind_src(i)?);
    }
    let [s0, x, dt, a, bm, c, ids] = srcs[..] else { return Err("SSM_SCAN needs seven sources".into()) };
    if srcs[..6].iter().any(|s| s.dtype != DType::F32) || ids.dtype != DType::I32 || b.d.dtype != DType::F32 {
        return Err("SSM_SCAN has a wgpu kernel for F32 tensors and I32 ids only".into());
    }
    // No binding is empty: a scan over no tokens (only copied states) is left to the CPU.
    if srcs.iter().any(|s| s.nelements() == 0) {
        return Err("SSM_SCAN with an empty source has no wgpu kernel".into());
    }
    let k_states = states as usize;
    let [nc, nr, nh] = [s0.ne[0], s0.ne[1], s0.ne[2]];
    let [nt, ns, ng] = [x.ne[2], x.ne[3], bm.ne[1]];
    let mamba1 = a.ne[0] != 1;
    let y_len = x.nelements();
    let fits = x.ne[0] == nr
        && x.ne[1] == nh
        && dt.ne == [nh, nt, ns, 1]
        && bm.ne == c.ne
        && bm.ne == [nc, ng, nt, ns]
        && ng >= 1
        && nh.is_multiple_of(ng)
        && a.ne == [a.ne[0], nh, 1, 1]
        && (!mamba1 || (a.ne[0] == nc && k_states == 1))
        && ids.ne == [ns, 1, 1, 1]
        && k_states >= 1
        && b.d.is_contiguous()
        && Some(b.d.nelements()) == k_states.checked_mul(nc * nr * nh * ns).and_then(|n| n.checked_add(y_len));
    if !fits {
        return Err(format!("SSM_SCAN of state {:?}, x {:?}, B {:?}, A {:?} does not fit", s0.ne, x.ne, bm.ne, a.ne));
    }
    let heads_per_group = u32::try_from(nh / ng).map_err(|e| e.to_string())?;
    b.params.u[..3].copy_from_slice(&[states, heads_per_group, u32::from(mamba1)]);
    b.finish(Kernel::SsmScan, DType::F32, groups_for(nr * nh * ns))
}
