//! Plans for row gathers and scatters: GET_ROWS, SET_ROWS.

use gantry_engine::DType;

use super::shader::Store;
use super::{Builder, Kernel, Launch, QUANTIZED, Refusal, groups_for, quantize_groups};

type Planned = Result<Option<Launch>, Refusal>;

pub(super) fn get_rows(b: &mut Builder<'_>) -> Planned {
    b.bind_dst()?;
    let idx = b.bind_src(1)?;
    let (t, a) = b.src(0)?;
    if idx.ne[2] > a.ne[3] {
        return Err(format!("indices over {} batches of {} source batches", idx.ne[2], a.ne[3]));
    }
    if QUANTIZED.contains(&a.dtype) {
        b.bind(1, t, a, Store::Bytes)?;
        return b.finish(Kernel::GetRowsQuant, a.dtype, groups_for(b.d.nelements() / 8));
    }
    b.bind_src(0)?;
    b.finish(Kernel::GetRows, DType::F32, groups_for(b.d.nelements()))
}

/// SET_ROWS's node is a view of the destination tensor; its sources are
/// the rows and the indices.
pub(super) fn set_rows(b: &mut Builder<'_>) -> Planned {
    if b.d.dtype.is_quantized() {
        let rows = b.bind_src(0)?;
        b.bind_src(1)?;
        b.bind_quantized_dst(rows)?;
        let blocks = rows.nelements() / 32;
        return b.finish(Kernel::Quantize { set_rows: true }, b.d.dtype, quantize_groups(blocks));
    }
    b.bind_dst()?;
    let rows = b.bind_src(0)?;
    b.bind_src(1)?;
    b.finish(Kernel::SetRows, DType::F32, groups_for(rows.nelements()))
}
