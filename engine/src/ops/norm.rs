//! Normalizations: NORM, RMS_NORM, L2_NORM (per row), GROUP_NORM (per
//! group of channels), SOFT_MAX, DIAG_MASK_INF.

use gantry_arenas::TensorId;

use crate::{Context, DType, Op, Result, op_err};

impl Context {
    /// `(x - mean) / sqrt(var + eps)` over each row.
    pub fn norm(&mut self, a: TensorId, eps: f32) -> Result<TensorId> {
        self.norm_impl(a, Op::Norm { eps }, eps, false)
    }

    /// `x / sqrt(mean(x^2) + eps)` over each row.
    pub fn rms_norm(&mut self, a: TensorId, eps: f32) -> Result<TensorId> {
        self.norm_impl(a, Op::RmsNorm { eps }, eps, false)
    }

    /// [`Context::rms_norm`] writing into `a`.
    pub fn rms_norm_inplace(&mut self, a: TensorId, eps: f32) -> Result<TensorId> {
        self.norm_impl(a, Op::RmsNorm { eps }, eps, true)
    }

    /// `x / max(sqrt(sum(x^2)), eps)` over each row of the F32 `a` (ggml's
    /// `ggml_l2_norm`).
    pub fn l2_norm(&mut self, a: TensorId, eps: f32) -> Result<TensorId> {
        self.norm_impl(a, Op::L2Norm { eps }, eps, false)
    }

    /// `(x - mean) / sqrt(var + eps)` over each group of channels of each
    /// sample (ggml's `ggml_group_norm`): the F32 `a` is `[W, H, C, N]`
    /// with rows dense, and group `g` holds channels `g·ceil(C / n_groups)`
    /// up to the next group's first (the last groups may be short or empty).
    pub fn group_norm(&mut self, a: TensorId, n_groups: u32, eps: f32) -> Result<TensorId> {
        const OP: &str = "GROUP_NORM";
        let d = self.expect_dtype(OP, a, &[DType::F32])?;
        if n_groups == 0 {
            return Err(op_err!(OP, "{} needs at least one group", self.describe(a)));
        }
        if d.ne[0] > 1 && d.nb[0] != DType::F32.bytes_per_block() {
            return Err(op_err!(OP, "the rows of {} must be dense", self.describe(a)));
        }
        self.norm_impl(a, Op::GroupNorm { n_groups, eps }, eps, false)
    }

    fn norm_impl(&mut self, a: TensorId, op: Op, eps: f32, inplace: bool) -> Result<TensorId> {
        self.expect_dtype(op.name(), a, &[DType::F32])?;
        if !(eps >= 0.0 && eps.is_finite()) {
            return Err(op_err!(op.name(), "eps {eps} for {} must be finite and non-negative", self.describe(a)));
        }
        self.result_like(a, op, &[a], inplace)
    }

    /// `softmax(a * scale + slope * mask)` over each row. The optional mask
    /// (F32 or F16, contiguous) has `a`'s row length, at least `a`'s rows,
    /// and repeats over dims 2 and 3; `max_bias > 0` turns on ALiBi slopes per
    /// head (dim 2) and needs a mask.
    pub fn soft_max_ext(&mut self, a: TensorId, mask: Option<TensorId>, scale: f32, max_bias: f32) -> Result<TensorId> {
        self.soft_max_impl(a, mask, scale, max_bias, false)
    }

    /// Plain softmax over each row.
    pub fn soft_max(&mut self, a: TensorId) -> Result<TensorId> {
        self.soft_max_impl(a, None, 1.0, 0.0, false)
    }

    /// [`Context::soft_max_ext`] writing into `a`.
    pub fn soft_max_ext_inplace(
        &mut self,
        a: TensorId,
        mask: Option<TensorId>,
        scale: f32,
        max_bias: f32,
    ) -> Result<TensorId> {
        self.soft_max_impl(a, mask, scale, max_bias, true)
    }

    fn soft_max_impl(
        &mut self,
        a: TensorId,
        mask: Option<TensorId>,
        scale: f32,
        max_bias: f32,
        inplace: bool,
    ) -> Result<TensorId> {
        const OP: &str = "SOFT_MAX";
        let d = self.expect_dtype(OP, a, &[DType::F32])?;
        self.expect_contiguous(OP, a, &d)?;
        if !scale.is_finite() || !max_bias.is_finite() {
            return Err(op_err!(
                OP,
                "scale {scale} and max_bias {max_bias} of {} are not both finite",
                self.describe(a)
            ));
        }
        if let Some(m) = mask {
            let dm = self.expect_dtype(OP, m, &[DType::F32, DType::F16])?;
            self.expect_contiguous(OP, m, &dm)?;
            if dm.ne[0] != d.ne[0]
                || dm.ne[1] < d.ne[1]
                || !d.ne[2].is_multiple_of(dm.ne[2])
                || !d.ne[3].is_multiple_of(dm.ne[3])
            {
                return Err(op_err!(OP, "mask {} does not fit logits {}", self.describe(m), self.describe(a)));
            }
        } else if max_bias > 0.0 {
            return Err(op_err!(OP, "max_bias {max_bias} (ALiBi) on {} needs a mask", self.describe(a)));
        }
        match mask {
            Some(m) => self.result_like(a, Op::SoftMax { scale, max_bias }, &[a, m], inplace),
            None => self.result_like(a, Op::SoftMax { scale, max_bias }, &[a], inplace),
        }
    }

    /// [`Context::soft_max_ext`] with attention sinks (ggml's
    /// `ggml_soft_max_add_sinks`, gpt-oss): `sinks` is F32 `[n_head]`, one
    /// logit per head (dim 2 of `a`) that joins each row's softmax without
    /// an output of its own, so a row's probabilities sum to less than one.
    pub fn soft_max_ext_sinks(
        &mut self,
        a: TensorId,
        mask: Option<TensorId>,
        sinks: TensorId,
        scale: f32,
        max_bias: f32,
    ) -> Result<TensorId> {
        const OP: &str = "SOFT_MAX";
        let da = self.src(OP, a)?;
        let ds = self.expect_dtype(OP, sinks, &[DType::F32])?;
        self.expect_contiguous(OP, sinks, &ds)?;
        if ds.ne != [da.ne[2], 1, 1, 1] {
            return Err(op_err!(
                OP,
                "the sinks {} must hold one value per head ({}) of {}",
                self.describe(sinks),
                da.ne[2],
                self.describe(a)
            ));
        }
        let t = self.soft_max_impl(a, mask, scale, max_bias, false)?;
        // Slot 2, as in ggml: slot 1 stays the (optional) mask. Nobody has
        // seen the new node yet, so this is part of making it.
        self.desc_mut_untracked(t)?.srcs[2] = Some(sinks);
        Ok(t)
    }

    /// Sets `a[j, i] = -inf` for columns `j > n_past + i` of each row `i`.
    pub fn diag_mask_inf(&mut self, a: TensorId, n_past: usize) -> Result<TensorId> {
        self.expect_dtype("DIAG_MASK_INF", a, &[DType::F32])?;
        self.result_like(a, Op::DiagMaskInf { n_past }, &[a], false)
    }

    /// [`Context::diag_mask_inf`] writing into `a`.
    pub fn diag_mask_inf_inplace(&mut self, a: TensorId, n_past: usize) -> Result<TensorId> {
        self.expect_dtype("DIAG_MASK_INF", a, &[DType::F32])?;
        self.result_like(a, Op::DiagMaskInf { n_past }, &[a], true)
    }
}
