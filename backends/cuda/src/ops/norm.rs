//! NORM, RMS_NORM, L2_NORM and SOFT_MAX, one block per row (`norm.cu`).

use gantry_engine::{DType, Op, TensorDesc, TensorId};

use super::{BLOCK, Planner, Refusal, is_float, require, src, strides_aligned};
use crate::kernels::{Kernel, Module};
use crate::launch::TensorArg;

/// ALiBi's two bases and the largest power of two not above `n_head`
/// (the CPU's `alibi_slope`, split so the kernel raises them per head).
pub fn alibi_bases(max_bias: f32, n_head: usize) -> (f32, f32, i64) {
    let n_head_log2 = 1usize << (n_head.max(1) as f32).log2().floor() as u32;
    let m0 = 2f32.powf(-max_bias / n_head_log2 as f32);
    let m1 = 2f32.powf(-(max_bias / 2.0) / n_head_log2 as f32);
    (m0, m1, n_head_log2 as i64)
}

pub fn plan(p: &mut Planner<'_>, node: TensorId, d: &TensorDesc) -> Result<(), Refusal> {
    let (s_id, s) = src(p, d, 0)?;
    require(is_float(s.dtype) && s.dtype == d.dtype, || format!("{} of {} into {}", d.op.name(), s.dtype, d.dtype))?;
    require(strides_aligned(&s) && strides_aligned(d), || "strides are not whole elements".into())?;
    require(s.ne == d.ne, || format!("source shape {:?} differs from the result's {:?}", s.ne, d.ne))?;
    require(s.nrows() < i32::MAX as usize, || format!("{} rows", s.nrows()))?;
    let grid = [s.nrows() as u32, 1, 1];
    let dst = p.tensor(node)?;
    let x = p.tensor(s_id)?;
    match d.op {
        Op::Norm { eps } | Op::RmsNorm { eps } => {
            let mut args = p.args(dst, &[x]);
            args.f[0] = eps;
            args.i[0] = i64::from(matches!(d.op, Op::RmsNorm { .. }));
            p.launch(Kernel::new(Module::Norm, "norm_rows"), grid, [BLOCK, 1, 1], 0, args);
        }
        Op::L2Norm { eps } => {
            let mut args = p.args(dst, &[x]);
            args.f[0] = eps;
            args.i[0] = 2;
            p.launch(Kernel::new(Module::Norm, "norm_rows"), grid, [BLOCK, 1, 1], 0, args);
        }
        Op::SoftMax { scale, max_bias } => {
            let mask = match d.srcs[1] {
                None => None,
                Some(m_id) => {
                    let m = p.desc(m_id)?;
                    require(matches!(m.dtype, DType::F32 | DType::F16) && strides_aligned(&m), || {
                        format!("a {} mask", m.dtype)
                    })?;
                    let fits = m.ne[0] == s.ne[0]
                        && m.ne[1] >= s.ne[1]
                        && m.ne[2] > 0
                        && m.ne[3] > 0
                        && s.ne[2].is_multiple_of(m.ne[2])
                        && s.ne[3].is_multiple_of(m.ne[3]);
                    require(fits, || format!("mask {:?} does not fit logits {:?}", m.ne, s.ne))?;
                    Some(p.tensor(m_id)?)
                }
            };
            let sinks = match d.srcs[2] {
                None => None,
                Some(k_id) => {
                    let k = p.desc(k_id)?;
                    require(k.dtype == DType::F32 && k.ne == [s.ne[2], 1, 1, 1], || {
                        format!("sinks {} {:?} for {} heads", k.dtype, k.ne, s.ne[2])
                    })?;
                    Some(p.tensor(k_id)?)
                }
            };
            // The mask in slot 1 (zeros without one), the sinks in slot 2.
            let none = TensorArg { data: 0, ..x };
            let mut args = p.args(dst, &[x, mask.unwrap_or(none), sinks.unwrap_or(none)]);
            args.i[0] = i64::from(mask.is_some());
            args.i[3] = i64::from(sinks.is_some());
            args.f[0] = scale;
            if max_bias > 0.0 && mask.is_some() {
                let (m0, m1, n_head_log2) = alibi_bases(max_bias, s.ne[2]);
                (args.f[1], args.f[2], args.i[1], args.i[2]) = (m0, m1, 1, n_head_log2);
            }
            p.launch(Kernel::new(Module::Norm, "soft_max"), grid, [BLOCK, 1, 1], 0, args);
        }
        _ => return Err(format!("{} is not a row normalization", d.op.name())),
    }
    Ok(())
}
