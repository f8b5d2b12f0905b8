//! Cases ggml's CPU backend computes wrongly without a word: layouts and
//! types its builders reject (a GGML_ASSERT in ggml.c) or its kernels only
//! `assert()` (compiled out of release builds). Cases its kernels refuse
//! with a GGML_ASSERT or GGML_ABORT at run time need no rule here: the
//! driver reports ggml's message and the case is listed as not compared.

use gantry_engine::{Context, DType, Op, Result, TensorDesc, TensorId};

/// Why ggml's CPU backend cannot compute `output`, if it cannot.
pub fn ggml_lacks(ctx: &Context, output: TensorId) -> Result<Option<&'static str>> {
    let d = ctx.desc(output)?;
    let src = |slot: usize| d.srcs[slot].map(|s| ctx.desc(s).copied()).transpose();
    let Some(src0) = src(0)? else { return Ok(None) };
    let why = match d.op {
        Op::Unary(_)
        | Op::Clamp { .. }
        | Op::LeakyRelu { .. }
        | Op::Scale { .. }
        | Op::Sum
        | Op::SumRows
        | Op::Mean
        | Op::Argmax
            if strided(&src0) =>
        {
            Some(
                "ggml's CPU kernel reads rows as dense arrays (ggml_unary_impl asserts \
                 ggml_is_contiguous_rows; CLAMP, LEAKY_RELU and the reductions assert nb[0] == \
                 the element size only in debug builds)",
            )
        }
        Op::Clamp { .. } | Op::LeakyRelu { .. } if !rows_in_order(&src0) => {
            Some("ggml's CPU kernel finds row i at i*nb[1]: rows in memory order only")
        }
        Op::FlashAttnExt { .. } if src(3)?.is_some_and(|m| m.dtype == DType::F32) => {
            Some("ggml_flash_attn_ext asserts an F16 mask; its CPU kernel reads the mask as F16")
        }
        Op::GetRows if matches!(src0.dtype, DType::Q8_1 | DType::Q8_K) => {
            Some("ggml has no dequantization of the activation formats q8_1 and q8_K (no to_float)")
        }
        _ => None,
    };
    Ok(why)
}

/// Whether the elements of a row are not adjacent (a transposed view).
fn strided(d: &TensorDesc) -> bool {
    !d.dtype.is_quantized() && d.ne[0] > 1 && d.nb[0] != d.dtype.bytes_per_block()
}

/// Whether row `i` (counting over dims 1 to 3) starts at `i * nb[1]`.
fn rows_in_order(d: &TensorDesc) -> bool {
    (d.ne[2] == 1 || d.nb[2] == d.nb[1] * d.ne[1]) && (d.ne[3] == 1 || d.nb[3] == d.nb[2] * d.ne[2])
}
