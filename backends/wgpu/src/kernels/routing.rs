//! Plans for expert routing's row ops: ARGSORT and TOP_K (ranked by one
//! invocation per element, so rows are bounded) and CUMSUM (one invocation
//! per row).

use gantry_engine::{DType, SortOrder};

use super::{Builder, Kernel, Launch, Refusal, groups_for};

type Planned = Result<Option<Launch>, Refusal>;

/// The longest row the ranking sort takes: each element compares itself
/// with every other, so a row costs its length squared.
pub(super) const MAX_SORT_ROW: usize = 8192;

pub(super) fn sort(b: &mut Builder<'_>, order: SortOrder) -> Planned {
    b.bind_dst()?;
    let a = b.bind_src(0)?;
    if a.dtype != DType::F32 || b.d.dtype != DType::I32 {
        return Err(format!("{} sorts f32 rows into i32 indices", b.d.op.name()));
    }
    if a.ne[0] > MAX_SORT_ROW {
        return Err(format!("rows of {} elements are longer than the wgpu sort takes ({MAX_SORT_ROW})", a.ne[0]));
    }
    b.params.u[0] = u32::from(order == SortOrder::Desc);
    b.finish(Kernel::Sort, DType::F32, groups_for(a.nelements()))
}

pub(super) fn cumsum(b: &mut Builder<'_>) -> Planned {
    b.bind_dst()?;
    let a = b.bind_src(0)?;
    if a.dtype != DType::F32 {
        return Err(format!("CUMSUM of {} has no wgpu kernel", a.dtype));
    }
    b.finish(Kernel::Cumsum, DType::F32, groups_for(a.ne[1] * a.ne[2] * a.ne[3]))
}
