//! Views, reshapes, permutes and copies: VIEW, RESHAPE, PERMUTE, TRANSPOSE,
//! CPY, CONT, DUP.

use gantry_arenas::TensorId;

use crate::context::ViewLayout;
use crate::context::{shape4, strides_for};
use crate::tensor::MAX_DIMS;
use crate::{Context, DType, Error, Op, Result, op_err};

/// Dtypes CPY / CONT / DUP convert among, element by element.
const CONVERTIBLE: &[DType] = &[DType::F32, DType::F16, DType::BF16, DType::I32];
/// Quantized dtypes CPY and SET_ROWS can write from F32.
pub(crate) const QUANT_TARGETS: &[DType] = &[DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0];

impl Context {
    /// A strided view of `a`: `ne` elements per dimension, byte strides `nb`
    /// (`nb[0]` must be the element or block size), starting `offset` bytes
    /// into `a`. The view must lie inside `a`'s source memory.
    pub fn view(
        &mut self,
        a: TensorId,
        ne: [usize; MAX_DIMS],
        nb: [usize; MAX_DIMS],
        offset: usize,
    ) -> Result<TensorId> {
        const OP: &str = "VIEW";
        let d = self.src(OP, a)?;
        let bs = d.dtype.block_size();
        if !ne[0].is_multiple_of(bs) {
            return Err(op_err!(
                OP,
                "row length {} of a view of {} is not a multiple of the block size {bs}",
                ne[0],
                self.describe(a)
            ));
        }
        if nb[0] != d.dtype.bytes_per_block() {
            return Err(op_err!(
                OP,
                "nb[0] = {} but {} elements take {} bytes",
                nb[0],
                d.dtype,
                d.dtype.bytes_per_block()
            ));
        }
        let mut probe = d;
        probe.ne = ne;
        probe.nb = nb;
        let (root, root_offset) = match d.view_src {
            Some(r) => (r, d.view_offset),
            None => (a, 0),
        };
        let root_bytes = self.src(OP, root)?.nbytes();
        let end = root_offset
            .checked_add(offset)
            .and_then(|o| o.checked_add(view_extent(&probe)?))
            .ok_or_else(|| Error::Overflow(format!("VIEW of {}", self.describe(a))))?;
        if end > root_bytes {
            return Err(op_err!(
                OP,
                "view {ne:?} with strides {nb:?} at offset {offset} ends at byte {end}, past the {root_bytes} bytes of {}",
                self.describe(root)
            ));
        }
        self.push_view(a, ViewLayout { dtype: d.dtype, ne, nb }, offset, Op::View, &[a])
    }

    /// A 1-d view of `ne0` elements at byte `offset`.
    pub fn view_1d(&mut self, a: TensorId, ne0: usize, offset: usize) -> Result<TensorId> {
        let t = self.src("VIEW", a)?.dtype;
        let nb0 = t.bytes_per_block();
        let row = t.row_size(ne0).unwrap_or(0);
        self.view(a, [ne0, 1, 1, 1], [nb0, row, row, row], offset)
    }

    /// A 2-d view: `ne1` rows of `ne0` elements, `nb1` bytes apart.
    pub fn view_2d(&mut self, a: TensorId, ne0: usize, ne1: usize, nb1: usize, offset: usize) -> Result<TensorId> {
        let nb0 = self.src("VIEW", a)?.dtype.bytes_per_block();
        self.view(a, [ne0, ne1, 1, 1], [nb0, nb1, nb1 * ne1, nb1 * ne1], offset)
    }

    /// A 3-d view.
    pub fn view_3d(&mut self, a: TensorId, ne: [usize; 3], nb1: usize, nb2: usize, offset: usize) -> Result<TensorId> {
        let nb0 = self.src("VIEW", a)?.dtype.bytes_per_block();
        self.view(a, [ne[0], ne[1], ne[2], 1], [nb0, nb1, nb2, nb2 * ne[2]], offset)
    }

    /// A 4-d view.
    pub fn view_4d(
        &mut self,
        a: TensorId,
        ne: [usize; 4],
        nb1: usize,
        nb2: usize,
        nb3: usize,
        offset: usize,
    ) -> Result<TensorId> {
        let nb0 = self.src("VIEW", a)?.dtype.bytes_per_block();
        self.view(a, ne, [nb0, nb1, nb2, nb3], offset)
    }

    /// `a` (contiguous) with the shape `shape` (same number of elements).
    pub fn reshape(&mut self, a: TensorId, shape: impl AsRef<[usize]>) -> Result<TensorId> {
        const OP: &str = "RESHAPE";
        let d = self.src(OP, a)?;
        self.expect_contiguous(OP, a, &d)?;
        let ne = shape4(shape.as_ref()).map_err(|e| op_err!(OP, "{e}"))?;
        if ne.iter().product::<usize>() != d.nelements() {
            return Err(op_err!(OP, "cannot reshape {} into {ne:?}: element counts differ", self.describe(a)));
        }
        let nb = strides_for(OP, d.dtype, ne)?;
        self.push_view(a, ViewLayout { dtype: d.dtype, ne, nb }, 0, Op::Reshape, &[a])
    }

    /// `a` with its dimensions reordered: source dimension `i` becomes
    /// dimension `axes[i]` of the result (ggml's `ggml_permute`).
    pub fn permute(&mut self, a: TensorId, axes: [usize; 4]) -> Result<TensorId> {
        const OP: &str = "PERMUTE";
        let d = self.src(OP, a)?;
        let mut seen = [false; 4];
        for &ax in &axes {
            if ax >= 4 || std::mem::replace(&mut seen[ax], true) {
                return Err(op_err!(OP, "axes {axes:?} of {} are not a permutation of 0..4", self.describe(a)));
            }
        }
        let (mut ne, mut nb) = ([0; 4], [0; 4]);
        for i in 0..4 {
            ne[axes[i]] = d.ne[i];
            nb[axes[i]] = d.nb[i];
        }
        let axes8 = axes.map(|x| x as u8);
        self.push_view(a, ViewLayout { dtype: d.dtype, ne, nb }, 0, Op::Permute { axes: axes8 }, &[a])
    }

    /// `a` with dimensions 0 and 1 swapped.
    pub fn transpose(&mut self, a: TensorId) -> Result<TensorId> {
        let d = self.src("TRANSPOSE", a)?;
        let (mut ne, mut nb) = (d.ne, d.nb);
        ne.swap(0, 1);
        nb.swap(0, 1);
        self.push_view(a, ViewLayout { dtype: d.dtype, ne, nb }, 0, Op::Transpose, &[a])
    }

    /// A contiguous copy of `a`.
    pub fn cont(&mut self, a: TensorId) -> Result<TensorId> {
        let ne = self.src("CONT", a)?.ne;
        self.cont_shape(a, ne)
    }

    /// A contiguous copy of `a` with the shape `shape` (same number of elements).
    pub fn cont_shape(&mut self, a: TensorId, shape: impl AsRef<[usize]>) -> Result<TensorId> {
        const OP: &str = "CONT";
        let d = self.src(OP, a)?;
        let ne = shape4(shape.as_ref()).map_err(|e| op_err!(OP, "{e}"))?;
        if ne.iter().product::<usize>() != d.nelements() {
            return Err(op_err!(OP, "cannot lay {} out as {ne:?}: element counts differ", self.describe(a)));
        }
        self.check_copyable(OP, a, d.dtype, d.dtype)?;
        self.push_op(d.dtype, ne, Op::Cont, &[a])
    }

    /// A contiguous copy of `a` with the same shape.
    pub fn dup(&mut self, a: TensorId) -> Result<TensorId> {
        const OP: &str = "DUP";
        let d = self.src(OP, a)?;
        self.check_copyable(OP, a, d.dtype, d.dtype)?;
        self.push_op(d.dtype, d.ne, Op::Dup, &[a])
    }

    /// Copies `a` into `b` (same number of elements), converting to `b`'s
    /// dtype; the result is a view of `b` that depends on the copy.
    pub fn cpy(&mut self, a: TensorId, b: TensorId) -> Result<TensorId> {
        const OP: &str = "CPY";
        let (da, db) = (self.src(OP, a)?, self.src(OP, b)?);
        if da.nelements() != db.nelements() {
            return Err(op_err!(OP, "{} and {} have different element counts", self.describe(a), self.describe(b)));
        }
        self.check_copyable(OP, a, da.dtype, db.dtype)?;
        if db.dtype.is_quantized() && da.dtype != db.dtype {
            self.expect_contiguous_rows(OP, b, &db)?;
            if da.ne[0] != db.ne[0] {
                return Err(op_err!(
                    OP,
                    "quantizing copy needs equal row lengths: {} into {}",
                    self.describe(a),
                    self.describe(b)
                ));
            }
        }
        self.push_view(b, ViewLayout::of(&db), 0, Op::Cpy, &[a, b])
    }

    fn check_copyable(&self, op: &'static str, a: TensorId, from: DType, to: DType) -> Result<()> {
        let ok = (CONVERTIBLE.contains(&from) && CONVERTIBLE.contains(&to))
            || (from == DType::F32 && QUANT_TARGETS.contains(&to))
            || (from == to && self.src(op, a)?.is_contiguous_rows());
        if ok { Ok(()) } else { Err(op_err!(op, "cannot copy {} ({from}) to {to}", self.describe(a))) }
    }
}

/// Bytes from a tensor's first byte to one past its last, following strides.
fn view_extent(d: &crate::TensorDesc) -> Option<usize> {
    if d.ne.contains(&0) {
        return Some(0);
    }
    let bs = d.dtype.block_size();
    let mut n = (d.ne[0] / bs).checked_mul(d.nb[0])?;
    for i in 1..MAX_DIMS {
        n = n.checked_add((d.ne[i] - 1).checked_mul(d.nb[i])?)?;
    }
    Some(n)
}
