//! Two rules every node obeys, checked where every op builder makes its
//! node ([`Context::push_op`], [`Context::push_view`]), so that no kernel of
//! any backend meets a node that breaks them:
//!
//! - **Empty in, empty out.** A tensor with a zero-sized dimension is empty
//!   and every backend skips computing an empty node (ggml's
//!   `ggml_is_empty`). A node whose source is empty must be empty itself,
//!   except `CONCAT`, whose other part fills the result, a zero `PAD`,
//!   whose padding does, and `COUNT_EQUAL`, which counts no matches: a reduction, product
//!   or lookup over nothing (a `SUM_ROWS` of `[0, 2^60]`, a `MUL_MAT` with
//!   rows of length 0, `GET_ROWS` from a table without rows) has no defined
//!   value, and kernels sized from the other dimensions would loop over
//!   them.
//! - **No byte written twice.** A node that writes through a view (an
//!   in-place op, `CPY` or `SET_ROWS` into a view) needs a destination
//!   whose elements lie at distinct bytes: strides of zero, or smaller than
//!   the dimension below spans, would have two threads write one place.
//!   Sources may alias freely (a zero stride reads one row many times).

use gantry_arenas::TensorId;

use super::Context;
use crate::tensor::TensorLayout;
use crate::{Error, Op, Result};

impl Context {
    /// Checks "empty in, empty out" for a node of `op` with shape `ne` over `srcs`.
    pub(crate) fn check_empty_sources(&self, op: Op, ne: &[usize], srcs: &[TensorId]) -> Result<()> {
        if ne.contains(&0) || matches!(op, Op::Concat { .. } | Op::Pad { circular: false, .. } | Op::CountEqual) {
            return Ok(());
        }
        for &s in srcs {
            let d = self.src(op.name(), s)?;
            if d.ne.contains(&0) {
                return Err(Error::InvalidOp {
                    op: op.name(),
                    reason: format!(
                        "{} is empty, so a result of shape {ne:?} would be computed from nothing \
                         (an empty source gives an empty result)",
                        self.describe(s)
                    ),
                });
            }
        }
        Ok(())
    }

    /// Checks "no byte written twice" for a node of `op` that writes `layout`
    /// through a view of `base`.
    pub(crate) fn check_written_layout(&self, op: Op, base: TensorId, layout: &TensorLayout) -> Result<()> {
        if op.is_empty() || !layout.overlaps_itself() {
            return Ok(());
        }
        let root = self.desc(base)?.view_src.unwrap_or(base);
        Err(Error::InvalidOp {
            op: op.name(),
            reason: format!(
                "writes into {} through strides {:?} for shape {:?} that put several elements at one byte",
                self.describe(root),
                layout.nb,
                layout.ne
            ),
        })
    }
}
