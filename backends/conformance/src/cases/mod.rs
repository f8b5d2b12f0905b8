//! The case list: every op of the core set over many shapes (odd sizes,
//! 1-sized dims, broadcasting), layouts (permuted, transposed and padded
//! views as inputs, in place), dtypes and parameters. Test-mode shapes are
//! kept small enough for a software GPU (about 1 GFLOP/s); the large shapes
//! are perf-only.

mod attention;
mod conv;
mod elementwise;
mod experts;
mod generate;
mod layout;
mod linear_attn;
mod masks;
mod matmul;
mod norm;
mod quant;
mod reduce;
mod resample;
mod rope;
mod sam;
mod solve_tri;
mod sort;
mod ssm;

use gantry_engine::{Context, DType, Result, TensorId};

use super::Case;

/// Every case, test and perf ones (see [`Case::perf_only`]).
pub fn all() -> Vec<Case> {
    let mut cases = Vec::new();
    cases.extend(layout::cases());
    cases.extend(elementwise::cases());
    cases.extend(reduce::cases());
    cases.extend(norm::cases());
    cases.extend(rope::cases());
    cases.extend(matmul::cases());
    cases.extend(attention::cases());
    cases.extend(quant::cases());
    cases.extend(experts::cases());
    cases.extend(sort::cases());
    cases.extend(conv::cases());
    cases.extend(resample::cases());
    cases.extend(norm::vision_cases());
    cases.extend(generate::cases());
    cases.extend(masks::cases());
    cases.extend(ssm::cases());
    cases.extend(solve_tri::cases());
    cases.extend(linear_attn::cases());
    cases.extend(sam::cases());
    cases
}

/// How an input is laid out in memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Layout {
    /// Densely packed.
    Contiguous,
    /// Dims 1 and 2 swapped in memory (rows stay dense).
    Permuted,
    /// Dims 0 and 1 swapped in memory (elements of a row are strided).
    Transposed,
    /// A view skipping the first element of rows that are 3 elements longer.
    Padded,
}

impl Layout {
    /// A short tag for case names (empty for contiguous).
    pub(crate) fn tag(self) -> &'static str {
        match self {
            Layout::Contiguous => "",
            Layout::Permuted => ",permuted",
            Layout::Transposed => ",transposed",
            Layout::Padded => ",padded",
        }
    }
}

/// An input of shape `ne`, laid out as asked: returns the leaf (which gets
/// the data) and the tensor the op reads.
pub(crate) fn input(ctx: &mut Context, dtype: DType, ne: [usize; 4], layout: Layout) -> Result<(TensorId, TensorId)> {
    let permuted = |ctx: &mut Context, axes: [usize; 4]| -> Result<(TensorId, TensorId)> {
        let stored = axes.map(|a| ne[a]);
        let leaf = ctx.tensor(dtype, stored)?;
        Ok((leaf, ctx.permute(leaf, axes)?))
    };
    match layout {
        Layout::Contiguous => {
            let t = ctx.tensor(dtype, ne)?;
            Ok((t, t))
        }
        Layout::Permuted => permuted(ctx, [0, 2, 1, 3]),
        Layout::Transposed => permuted(ctx, [1, 0, 2, 3]),
        Layout::Padded => {
            let leaf = ctx.tensor(dtype, [ne[0] + 3, ne[1], ne[2], ne[3]])?;
            let es = dtype.bytes_per_block();
            let nb1 = (ne[0] + 3) * es;
            let view = ctx.view_4d(leaf, ne, nb1, nb1 * ne[1], nb1 * ne[1] * ne[2], es)?;
            Ok((leaf, view))
        }
    }
}

/// `[a,b,c,d]` for case names.
pub(crate) fn shape(ne: [usize; 4]) -> String {
    format!("[{},{},{},{}]", ne[0], ne[1], ne[2], ne[3])
}
