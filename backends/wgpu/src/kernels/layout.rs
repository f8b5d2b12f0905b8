//! Plans for copies and tilings: CPY, CONT, DUP, CONCAT, REPEAT.

use gantry_engine::DType;

use super::{Builder, Kernel, Launch, Refusal, groups_for, quantize_groups};

type Planned = Result<Option<Launch>, Refusal>;

/// CPY writes into its second source's memory (the node is a view of it
/// with its layout); CONT and DUP into the node. Either way the node is
/// the destination.
pub(super) fn copy(b: &mut Builder<'_>) -> Planned {
    if b.d.dtype.is_quantized() {
        let s = b.bind_src(0)?;
        b.bind_quantized_dst(s)?;
        let blocks = s.nelements() / 32;
        return b.finish(Kernel::Quantize { set_rows: false }, b.d.dtype, quantize_groups(blocks));
    }
    b.bind_dst()?;
    let s = b.bind_src(0)?;
    if s.nelements() != b.d.nelements() {
        return Err(format!("copy of {} elements into {}", s.nelements(), b.d.nelements()));
    }
    b.finish(Kernel::Copy, DType::F32, groups_for(b.d.nelements()))
}

pub(super) fn concat(b: &mut Builder<'_>, dim: u8) -> Planned {
    b.bind_dst()?;
    b.bind_src(0)?;
    b.bind_src(1)?;
    b.params.u[0] = u32::from(dim);
    b.finish(Kernel::Concat, DType::F32, groups_for(b.d.nelements()))
}

pub(super) fn repeat(b: &mut Builder<'_>) -> Planned {
    b.bind_dst()?;
    b.bind_src(0)?;
    b.finish(Kernel::Repeat, DType::F32, groups_for(b.d.nelements()))
}
