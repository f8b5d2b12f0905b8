//! SAM's window partition: WIN_PART cuts an image into square windows
//! (zero-padded at the right and bottom edges), WIN_UNPART puts them back.

use gantry_arenas::TensorId;

use crate::{Context, DType, Error, Op, Result, op_err};

/// The window side as ggml's `int` parameter, at least 1.
fn window_side(op: &'static str, w: usize) -> Result<u32> {
    match u32::try_from(w) {
        Ok(side) if side >= 1 && side <= i32::MAX as u32 => Ok(side),
        _ => Err(op_err!(op, "the window side must be in 1..=i32::MAX, not {w}")),
    }
}

impl Context {
    /// Cuts `a` (F32 `[C, W, H]`) into windows of `w × w` pixels (ggml's
    /// `ggml_win_part`): the result (F32 `[C, w, w, npx · npy]`, `npx =
    /// ⌈W / w⌉`, `npy = ⌈H / w⌉`) holds window `py · npx + px` at index
    /// `py · npx + px` of dim 3, pixels past the image's edge zero.
    pub fn win_part(&mut self, a: TensorId, w: usize) -> Result<TensorId> {
        const OP: &str = "WIN_PART";
        let d = self.expect_dtype(OP, a, &[DType::F32])?;
        let side = window_side(OP, w)?;
        if d.ne[3] != 1 {
            return Err(op_err!(OP, "{} must be an image [C, W, H]", self.describe(a)));
        }
        let (npx, npy) = (d.ne[1].div_ceil(w), d.ne[2].div_ceil(w));
        let counts = u32::try_from(npx).ok().zip(u32::try_from(npy).ok());
        let np = npx.checked_mul(npy).filter(|&n| n <= i32::MAX as usize);
        let (Some((npx32, npy32)), Some(np)) = (counts, np) else {
            return Err(op_err!(OP, "{} makes more than i32::MAX windows of side {w}", self.describe(a)));
        };
        let ne = [d.ne[0], w, w, np];
        ne.iter()
            .try_fold(1usize, |n, &x| n.checked_mul(x))
            .ok_or_else(|| Error::Overflow(format!("{OP} result of {}", self.describe(a))))?;
        self.push_op(DType::F32, ne, Op::WinPart { npx: npx32, npy: npy32, w: side }, &[a])
    }

    /// Puts the windows `a` (F32 `[C, w, w, n]`, as [`Context::win_part`]
    /// makes them) back into an image of `w0 × h0` pixels (ggml's
    /// `ggml_win_unpart`): the result (F32 `[C, w0, h0]`) takes pixel `(x,
    /// y)` from window `(y / w) · ⌈w0 / w⌉ + x / w`. ggml checks no shape;
    /// here `a`'s windows must be `w × w` and at least as many as the image
    /// needs.
    pub fn win_unpart(&mut self, a: TensorId, w0: usize, h0: usize, w: usize) -> Result<TensorId> {
        const OP: &str = "WIN_UNPART";
        let d = self.expect_dtype(OP, a, &[DType::F32])?;
        let side = window_side(OP, w)?;
        let needed = w0.div_ceil(w).checked_mul(h0.div_ceil(w));
        if d.ne[1] != w || d.ne[2] != w || needed.is_none_or(|n| d.ne[3] < n) {
            return Err(op_err!(
                OP,
                "{} must hold at least ⌈{w0}/{w}⌉·⌈{h0}/{w}⌉ windows of {w}×{w} pixels",
                self.describe(a)
            ));
        }
        let ne = [d.ne[0], w0, h0, 1];
        ne.iter()
            .try_fold(1usize, |n, &x| n.checked_mul(x))
            .ok_or_else(|| Error::Overflow(format!("{OP} result of {}", self.describe(a))))?;
        self.push_op(DType::F32, ne, Op::WinUnpart { w: side }, &[a])
    }
}
