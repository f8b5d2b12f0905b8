//! Cases ggml's CPU backend computes wrongly without a word: layouts and
//! types its builders reject (a GGML_ASSERT in ggml.c) or its kernels only
//! `assert()` (compiled out of release builds), and parameters or shapes
//! its kernels index wrongly (circular PAD, COUNT_EQUAL). Cases its kernels refuse
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
        Op::Pool1d { .. } | Op::Pool2d { .. } if strided(&src0) => {
            Some("ggml's CPU pooling kernels read a row as a dense array (nb[0] is not read)")
        }
        Op::Pool1d { .. } if !rows_in_order(&src0) => {
            Some("ggml's CPU POOL_1D kernel finds row i at i*nb[1]: rows in memory order only")
        }
        Op::Pool2d { .. } if src0.ne[3] > 1 && src0.nb[3] != src0.nb[2] * src0.ne[2] => {
            Some("ggml's CPU POOL_2D kernel finds plane i at i*nb[2]: planes in memory order only")
        }
        // C's % keeps the sign of a negative dividend, except where the
        // source length is 1 (anything % 1 is 0).
        Op::Pad { lp, circular: true, .. } if lp.iter().zip(&src0.ne).any(|(&l, &n)| n > 1 && l as usize > n) => Some(
            "ggml's circular PAD wraps a coordinate by adding the source length once \
                 (ggml_wrap_around: (c + n) % n), so padding before a dim of more than one element \
                 by more than its length reads before the source's first element",
        ),
        Op::CountEqual if !count_equal_rows_right(&src0) => Some(
            "ggml's CPU COUNT_EQUAL kernel derives a row's i02 and i01 as (ir - i03*ne03)/ne01 \
             and ir - i03*ne03 - i02*ne02, so it counts the wrong rows of this shape",
        ),
        Op::WinPart { .. } | Op::WinUnpart { .. } | Op::GetRelPos if !src0.is_contiguous() => Some(
            "ggml's CPU WIN_PART, WIN_UNPART and GET_REL_POS kernels index the source as a dense \
             array (their builders do not ask for one)",
        ),
        // RWKV_WKV7's k (src 2) holds the head size.
        Op::RwkvWkv7 if src(2)?.is_some_and(|k| !k.ne[0].is_multiple_of(64)) => Some(
            "ggml's SIMD RWKV_WKV7 kernel steps through a head GGML_F32_STEP floats at a time (32 \
             with AVX, 64 with AVX-512) with no remainder loop, so it reads and writes past a head \
             whose size is not a multiple of that",
        ),
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

/// Whether ggml's CPU COUNT_EQUAL kernel (`ggml_compute_forward_count_equal_i32`)
/// visits every row of `d` once: it derives the indices of row `ir` with
/// `ne03` and `ne02` where `ne02 * ne01` and `ne01` belong, which is right
/// only for some shapes (a matrix, or `ne02 == ne01` in one batch).
fn count_equal_rows_right(d: &TensorDesc) -> bool {
    let [_, ne1, ne2, ne3] = d.ne.map(|n| n as i64);
    let rows = ne1 * ne2 * ne3;
    (0..rows).all(|ir| {
        let i03 = ir / (ne2 * ne1);
        let i02 = (ir - i03 * ne3) / ne1;
        let i01 = ir - i03 * ne3 - i02 * ne2;
        (i01, i02, i03) == (ir % ne1, ir / ne1 % ne2, ir / (ne1 * ne2))
    })
}

#[cfg(test)]
mod tests {
    use gantry_engine::{DType, TensorDesc};

    use super::count_equal_rows_right;

    #[test]
    fn count_equal_rows() {
        let desc = |ne: [usize; 4]| TensorDesc::contiguous(DType::I32, ne).expect("a small shape");
        assert!(count_equal_rows_right(&desc([7, 6, 1, 1])));
        assert!(count_equal_rows_right(&desc([7, 3, 3, 1])));
        assert!(!count_equal_rows_right(&desc([7, 6, 2, 1])));
        assert!(!count_equal_rows_right(&desc([10, 5, 4, 3])));
    }
}
