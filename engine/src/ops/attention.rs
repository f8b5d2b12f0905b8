//! Fused attention: FLASH_ATTN_EXT, with or without attention sinks.

use gantry_arenas::TensorId;

use crate::{Context, DType, Op, Result, op_err};

impl Context {
    /// `softmax(Q K^T * scale + slope * mask) V` per head, with optional logit
    /// soft-capping. `q` is F32 `[d, n_q, n_head, ne3]`; `k` is
    /// `[d, n_kv, n_head_kv, ne3]` and `v` `[dv, n_kv, n_head_kv, ne3]` (F32,
    /// F16 or Q8_0 — a quantized KV cache —, `n_head` a multiple of
    /// `n_head_kv`: grouped-query attention); the
    /// mask (F16 or F32) is `[n_kv, >= n_q, ...]` repeating over heads. The
    /// result is F32 `[dv, n_head, n_q, ne3]`: heads and queries swapped, as
    /// ggml lays it out, so that a reshape gives `[dv * n_head, n_q]`.
    #[expect(
        clippy::too_many_arguments,
        reason = "ggml_flash_attn_ext's arguments: q, k, v, mask and its three scalars"
    )]
    pub fn flash_attn_ext(
        &mut self,
        q: TensorId,
        k: TensorId,
        v: TensorId,
        mask: Option<TensorId>,
        scale: f32,
        max_bias: f32,
        softcap: f32,
    ) -> Result<TensorId> {
        const OP: &str = "FLASH_ATTN_EXT";
        let dq = self.expect_dtype(OP, q, &[DType::F32])?;
        let dk = self.expect_dtype(OP, k, &[DType::F32, DType::F16, DType::Q8_0])?;
        let dv = self.expect_dtype(OP, v, &[DType::F32, DType::F16, DType::Q8_0])?;
        if dk.ne[0] != dq.ne[0] || !dq.ne[2].is_multiple_of(dk.ne[2]) || dq.ne[3] != dk.ne[3] {
            return Err(op_err!(OP, "K {} does not match Q {}", self.describe(k), self.describe(q)));
        }
        if dv.ne[1] != dk.ne[1] || dv.ne[2] != dk.ne[2] || dv.ne[3] != dk.ne[3] {
            return Err(op_err!(OP, "V {} does not match K {}", self.describe(v), self.describe(k)));
        }
        let mut srcs = [q, k, v, q];
        let mut n = 3;
        if let Some(m) = mask {
            let dm = self.expect_dtype(OP, m, &[DType::F16, DType::F32])?;
            self.expect_contiguous(OP, m, &dm)?;
            if dm.ne[0] != dk.ne[1]
                || dm.ne[1] < dq.ne[1]
                || !dq.ne[2].is_multiple_of(dm.ne[2])
                || !dq.ne[3].is_multiple_of(dm.ne[3])
            {
                return Err(op_err!(
                    OP,
                    "mask {} does not fit {} queries and {} keys",
                    self.describe(m),
                    dq.ne[1],
                    dk.ne[1]
                ));
            }
            srcs[3] = m;
            n = 4;
        } else if max_bias > 0.0 {
            return Err(op_err!(OP, "max_bias {max_bias} (ALiBi) needs a mask"));
        }
        if softcap < 0.0 || !softcap.is_finite() {
            return Err(op_err!(OP, "logit softcap {softcap} must be finite and non-negative"));
        }
        self.push_op(
            DType::F32,
            [dv.ne[0], dq.ne[2], dq.ne[1], dq.ne[3]],
            Op::FlashAttnExt { scale, max_bias, softcap },
            &srcs[..n],
        )
    }

    /// [`Context::flash_attn_ext`] with attention sinks (ggml's
    /// `ggml_flash_attn_ext_add_sinks`, gpt-oss): `sinks` is F32 `[n_head]`,
    /// one logit per query head that joins each softmax with no value of
    /// its own, so the weights of the keys sum to less than one. The sinks
    /// sit in source slot 4, as in ggml.
    #[expect(
        clippy::too_many_arguments,
        reason = "ggml_flash_attn_ext's arguments and the sinks ggml adds to its node"
    )]
    pub fn flash_attn_ext_sinks(
        &mut self,
        q: TensorId,
        k: TensorId,
        v: TensorId,
        mask: Option<TensorId>,
        sinks: TensorId,
        scale: f32,
        max_bias: f32,
        softcap: f32,
    ) -> Result<TensorId> {
        const OP: &str = "FLASH_ATTN_EXT";
        let dq = self.src(OP, q)?;
        let ds = self.expect_dtype(OP, sinks, &[DType::F32])?;
        self.expect_contiguous(OP, sinks, &ds)?;
        if ds.ne != [dq.ne[2], 1, 1, 1] {
            return Err(op_err!(
                OP,
                "the sinks {} must hold one value per head ({}) of Q {}",
                self.describe(sinks),
                dq.ne[2],
                self.describe(q)
            ));
        }
        let t = self.flash_attn_ext(q, k, v, mask, scale, max_bias, softcap)?;
        // Nobody has seen the new node yet, so this is part of making it.
        self.desc_mut_untracked(t)?.srcs[4] = Some(sinks);
        Ok(t)
    }
}
