//! The plan for SOLVE_TRI (`solve_tri.wgsl`): one invocation per
//! right-hand-side column of one batch, F32 only, with the shapes the CPU
//! checks (the kernel indexes A and B by X's shape).

use gantry_engine::DType;

use super::{Builder, Kernel, Launch, Refusal, groups_for};

type Planned = Result<Option<Launch>, Refusal>;

pub(super) fn solve_tri(b: &mut Builder<'_>) -> Planned {
    b.bind_dst()?;
    let a = b.bind_src(0)?;
    let rhs = b.bind_src(1)?;
    let dst = b.d;
    if [a.dtype, rhs.dtype, dst.dtype].iter().any(|&t| t != DType::F32) {
        return Err(format!("SOLVE_TRI of {} with {} into {} has no wgpu kernel", a.dtype, rhs.dtype, dst.dtype));
    }
    let n = a.ne[0];
    if a.ne != [n, n, dst.ne[2], dst.ne[3]] || rhs.ne != dst.ne || dst.ne[1] != n {
        return Err(format!("SOLVE_TRI of A {:?} with B {:?} does not fit", a.ne, rhs.ne));
    }
    b.finish(Kernel::SolveTri, DType::F32, groups_for(dst.ne[0] * dst.ne[2] * dst.ne[3]))
}
