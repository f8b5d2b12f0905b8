//! Plans for the vision and diffusion ops wgpu computes: IM2COL, POOL_1D, POOL_2D,
//! UPSCALE, PAD (one invocation per result element) and GROUP_NORM (one
//! workgroup per group of one sample).

use gantry_engine::{ConvParams, DType, Op, PoolOp, ScaleMode};

use super::{Builder, Kernel, Launch, Refusal, groups_for};

type Planned = Result<Option<Launch>, Refusal>;

pub(super) fn im2col(b: &mut Builder<'_>, conv: ConvParams, is_2d: bool) -> Planned {
    let (_, kernel) = b.src(0)?;
    let (kw, kh) = (kernel.ne[0], if is_2d { kernel.ne[1] } else { 1 });
    b.bind_dst()?;
    let image = b.bind_src(1)?;
    if !matches!(image.dtype, DType::F32 | DType::F16) {
        return Err(format!("IM2COL of a {} image has no wgpu kernel", image.dtype));
    }
    let [s, p, d] = [conv.stride, conv.pad, conv.dilation];
    let k = [u32::try_from(kw), u32::try_from(kh)];
    let [Ok(kw), Ok(kh)] = k else { return Err("kernel too large for 32-bit indices".into()) };
    b.params.u = [s[0], s[1], p[0], p[1], d[0], d[1], kw, kh];
    b.finish(Kernel::Im2col { is_2d }, DType::F32, groups_for(b.d.nelements()))
}

/// POOL_2D, or POOL_1D (`two_d` false: a window of one row, whose average
/// divides by the taps inside the input, as the CPU's).
pub(super) fn pool(b: &mut Builder<'_>, op: PoolOp, k: [u32; 2], s: [u32; 2], p: [u32; 2], two_d: bool) -> Planned {
    let name = b.d.op.name();
    b.bind_dst()?;
    let a = b.bind_src(0)?;
    if !matches!(a.dtype, DType::F32 | DType::F16) || b.d.dtype != DType::F32 {
        return Err(format!("{name} of {} has no wgpu kernel", a.dtype));
    }
    let planes_match = if two_d { b.d.ne[2..] == a.ne[2..] } else { b.d.ne[1..] == a.ne[1..] };
    if !planes_match {
        return Err(format!("{name} of {:?} into {:?} does not fit", a.ne, b.d.ne));
    }
    b.params.u = [k[0], k[1], s[0], s[1], p[0], p[1], u32::from(op == PoolOp::Avg), u32::from(!two_d)];
    b.finish(Kernel::Pool2d, DType::F32, groups_for(b.d.nelements()))
}

pub(super) fn upscale(b: &mut Builder<'_>, mode: ScaleMode, align_corners: bool) -> Planned {
    b.bind_dst()?;
    let a = b.bind_src(0)?;
    if a.dtype != DType::F32 || a.nelements() == 0 {
        return Err(format!("UPSCALE of {} {:?} has no wgpu kernel", a.dtype, a.ne));
    }
    let (ne, src) = (b.d.ne, a.ne);
    let mut sf: [f32; 4] = std::array::from_fn(|i| ne[i] as f32 / src[i] as f32);
    if align_corners {
        for i in 0..2 {
            if ne[i] > 1 && src[i] > 1 {
                sf[i] = (ne[i] - 1) as f32 / (src[i] - 1) as f32;
            }
        }
    }
    b.params.f[..4].copy_from_slice(&sf);
    b.params.f[4] = if align_corners { 0.0 } else { 0.5 };
    b.params.u[0] = u32::from(mode == ScaleMode::Bilinear);
    b.finish(Kernel::Upscale, DType::F32, groups_for(b.d.nelements()))
}

pub(super) fn pad(b: &mut Builder<'_>) -> Planned {
    let Op::Pad { lp, circular, .. } = b.d.op else { return Err("not a PAD".into()) };
    b.bind_dst()?;
    let (_, a) = b.src(0)?;
    if a.dtype != DType::F32 {
        return Err(format!("PAD of {} {:?} has no wgpu kernel", a.dtype, a.ne));
    }
    // An empty source cannot be bound (no binding is empty) and pads to
    // zeros only (the CPU's result): a FILL of zeros, reading nothing.
    if a.nelements() == 0 {
        b.params.f[0] = 0.0;
        return b.finish(Kernel::IndexOp(super::small::IndexOp::Fill), DType::F32, groups_for(b.d.nelements()));
    }
    b.bind_src(0)?;
    b.params.u[..4].copy_from_slice(&lp);
    b.params.u[4] = u32::from(circular);
    b.finish(Kernel::Pad, DType::F32, groups_for(b.d.nelements()))
}

pub(super) fn group_norm(b: &mut Builder<'_>, n_groups: u32, eps: f32) -> Planned {
    b.bind_dst()?;
    let a = b.bind_src(0)?;
    if a.dtype != DType::F32 {
        return Err(format!("GROUP_NORM of {} has no wgpu kernel", a.dtype));
    }
    let per_group = u32::try_from(a.ne[2].div_ceil(n_groups.max(1) as usize)).map_err(|e| e.to_string())?;
    b.params.u[0] = n_groups;
    b.params.u[1] = per_group;
    b.params.f[0] = eps;
    b.finish(Kernel::GroupNorm, DType::F32, u64::from(n_groups) * a.ne[3] as u64)
}
