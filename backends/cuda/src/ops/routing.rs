//! ARGSORT, TOP_K (one thread per element ranks it in its row: rows are
//! bounded, as each costs its length squared) and CUMSUM (one thread per
//! row), all F32 in (`experts.cu`).

use gantry_engine::{DType, Op, SortOrder, TensorDesc, TensorId};

use super::{Planner, Refusal, require, src, strides_aligned};
use crate::kernels::{Kernel, Module};

/// The longest row the ranking sort takes.
const MAX_SORT_ROW: usize = 8192;

pub fn plan(p: &mut Planner<'_>, node: TensorId, d: &TensorDesc) -> Result<(), Refusal> {
    let (a_id, a) = src(p, d, 0)?;
    require(a.dtype == DType::F32 && strides_aligned(&a) && strides_aligned(d), || {
        format!("{} of {} with strides that are not whole elements", d.op.name(), a.dtype)
    })?;
    let (dst, x) = (p.tensor(node)?, p.tensor(a_id)?);
    match d.op {
        Op::Argsort { .. } | Op::TopK => {
            require(d.dtype == DType::I32 && a.ne[1..] == d.ne[1..] && d.ne[0] <= a.ne[0], || {
                format!("{:?} does not sort into {:?}", a.ne, d.ne)
            })?;
            require(a.ne[0] <= MAX_SORT_ROW, || {
                format!("rows of {} elements (the CUDA sort takes {MAX_SORT_ROW})", a.ne[0])
            })?;
            let mut args = p.args(dst, &[x]);
            args.i[0] = i64::from(!matches!(d.op, Op::Argsort { order: SortOrder::Asc }));
            p.launch_over(Kernel::new(Module::Experts, "sort_rows"), a.nelements(), args);
        }
        Op::Cumsum => {
            require(d.dtype == DType::F32 && a.ne == d.ne, || format!("{:?} into {:?}", a.ne, d.ne))?;
            let args = p.args(dst, &[x]);
            p.launch_over(Kernel::new(Module::Experts, "cumsum"), a.nrows(), args);
        }
        _ => return Err(format!("{} is not a routing op", d.op.name())),
    }
    Ok(())
}
