//! What the op builders share: a new contiguous node, a new view.

use gantry_arenas::TensorId;

use super::Context;
use crate::tensor::{MAX_DIMS, MAX_SRC, TensorFlags, TensorLayout};
use crate::{DType, Error, Name, Op, Result, TensorDesc};

/// The dtype, shape and strides of a view.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ViewLayout {
    /// Element type.
    pub(crate) dtype: DType,
    /// Elements per dimension.
    pub(crate) ne: [usize; MAX_DIMS],
    /// Bytes per step in each dimension.
    pub(crate) nb: [usize; MAX_DIMS],
}

impl ViewLayout {
    /// The layout of `d` (a view over a tensor with the same layout).
    pub(crate) fn of(d: &TensorDesc) -> Self {
        Self { dtype: d.dtype, ne: d.ne, nb: d.nb }
    }
}

impl Context {
    /// A new contiguous tensor computed by `op` from `srcs`.
    pub(crate) fn push_op(
        &mut self,
        dtype: DType,
        ne: [usize; MAX_DIMS],
        op: Op,
        srcs: &[TensorId],
    ) -> Result<TensorId> {
        self.check_empty_sources(op, &ne, srcs)?;
        let mut desc =
            TensorDesc::contiguous(dtype, ne).map_err(|reason| Error::InvalidOp { op: op.name(), reason })?;
        desc.op = op;
        set_srcs(&mut desc, srcs);
        Ok(self.insert(desc))
    }

    /// A new view of `base`'s memory, `offset` bytes in, computed (or
    /// described) by `op`.
    pub(crate) fn push_view(
        &mut self,
        base: TensorId,
        layout: ViewLayout,
        offset: usize,
        op: Op,
        srcs: &[TensorId],
    ) -> Result<TensorId> {
        let ViewLayout { dtype, ne, nb } = layout;
        self.check_empty_sources(op, &ne, srcs)?;
        self.check_written_layout(op, base, &TensorLayout { dtype, ne, nb })?;
        let b = self.desc(base)?;
        let (view_src, view_offset) = match b.view_src {
            Some(root) => (root, b.view_offset.checked_add(offset)),
            None => (base, Some(offset)),
        };
        let view_offset = view_offset.ok_or_else(|| Error::Overflow(format!("{} view offset", op.name())))?;
        let desc = TensorDesc {
            dtype,
            ne,
            nb,
            op,
            srcs: [None; MAX_SRC],
            view_src: Some(view_src),
            view_offset,
            flags: TensorFlags::NONE,
            name: Name::EMPTY,
        };
        let mut desc = desc;
        set_srcs(&mut desc, srcs);
        Ok(self.insert(desc))
    }
}

fn set_srcs(desc: &mut TensorDesc, srcs: &[TensorId]) {
    for (slot, &s) in desc.srcs.iter_mut().zip(srcs) {
        *slot = Some(s);
    }
}
