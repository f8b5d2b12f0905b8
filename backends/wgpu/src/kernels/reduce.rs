//! Plans for reductions: SUM, SUM_ROWS, MEAN, ARGMAX, COUNT_EQUAL.

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

/// One workgroup counts the equal positions of two I32 tensors into an I32.
pub(super) fn count_equal(b: &mut Builder<'_>) -> Planned {
    b.bind_dst()?;
    let a = b.bind_src(0)?;
    let c = b.bind_src(1)?;
    if a.dtype != DType::I32 || c.dtype != DType::I32 || b.d.dtype != DType::I32 {
        return Err(format!("COUNT_EQUAL of {} and {} into {} has no wgpu kernel", a.dtype, c.dtype, b.d.dtype));
    }
    // The count must fit the I32 result (the builder refuses more elements).
    if a.ne != c.ne || b.d.nelements() != 1 || a.nelements() > i32::MAX as usize {
        return Err(format!("COUNT_EQUAL of {:?} against {:?} does not fit", a.ne, c.ne));
    }
    b.finish(Kernel::CountEqual, DType::F32, 1)
}
