//! What a node is worth: bytes it reads and writes and floating-point
//! operations it does, for the profile's GB/s and GFLOP/s columns. Models,
//! not measurements: a product reads its whole weight matrix once and its
//! activations once; an element-wise op reads its sources and writes its
//! result once.

use crate::{Context, Op, TensorDesc, TensorId};

fn nbytes(ctx: &Context, t: Option<TensorId>) -> u64 {
    t.and_then(|t| ctx.get(t)).map_or(0, |d| d.nbytes() as u64)
}

fn ne(ctx: &Context, t: Option<TensorId>) -> [u64; 4] {
    t.and_then(|t| ctx.get(t)).map_or([0; 4], |d| d.ne.map(|n| n as u64))
}

/// `(bytes, flops)` of computing `node` (described by `d`): views and
/// leafs are worth nothing; `MUL_MAT` reads both operands and writes its
/// result, `2·K` flops per result element; `FLASH_ATTN_EXT` reads Q, K, V
/// and the mask, `4·D·n_kv` flops per query row and head; `GET_ROWS` reads
/// only the rows it gathers, `SET_ROWS` writes only the rows it sets;
/// `CONV_2D` and `CONV_2D_DW` do `2·taps` flops per result element;
/// anything else reads its sources, writes its result and does one flop
/// per result element.
pub fn node_cost(ctx: &Context, d: &TensorDesc) -> (u64, u64) {
    let out = d.nbytes() as u64;
    let elems = d.nelements() as u64;
    let sources = || d.srcs.iter().map(|&s| nbytes(ctx, s)).sum::<u64>();
    match d.op {
        Op::None | Op::View | Op::Reshape | Op::Permute { .. } | Op::Transpose => (0, 0),
        Op::MulMat | Op::MulMatId => (sources() + out, 2 * ne(ctx, d.srcs[0])[0] * elems),
        Op::FlashAttnExt { .. } => {
            let [dk, n_q, heads, seqs] = ne(ctx, d.srcs[0]);
            let n_kv = ne(ctx, d.srcs[1])[1];
            (sources() + out, 4 * dk * n_kv * n_q * heads * seqs)
        }
        Op::GetRows => (2 * out + nbytes(ctx, d.srcs[1]), 0),
        // The result is the whole destination (a view of it); only the rows set are written.
        Op::SetRows => {
            let rows = d.srcs[0].and_then(|s| ctx.get(s)).map_or(0, |s| s.nelements() as u64);
            let written = rows * out / elems.max(1);
            (sources() + written, 0)
        }
        // A direct convolution multiplies and adds a kernel's taps per result
        // element: all input channels, or the one of a depthwise kernel.
        Op::Conv2d(_) | Op::Conv2dDw(_) => {
            let [kw, kh, kc, _] = ne(ctx, d.srcs[0]);
            let taps = if matches!(d.op, Op::Conv2d(_)) { kw * kh * kc } else { kw * kh };
            (sources() + out, 2 * taps * elems)
        }
        _ => (sources() + out, elems),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DType;

    #[test]
    fn a_convolution_does_two_flops_per_kernel_tap() {
        let mut ctx = Context::new();
        let k = ctx.tensor(DType::F32, [3, 3, 4, 8]).unwrap();
        let x = ctx.tensor(DType::F32, [10, 10, 4, 1]).unwrap();
        let y = ctx.conv_2d_direct(k, x, crate::ConvParams::square(1, 1, 1)).unwrap();
        assert_eq!(node_cost(&ctx, ctx.desc(y).unwrap()).1, 2 * 36 * 800);
    }

    #[test]
    fn a_product_reads_both_operands_and_does_two_flops_per_multiply_add() {
        let mut ctx = Context::new();
        let w = ctx.tensor(DType::F32, [64, 32]).unwrap();
        let x = ctx.tensor(DType::F32, [64, 3]).unwrap();
        let y = ctx.mul_mat(w, x).unwrap();
        let (bytes, flops) = node_cost(&ctx, ctx.desc(y).unwrap());
        assert_eq!(bytes, (64 * 32 + 64 * 3 + 32 * 3) * 4);
        assert_eq!(flops, 2 * 64 * 32 * 3);
        let v = ctx.view_1d(x, 8, 0).unwrap();
        assert_eq!(node_cost(&ctx, ctx.desc(v).unwrap()), (0, 0));
    }
}
