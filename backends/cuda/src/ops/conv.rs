//! CONV_2D, CONV_2D_DW, CONV_TRANSPOSE_1D / 2D, POOL_1D, PAD_REFLECT_1D and
//! ROLL (`conv.cu`): one thread per result element. The shapes are checked
//! as the CPU checks them, since the kernels index by them.

use gantry_engine::{DType, Op, PoolOp, TensorDesc, TensorId};

use super::{Planner, Refusal, require, src, strides_aligned};
use crate::kernels::{Kernel, Module};

fn kernel(name: &'static str) -> Kernel {
    Kernel::new(Module::Conv, name)
}

pub fn plan(p: &mut Planner<'_>, node: TensorId, d: &TensorDesc) -> Result<(), Refusal> {
    let (a_id, a) = src(p, d, 0)?;
    require(strides_aligned(&a) && strides_aligned(d), || "strides are not whole elements".into())?;
    require(d.dtype == DType::F32, || format!("{} into {}", d.op.name(), d.dtype))?;
    let dst = p.tensor(node)?;
    match d.op {
        Op::Conv2d(conv) | Op::Conv2dDw(conv) => {
            let (x_id, x) = src(p, d, 1)?;
            require(
                matches!(a.dtype, DType::F32 | DType::F16) && x.dtype == DType::F32 && strides_aligned(&x),
                || format!("{} of a {} image with a {} kernel", d.op.name(), x.dtype, a.dtype),
            )?;
            let depthwise = matches!(d.op, Op::Conv2dDw(_));
            let (kc, ic) = (a.ne[2], x.ne[2]);
            let ok = if depthwise { kc == 1 && a.ne[3] == ic && d.ne[2] == ic } else { kc == ic && d.ne[2] == a.ne[3] };
            require(ok && d.ne[3] == x.ne[3], || format!("kernel {:?} and image {:?} into {:?}", a.ne, x.ne, d.ne))?;
            let mut args = p.args(dst, &[p.tensor(a_id)?, p.tensor(x_id)?]);
            let [s, pd, dl] = [conv.stride, conv.pad, conv.dilation];
            args.i[..7].copy_from_slice(&[s[0], s[1], pd[0], pd[1], dl[0], dl[1], u32::from(depthwise)].map(i64::from));
            p.launch_over(kernel("conv_2d"), d.nelements(), args);
        }
        Op::ConvTranspose1d { stride } | Op::ConvTranspose2d { stride } => {
            let (x_id, x) = src(p, d, 1)?;
            require(
                matches!(a.dtype, DType::F32 | DType::F16) && x.dtype == DType::F32 && strides_aligned(&x),
                || format!("{} of a {} input with a {} kernel", d.op.name(), x.dtype, a.dtype),
            )?;
            let two_d = matches!(d.op, Op::ConvTranspose2d { .. });
            let s = stride as usize;
            let [kw, kh, k2, k3] = a.ne;
            let [iw, ih, ic, n] = x.ne;
            let (oc, kic) = if two_d { (k2, k3) } else { (kh, k2) };
            let out = |x: usize, k: usize| if x == 0 { 0 } else { (x - 1) * s + k };
            let expect = if two_d { [out(iw, kw), out(ih, kh), oc, n] } else { [out(iw, kw), oc, 1, 1] };
            require(d.ne == expect && kic == if two_d { ic } else { ih } && s > 0, || {
                format!("kernel {:?} and input {:?} into {:?}", a.ne, x.ne, d.ne)
            })?;
            let mut args = p.args(dst, &[p.tensor(a_id)?, p.tensor(x_id)?]);
            (args.i[0], args.i[1]) = (i64::from(two_d), i64::from(stride));
            p.launch_over(kernel("conv_transpose"), d.nelements(), args);
        }
        Op::Pool1d { op, k, s, p: pad } => {
            require(matches!(a.dtype, DType::F32 | DType::F16) && d.ne[1..] == a.ne[1..], || {
                format!("POOL_1D of {} {:?} into {:?}", a.dtype, a.ne, d.ne)
            })?;
            let mut args = p.args(dst, &[p.tensor(a_id)?]);
            args.i[..4].copy_from_slice(&[k, s, pad, u32::from(op == PoolOp::Avg)].map(i64::from));
            p.launch_over(kernel("pool_1d"), d.nelements(), args);
        }
        Op::PadReflect1d { p0, p1 } => {
            let m0 = a.ne[0];
            let ok = a.dtype == DType::F32
                && d.ne == [m0 + (p0 + p1) as usize, a.ne[1], a.ne[2], a.ne[3]]
                && (p0 as usize) < m0
                && (p1 as usize) < m0;
            require(ok, || format!("PAD_REFLECT_1D of {} {:?} by {p0}, {p1}", a.dtype, a.ne))?;
            let mut args = p.args(dst, &[p.tensor(a_id)?]);
            args.i[0] = i64::from(p0);
            p.launch_over(kernel("pad_reflect_1d"), d.nelements(), args);
        }
        Op::Roll { shift } => {
            require(a.dtype == DType::F32 && d.ne == a.ne && !a.ne.contains(&0), || {
                format!("ROLL of {} {:?} into {:?}", a.dtype, a.ne, d.ne)
            })?;
            let mut args = p.args(dst, &[p.tensor(a_id)?]);
            args.i[..4].copy_from_slice(&shift.map(i64::from));
            p.launch_over(kernel("roll"), d.nelements(), args);
        }
        _ => return Err(format!("{} is not a convolution", d.op.name())),
    }
    Ok(())
}
