//! SSM_CONV (one thread per result element) and SSM_SCAN (one thread per
//! state row), in `ssm.cu`. The shapes are checked here as the CPU checks
//! them, since the kernels index by them; SSM_SCAN's state ids are checked
//! by the kernel itself (their values are only known on the device).

use gantry_engine::{DType, Op, TensorDesc, TensorId};

use super::{Planner, Refusal, require, src, strides_aligned};
use crate::kernels::{Kernel, Module};

pub fn plan(p: &mut Planner<'_>, node: TensorId, d: &TensorDesc) -> Result<(), Refusal> {
    match d.op {
        Op::SsmConv => plan_conv(p, node, d),
        Op::SsmScan { states } => plan_scan(p, node, d, states),
        _ => Err(format!("{} is not an SSM op", d.op.name())),
    }
}

fn plan_conv(p: &mut Planner<'_>, node: TensorId, d: &TensorDesc) -> Result<(), Refusal> {
    let (sx_id, sx) = src(p, d, 0)?;
    let (c_id, c) = src(p, d, 1)?;
    require(sx.dtype == DType::F32 && c.dtype == DType::F32 && d.dtype == DType::F32, || {
        format!("SSM_CONV of {} with a {} kernel into {}", sx.dtype, c.dtype, d.dtype)
    })?;
    let (d_conv, d_inner) = (c.ne[0], c.ne[1]);
    let fits = d_conv >= 1
        && sx.ne[0] + 1 == d_conv + d.ne[1]
        && sx.ne[1] == d_inner
        && d.ne == [d_inner, d.ne[1], sx.ne[2], 1]
        && sx.ne[3] == 1;
    require(fits, || format!("SSM_CONV window {:?} with kernel {:?} into {:?}", sx.ne, c.ne, d.ne))?;
    require([&sx, &c, d].iter().all(|t| strides_aligned(t)), || "strides are not whole elements".into())?;
    let args = p.args(p.tensor(node)?, &[p.tensor(sx_id)?, p.tensor(c_id)?]);
    p.launch_over(Kernel::new(Module::Ssm, "ssm_conv"), d.nelements(), args);
    Ok(())
}

fn plan_scan(p: &mut Planner<'_>, node: TensorId, d: &TensorDesc, states: u32) -> Result<(), Refusal> {
    let operands = (0..7).map(|i| src(p, d, i)).collect::<Result<Vec<_>, _>>()?;
    let descs: [TensorDesc; 7] = std::array::from_fn(|i| operands[i].1);
    let [s0, x, dt, a, b, c, idx] = descs;
    require(
        descs[..6].iter().all(|t| t.dtype == DType::F32) && idx.dtype == DType::I32 && d.dtype == DType::F32,
        || format!("SSM_SCAN of {} states and {} ids into {}", s0.dtype, idx.dtype, d.dtype),
    )?;
    let k_states = states as usize;
    let [nc, nr, nh] = [s0.ne[0], s0.ne[1], s0.ne[2]];
    let [nt, ns, ng] = [x.ne[2], x.ne[3], b.ne[1]];
    let state_len = nc * nr * nh;
    let mamba1 = a.ne[0] != 1;
    // The CPU kernel's checks, which the kernel's indexing relies on.
    let fits = x.ne[0] == nr
        && x.ne[1] == nh
        && dt.ne == [nh, nt, ns, 1]
        && b.ne == c.ne
        && b.ne == [nc, ng, nt, ns]
        && (if ng == 0 { nh == 0 } else { nh.is_multiple_of(ng) })
        && a.ne == [a.ne[0], nh, 1, 1]
        && (!mamba1 || (a.ne[0] == nc && k_states == 1))
        && idx.ne == [ns, 1, 1, 1]
        && k_states >= 1
        && d.is_contiguous()
        && Some(d.nelements()) == k_states.checked_mul(state_len * ns).and_then(|n| n.checked_add(x.nelements()));
    require(fits, || format!("SSM_SCAN state {:?}, x {:?}, B {:?}, A {:?} into {:?}", s0.ne, x.ne, b.ne, a.ne, d.ne))?;
    require(descs.iter().chain([d]).all(strides_aligned), || "strides are not whole elements".into())?;
    let srcs = operands.iter().map(|&(t, _)| p.tensor(t)).collect::<Result<Vec<_>, _>>()?;
    let mut args = p.args(p.tensor(node)?, &srcs);
    args.i[0] = i64::from(states);
    p.launch_over(Kernel::new(Module::Ssm, "ssm_scan"), ns * nh * nr, args);
    Ok(())
}
