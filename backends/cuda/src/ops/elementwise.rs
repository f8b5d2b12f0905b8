//! Unary functions, SCALE, CLAMP, LEAKY_RELU, XIELU, binary ops, GLUs (SWIGLU_OAI too), DIAG_MASK_INF and
//! DIAG_MASK_ZERO: the
//! CPU's dtype rules, one thread per result element (`elementwise.cu`).

use gantry_engine::{DType, Op, TensorDesc, TensorId, tensor::can_repeat};

use super::{Planner, Refusal, is_float, require, src, strides_aligned};
use crate::kernels::constants::{
    GLU_SWIGLU_OAI, UNARY_CLAMP, UNARY_LEAKY_RELU, UNARY_SCALE, UNARY_XIELU, binary_code, glu_code, unary_code,
};
use crate::kernels::{Kernel, Module};

pub fn plan(p: &mut Planner<'_>, node: TensorId, d: &TensorDesc) -> Result<(), Refusal> {
    let (a_id, a) = src(p, d, 0)?;
    require(is_float(a.dtype) && a.dtype == d.dtype, || format!("{} from {} into {}", d.op.name(), a.dtype, d.dtype))?;
    require(strides_aligned(&a) && strides_aligned(d), || "strides are not whole elements".into())?;
    let dst = p.tensor(node)?;
    let x = p.tensor(a_id)?;
    let n = d.nelements();
    match d.op {
        Op::Unary(_) | Op::Scale { .. } | Op::Clamp { .. } | Op::LeakyRelu { .. } | Op::Xielu { .. } => {
            require(a.ne == d.ne, || format!("source shape {:?} differs from the result's {:?}", a.ne, d.ne))?;
            let mut args = p.args(dst, &[x]);
            match d.op {
                Op::Unary(u) => args.i[0] = unary_code(u),
                Op::Scale { scale, bias } => (args.i[0], args.f[0], args.f[1]) = (UNARY_SCALE, scale, bias),
                Op::Clamp { min, max } => (args.i[0], args.f[0], args.f[1]) = (UNARY_CLAMP, min, max),
                Op::LeakyRelu { negative_slope } => (args.i[0], args.f[0]) = (UNARY_LEAKY_RELU, negative_slope),
                Op::Xielu { alpha_n, alpha_p, beta, eps } => {
                    args.i[0] = UNARY_XIELU;
                    args.f[..4].copy_from_slice(&[alpha_n, alpha_p, beta, eps]);
                }
                _ => {}
            }
            p.launch_over(Kernel::new(Module::Elementwise, "unary"), n, args);
        }
        Op::Binary(op) => {
            let (b_id, b) = src(p, d, 1)?;
            require(b.dtype == DType::F32 || b.dtype == a.dtype, || format!("src1 {} with src0 {}", b.dtype, a.dtype))?;
            require(strides_aligned(&b), || "strides are not whole elements".into())?;
            require(a.ne == d.ne && can_repeat(b.ne, d.ne), || {
                format!("{:?} (op) {:?} does not broadcast to {:?}", a.ne, b.ne, d.ne)
            })?;
            let y = p.tensor(b_id)?;
            let mut args = p.args(dst, &[x, y]);
            args.i[0] = binary_code(op);
            p.launch_over(Kernel::new(Module::Elementwise, "binary"), n, args);
        }
        Op::Glu { op, swapped } => {
            let rows_match = a.ne[1..] == d.ne[1..];
            let mut args = match d.srcs[1] {
                None => {
                    require(rows_match && a.ne[0] == 2 * d.ne[0], || {
                        format!("{:?} does not halve into {:?}", a.ne, d.ne)
                    })?;
                    p.args(dst, &[x])
                }
                Some(g_id) => {
                    let g = p.desc(g_id)?;
                    require(g.dtype == a.dtype && strides_aligned(&g), || {
                        format!("gate {} with input {}", g.dtype, a.dtype)
                    })?;
                    require(a.ne == d.ne && g.ne == d.ne, || {
                        format!("{:?} and gate {:?} into {:?}", a.ne, g.ne, d.ne)
                    })?;
                    let gate = p.tensor(g_id)?;
                    let mut args = p.args(dst, &[x, gate]);
                    args.i[2] = 1;
                    args
                }
            };
            args.i[0] = glu_code(op);
            args.i[1] = i64::from(swapped);
            p.launch_over(Kernel::new(Module::Elementwise, "glu"), n, args);
        }
        Op::SwigluOai { alpha, limit, swapped } => {
            require(a.dtype == DType::F32, || format!("SWIGLU_OAI of {}", a.dtype))?;
            let rows_match = a.ne[1..] == d.ne[1..];
            let mut args = match d.srcs[1] {
                None => {
                    require(rows_match && a.ne[0] == 2 * d.ne[0], || {
                        format!("{:?} does not halve into {:?}", a.ne, d.ne)
                    })?;
                    p.args(dst, &[x])
                }
                Some(g_id) => {
                    let g = p.desc(g_id)?;
                    require(g.dtype == DType::F32 && strides_aligned(&g) && a.ne == d.ne && g.ne == d.ne, || {
                        format!("{:?} and gate {} {:?} into {:?}", a.ne, g.dtype, g.ne, d.ne)
                    })?;
                    let mut args = p.args(dst, &[x, p.tensor(g_id)?]);
                    args.i[2] = 1;
                    args
                }
            };
            (args.i[0], args.i[1]) = (GLU_SWIGLU_OAI, i64::from(swapped));
            (args.f[0], args.f[1]) = (alpha, limit);
            p.launch_over(Kernel::new(Module::Elementwise, "glu"), n, args);
        }
        Op::DiagMaskInf { n_past } | Op::DiagMaskZero { n_past } => {
            require(a.ne == d.ne, || format!("source shape {:?} differs from the result's {:?}", a.ne, d.ne))?;
            let mut args = p.args(dst, &[x]);
            args.i[0] = i64::try_from(n_past).unwrap_or(i64::MAX);
            args.i[1] = i64::from(matches!(d.op, Op::DiagMaskZero { .. }));
            p.launch_over(Kernel::new(Module::Elementwise, "diag_mask_inf"), n, args);
        }
        _ => return Err(format!("{} is not element-wise", d.op.name())),
    }
    Ok(())
}
