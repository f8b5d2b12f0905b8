//! SUM, SUM_ROWS, MEAN and ARGMAX (`reduce.cu`), with the CPU's dtype rules.

use gantry_engine::{DType, Op, TensorDesc, TensorId};

use super::{BLOCK, Planner, Refusal, is_float, require, src, strides_aligned};
use crate::kernels::{Kernel, Module};

pub fn plan(p: &mut Planner<'_>, node: TensorId, d: &TensorDesc) -> Result<(), Refusal> {
    let (s_id, s) = src(p, d, 0)?;
    let out = match d.op {
        Op::Sum | Op::SumRows => s.dtype,
        Op::Mean => DType::F32,
        _ => DType::I32,
    };
    require(is_float(s.dtype) && d.dtype == out, || format!("{} of {} into {}", d.op.name(), s.dtype, d.dtype))?;
    require(strides_aligned(&s) && strides_aligned(d), || "strides are not whole elements".into())?;
    let mut args = p.args(p.tensor(node)?, &[p.tensor(s_id)?]);
    match d.op {
        Op::Sum => {
            require(d.nelements() == 1, || "the result must have one element".into())?;
            p.launch(Kernel::new(Module::Reduce, "sum_all"), [1, 1, 1], [1024, 1, 1], 0, args);
        }
        Op::SumRows | Op::Mean => {
            require(d.ne == [1, s.ne[1], s.ne[2], s.ne[3]], || {
                format!("result {:?} does not fit source {:?}", d.ne, s.ne)
            })?;
            require(s.nrows() < i32::MAX as usize, || format!("{} rows", s.nrows()))?;
            args.i[0] = i64::from(d.op == Op::Mean);
            p.launch(Kernel::new(Module::Reduce, "sum_rows"), [s.nrows() as u32, 1, 1], [BLOCK, 1, 1], 0, args);
        }
        _ => {
            require(d.ne == [s.ne[1], 1, 1, 1] && s.ne[2] == 1 && s.ne[3] == 1, || {
                format!("result {:?} does not fit source {:?}", d.ne, s.ne)
            })?;
            require(s.ne[1] < i32::MAX as usize, || format!("{} rows", s.ne[1]))?;
            p.launch(Kernel::new(Module::Reduce, "argmax"), [s.ne[1] as u32, 1, 1], [BLOCK, 1, 1], 0, args);
        }
    }
    Ok(())
}
