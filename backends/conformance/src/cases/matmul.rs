//! Cases for MUL_MAT: src0 in F32, F16 and BF16; matrix-vector and matrix
//! products; odd sizes; batches with broadcast; permuted, transposed and
//! padded operands.

use gantry_engine::{Context, DType, Result, TensorId};

use super::{Layout, input};
use crate::{Built, Case, Tolerance};

/// ggml's tolerance for MUL_MAT.
const MUL_MAT_NMSE: f64 = 5e-4;

#[expect(clippy::too_many_arguments, reason = "test-backend-ops' MUL_MAT case parameters, one for one")]
fn mul_mat_case(
    type_a: DType,
    m: usize,
    n: usize,
    k: usize,
    bs: [usize; 2],
    nr: [usize; 2],
    la: Layout,
    lb: Layout,
) -> Case {
    mul_mat_case_with(type_a, (m, n, k), bs, nr, la.tag(), lb, move |ctx, ne| input(ctx, type_a, ne, la))
}

/// A MUL_MAT case of `m x k` src0 batches `bs` (built by `src0` from its
/// shape, described by `a_tag`) and F32 src1 with layout `lb`, broadcast `nr`
/// times; shared with the quantized cases, which lay out src0 their own way.
pub(super) fn mul_mat_case_with(
    type_a: DType,
    (m, n, k): (usize, usize, usize),
    bs: [usize; 2],
    nr: [usize; 2],
    a_tag: &str,
    lb: Layout,
    src0: impl Fn(&mut Context, [usize; 4]) -> Result<(TensorId, TensorId)> + Send + Sync + 'static,
) -> Case {
    let a_ne = [k, m, bs[0], bs[1]];
    let b_ne = [k, n, bs[0] * nr[0], bs[1] * nr[1]];
    let name = format!(
        "MUL_MAT(type_a={type_a},type_b=f32,m={m},n={n},k={k},bs={bs:?},nr={nr:?}{}{})",
        a_tag.replace(',', ",a:"),
        lb.tag().replace(',', ",b:")
    );
    let flops = 2.0 * (m * n * k) as f64 * (b_ne[2] * b_ne[3]) as f64;
    Case::new("MUL_MAT", name, move |ctx| {
        let (_, a) = src0(ctx, a_ne)?;
        let (_, b) = input(ctx, DType::F32, b_ne, lb)?;
        Ok(Built::output(ctx.mul_mat(a, b)?))
    })
    .tolerance(Tolerance::Nmse(MUL_MAT_NMSE))
    .flops(flops)
}

pub fn cases() -> Vec<Case> {
    let mut cases = Vec::new();
    let c = Layout::Contiguous;
    let shapes = [
        (16, 1, 256),
        (33, 1, 64),
        (16, 2, 256),
        (16, 8, 256),
        (16, 9, 256),
        (64, 45, 128),
        (129, 17, 67),
        (1, 1, 1),
        (7, 3, 5),
        (20, 16, 1),
        (33, 6, 70),
    ];
    for type_a in [DType::F32, DType::F16, DType::BF16] {
        for (m, n, k) in shapes {
            for (bs, nr) in [([1, 1], [1, 1]), ([2, 3], [1, 1]), ([2, 3], [2, 1]), ([1, 1], [2, 2])] {
                cases.push(mul_mat_case(type_a, m, n, k, bs, nr, c, c));
            }
        }
        for (m, n, k) in [(16, 1, 64), (16, 12, 64)] {
            for (la, lb) in [
                (c, Layout::Permuted),
                (c, Layout::Transposed),
                (c, Layout::Padded),
                (Layout::Permuted, c),
                (Layout::Padded, Layout::Permuted),
            ] {
                cases.push(mul_mat_case(type_a, m, n, k, [2, 3], [1, 1], la, lb));
            }
        }
        // Large enough for the CPU GEMM's threads (bands of rows; of columns
        // when the rows are few) and, past k = 1024, for several k blocks.
        cases.push(mul_mat_case(type_a, 256, 64, 256, [1, 1], [1, 1], c, c));
        cases.push(mul_mat_case(type_a, 600, 24, 64, [1, 1], [1, 1], c, c));
        cases.push(mul_mat_case(type_a, 40, 300, 96, [1, 1], [1, 1], c, c));
        cases.push(mul_mat_case(type_a, 72, 20, 1100, [1, 1], [1, 1], c, c));
    }
    for type_a in [DType::F32, DType::F16, DType::BF16] {
        cases.push(mul_mat_case(type_a, 14336, 1, 4096, [1, 1], [1, 1], c, c).perf_only());
    }
    for type_a in [DType::F32, DType::F16] {
        cases.push(mul_mat_case(type_a, 4096, 512, 4096, [1, 1], [1, 1], c, c).perf_only());
        cases.push(mul_mat_case(type_a, 4096, 8, 4096, [1, 1], [1, 1], c, c).perf_only());
    }
    // SmolLM2-135M's products with F16 weights (the quantized ones are in `quant`).
    for (m, k) in super::quant::SMOLLM2_SHAPES {
        for n in [1, 64] {
            cases.push(mul_mat_case(DType::F16, m, n, k, [1, 1], [1, 1], c, c).perf_only());
        }
    }
    // Attention-shaped: K^T Q per head, 32 heads over 8 KV heads.
    cases.push(mul_mat_case(DType::F16, 1024, 64, 128, [8, 1], [4, 1], c, c).perf_only());
    cases
}
