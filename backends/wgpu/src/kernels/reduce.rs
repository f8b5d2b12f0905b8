//! Plans for reductions: SUM, SUM_ROWS, MEAN, ARGMAX.

use gantry_engine::DType;

use super::{Builder, Kernel, Launch, Refusal};

type Planned = Result<Option<Launch>, Refusal>;

pub(super) fn sum(b: &mut Builder<'_>) -> Planned {
    b.bind_dst()?;
    b.bind_src(0)?;
    b.finish(Kernel::Sum, DType::F32, 1)
}

/// One workgroup per row; MEAN scales the sum by 1 / ne0.
pub(super) fn sum_rows(b: &mut Builder<'_>, mean: bool) -> Planned {
    b.bind_dst()?;
    let s = b.bind_src(0)?;
    b.params.f[0] = if mean { 1.0 / s.ne[0].max(1) as f32 } else { 1.0 };
    b.finish(Kernel::SumRows, DType::F32, s.nrows() as u64)
}

pub(super) fn argmax(b: &mut Builder<'_>) -> Planned {
    b.bind_dst()?;
    let s = b.bind_src(0)?;
    b.finish(Kernel::Argmax, DType::F32, s.ne[1] as u64)
}
