//! Plans for element-wise ops: the unary functions, SCALE, CLAMP, the binary
//! ops and the gated linear units.

use gantry_engine::{BinaryOp, DType, GluOp};

use super::{Builder, Kernel, Launch, MapOp, Refusal, groups_for};

type Planned = Result<Option<Launch>, Refusal>;

pub(super) fn map(b: &mut Builder<'_>, op: MapOp) -> Planned {
    b.bind_dst()?;
    b.bind_src(0)?;
    let n = b.d.nelements();
    b.finish(Kernel::Map(op), DType::F32, groups_for(n))
}

pub(super) fn binary(b: &mut Builder<'_>, op: BinaryOp) -> Planned {
    b.bind_dst()?;
    b.bind_src(0)?;
    b.bind_src(1)?;
    let n = b.d.nelements();
    b.finish(Kernel::Binary(op), DType::F32, groups_for(n))
}

pub(super) fn swiglu_oai(b: &mut Builder<'_>, alpha: f32, limit: f32, swapped: bool) -> Planned {
    b.bind_dst()?;
    let a = b.bind_src(0)?;
    if a.dtype != DType::F32 {
        return Err(format!("SWIGLU_OAI of {} has no wgpu kernel", a.dtype));
    }
    let split = b.d.srcs[1].is_some();
    if split {
        b.bind_src(1)?;
    }
    b.params.u[0] = u32::from(swapped);
    b.params.f[0] = alpha;
    b.params.f[1] = limit;
    b.finish(Kernel::SwigluOai { split }, DType::F32, groups_for(b.d.nelements()))
}

pub(super) fn glu(b: &mut Builder<'_>, op: GluOp, swapped: bool) -> Planned {
    b.bind_dst()?;
    b.bind_src(0)?;
    let split = b.d.srcs[1].is_some();
    if split {
        b.bind_src(1)?;
    }
    b.params.u[0] = u32::from(swapped);
    let n = b.d.nelements();
    b.finish(Kernel::Glu { op, split }, DType::F32, groups_for(n))
}
