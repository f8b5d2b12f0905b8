//! ROPE (`rope.cu`): F32 and F16, both modes, YaRN, frequency factors.

use gantry_engine::{DType, RopeMode, RopeParams, TensorDesc, TensorId};

use super::{Planner, Refusal, require, src, strides_aligned};
use crate::kernels::{Kernel, Module};

pub fn plan(p: &mut Planner<'_>, node: TensorId, d: &TensorDesc, rp: &RopeParams) -> Result<(), Refusal> {
    let (x_id, x) = src(p, d, 0)?;
    let (pos_id, pos) = src(p, d, 1)?;
    require(matches!(x.dtype, DType::F32 | DType::F16) && x.dtype == d.dtype && pos.dtype == DType::I32, || {
        format!("ROPE of {} with {} positions into {}", x.dtype, pos.dtype, d.dtype)
    })?;
    let n_dims = rp.n_dims;
    require(
        x.ne == d.ne && pos.ne[0] == x.ne[2] && n_dims > 0 && n_dims.is_multiple_of(2) && n_dims <= x.ne[0],
        || format!("{:?} with {} positions and n_dims {n_dims} do not fit", x.ne, pos.nelements()),
    )?;
    require(rp.freq_base > 0.0, || format!("freq_base {}", rp.freq_base))?;
    require(strides_aligned(&x) && strides_aligned(&pos) && strides_aligned(d), || {
        "strides are not whole elements".into()
    })?;
    let mut srcs = vec![p.tensor(x_id)?, p.tensor(pos_id)?];
    if let Some(f_id) = d.srcs[2] {
        let f = p.desc(f_id)?;
        require(f.dtype == DType::F32 && f.ne[0] >= n_dims / 2 && strides_aligned(&f), || {
            format!("{} {} frequency factors for n_dims {n_dims}", f.ne[0], f.dtype)
        })?;
        srcs.push(p.tensor(f_id)?);
    }
    let mut args = p.args(p.tensor(node)?, &srcs);
    let corr = rp.yarn_corr_dims();
    args.f[..6].copy_from_slice(&[rp.freq_base, rp.freq_scale, rp.ext_factor, rp.attn_factor, corr[0], corr[1]]);
    args.i[0] = n_dims as i64;
    args.i[1] = i64::from(rp.mode == RopeMode::Neox);
    args.i[2] = i64::from(d.srcs[2].is_some());
    let per_row = n_dims / 2 + (x.ne[0] - n_dims);
    p.launch_over(Kernel::new(Module::Rope, "rope"), per_row * x.nrows(), args);
    Ok(())
}
