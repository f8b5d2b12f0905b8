//! Plans for SET and ACC (`set_acc.wgsl`): src0 copied into the contiguous
//! result with src1 written over (SET) or added to (ACC) a view of it at a
//! byte offset with byte strides. The view's checks are the CPU's (inside
//! the result, whole elements) plus one the kernel's search needs: strides
//! nested from the top, each at least the extent of the dims below it (so
//! the view cannot overlap itself either); other views are left to the CPU.

use gantry_engine::{DType, Op};

use super::{Builder, Kernel, Launch, Refusal, groups_for};

type Planned = Result<Option<Launch>, Refusal>;

pub(super) fn set_acc(b: &mut Builder<'_>) -> Planned {
    let name = b.d.op.name();
    let (Op::Set { nb, offset } | Op::Acc { nb, offset }) = b.d.op else {
        return Err(format!("{name} is not SET or ACC"));
    };
    let add = matches!(b.d.op, Op::Acc { .. });
    b.bind_dst()?;
    let a = b.bind_src(0)?;
    let v = b.bind_src(1)?;
    let dtypes: &[DType] = if add { &[DType::F32] } else { &[DType::F32, DType::I32] };
    if !dtypes.contains(&b.d.dtype) || a.dtype != b.d.dtype || v.dtype != b.d.dtype {
        return Err(format!("{name} of {} and {} into {} has no wgpu kernel", a.dtype, v.dtype, b.d.dtype));
    }
    let es = b.d.dtype.bytes_per_block();
    if a.ne != b.d.ne || !b.d.is_contiguous() || !offset.is_multiple_of(es) || nb.iter().any(|s| !s.is_multiple_of(es))
    {
        return Err(format!("{name} of {:?} at byte {offset} with strides {nb:?} does not fit", v.ne));
    }
    // Element strides of dims 1..3, nested: each dim that has more than one
    // position steps at least over everything below it.
    let strides = nb.map(|s| s / es);
    let mut extent = v.ne[0];
    for k in 1..4 {
        if v.ne[k] > 1 {
            if strides[k - 1] < extent {
                return Err(format!("{name}'s view strides {nb:?} are not nested; it runs on the CPU"));
            }
            extent = extent.saturating_add((v.ne[k] - 1).saturating_mul(strides[k - 1]));
        }
    }
    let start = offset / es;
    if start.checked_add(extent).is_none_or(|end| end > b.d.nelements()) {
        return Err(format!("{name}'s view of {:?} at byte {offset} runs past the result", v.ne));
    }
    let fits = |x: usize| u32::try_from(x).map_err(|_| format!("{name}'s view does not fit 32 bits"));
    b.params.u[..4].copy_from_slice(&[fits(start)?, fits(strides[0])?, fits(strides[1])?, fits(strides[2])?]);
    b.finish(Kernel::SetAcc { add }, DType::F32, groups_for(b.d.nelements()))
}
