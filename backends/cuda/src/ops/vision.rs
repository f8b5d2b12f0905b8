//! IM2COL, POOL_2D, UPSCALE, PAD (grid-stride over the result's elements)
//! and GROUP_NORM (one block per group of one sample), in `vision.cu`.

use gantry_engine::{DType, Op, PoolOp, ScaleMode, TensorDesc, TensorId};

use super::{BLOCK, Planner, Refusal, require, src, strides_aligned};
use crate::kernels::{Kernel, Module};

fn kernel(name: &'static str) -> Kernel {
    Kernel::new(Module::Vision, name)
}

pub fn plan(p: &mut Planner<'_>, node: TensorId, d: &TensorDesc) -> Result<(), Refusal> {
    require(strides_aligned(d), || "result strides are not whole elements".into())?;
    let dst = p.tensor(node)?;
    match d.op {
        Op::Im2col { conv, is_2d } => {
            let (_, k) = src(p, d, 0)?;
            let (x_id, x) = src(p, d, 1)?;
            require(
                matches!(x.dtype, DType::F32 | DType::F16)
                    && matches!(d.dtype, DType::F32 | DType::F16)
                    && strides_aligned(&x),
                || format!("IM2COL of a {} image into {}", x.dtype, d.dtype),
            )?;
            let mut args = p.args(dst, &[]);
            args.src[1] = p.tensor(x_id)?;
            let [s, pd, dl] = [conv.stride, conv.pad, conv.dilation];
            args.i = [s[0], s[1], pd[0], pd[1], dl[0], dl[1], k.ne[0] as u32, if is_2d { k.ne[1] as u32 } else { 1 }]
                .map(i64::from);
            args.f[0] = if is_2d { 1.0 } else { 0.0 };
            p.launch_over(kernel("im2col"), d.nelements(), args);
        }
        Op::Pool2d { op, k, s, p: pad } => {
            let (a_id, a) = src(p, d, 0)?;
            require(
                matches!(a.dtype, DType::F32 | DType::F16) && d.dtype == DType::F32 && strides_aligned(&a),
                || format!("POOL_2D of {} into {}", a.dtype, d.dtype),
            )?;
            let mut args = p.args(dst, &[p.tensor(a_id)?]);
            args.i = [k[0], k[1], s[0], s[1], pad[0], pad[1], u32::from(op == PoolOp::Avg), 0].map(i64::from);
            p.launch_over(kernel("pool_2d"), d.nelements(), args);
        }
        Op::Upscale { mode, align_corners } => {
            let (a_id, a) = src(p, d, 0)?;
            require(
                a.dtype == DType::F32 && d.dtype == DType::F32 && strides_aligned(&a) && a.nelements() > 0,
                || format!("UPSCALE of {} {:?}", a.dtype, a.ne),
            )?;
            let mut sf: [f32; 4] = std::array::from_fn(|i| d.ne[i] as f32 / a.ne[i] as f32);
            if align_corners {
                for i in 0..2 {
                    if d.ne[i] > 1 && a.ne[i] > 1 {
                        sf[i] = (d.ne[i] - 1) as f32 / (a.ne[i] - 1) as f32;
                    }
                }
            }
            let mut args = p.args(dst, &[p.tensor(a_id)?]);
            args.f[..4].copy_from_slice(&sf);
            args.f[4] = if align_corners { 0.0 } else { 0.5 };
            args.i[0] = i64::from(mode == ScaleMode::Bilinear);
            p.launch_over(kernel("upscale"), d.nelements(), args);
        }
        Op::Pad { lp, circular, .. } => {
            let (a_id, a) = src(p, d, 0)?;
            // An empty source (zeros only) is left to the CPU.
            require(a.dtype == DType::F32 && strides_aligned(&a) && a.nelements() > 0, || {
                format!("PAD of {} {:?}", a.dtype, a.ne)
            })?;
            let mut args = p.args(dst, &[p.tensor(a_id)?]);
            for q in 0..4 {
                args.i[q] = i64::from(lp[q]);
            }
            args.i[4] = i64::from(circular);
            p.launch_over(kernel("pad"), d.nelements(), args);
        }
        Op::GroupNorm { n_groups, eps } => {
            let (a_id, a) = src(p, d, 0)?;
            require(a.dtype == DType::F32 && a.ne == d.ne && strides_aligned(&a), || {
                format!("GROUP_NORM of {} {:?}", a.dtype, a.ne)
            })?;
            let blocks = u64::from(n_groups) * a.ne[3] as u64;
            require(n_groups > 0 && blocks < i32::MAX as u64, || format!("{blocks} groups"))?;
            let mut args = p.args(dst, &[p.tensor(a_id)?]);
            args.i[0] = i64::from(n_groups);
            args.i[1] = a.ne[2].div_ceil(n_groups as usize) as i64;
            args.f[0] = eps;
            p.launch(kernel("group_norm"), [blocks as u32, 1, 1], [BLOCK, 1, 1], 0, args);
        }
        _ => return Err(format!("{} is not a vision op", d.op.name())),
    }
    Ok(())
}
