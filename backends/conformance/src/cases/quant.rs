//! Cases for quantized tensors: MUL_MAT with quantized weights (every weight
//! type, IQ4_NL / IQ4_XS / MXFP4 from random blocks; K not a multiple of 256 for the 32-value types; N = 1, N ≤ 8 and
//! N > 8, which take different paths; batches with broadcast; permuted,
//! transposed and padded activations; padded weights), GET_ROWS from every
//! quantized type, CPY and SET_ROWS from F32 into Q4_0 / Q4_1 / Q5_0 / Q5_1 /
//! Q8_0, and block copies (CPY, CONT, DUP) of quantized tensors.
//!
//! The reference dequantizes with the engine's `dequantize_row` and rounds
//! rows written into quantized tensors through its reference quantizer, so
//! every case but MUL_MAT (which quantizes its activations) is exact.
//!
//! Perf-only cases: the shapes of SmolLM2-135M (Q4_1 weights, Q8_0 output
//! matrix, width 576, FFN 1536, vocabulary 49152; one token and a 64-token
//! prompt) and the 4096 × 14336 shapes of the goals.

use gantry_engine::{Context, DType, Result, TensorId};

use super::matmul::mul_mat_case_with;
use super::{Layout, input, shape};
use crate::{Built, Case, Init, Tolerance};

/// Weight types of the quantized MUL_MAT: the ones Gantry quantizes, then
/// the read-only lookup types (their leafs get seeded random blocks).
fn weights() -> impl Iterator<Item = DType> {
    DType::QUANTIZED_WEIGHTS.into_iter().chain(DType::LOOKUP_WEIGHTS)
}

/// Every quantized dtype (GET_ROWS reads them all).
fn all_quantized() -> impl Iterator<Item = DType> {
    DType::ALL.into_iter().filter(|d| d.is_quantized())
}

/// Quantized dtypes CPY and SET_ROWS write from F32.
const TARGETS: [DType; 5] = DType::QUANTIZE_TARGETS;

pub fn cases() -> Vec<Case> {
    let mut cases = mul_mat_cases();
    cases.extend(rows_cases());
    cases.extend(copy_cases());
    cases.extend(perf_cases());
    cases
}

/// How a quantized input is laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum QLayout {
    /// Densely packed.
    Contiguous,
    /// A view skipping the first block of rows one block longer.
    Padded,
}

impl QLayout {
    fn tag(self) -> &'static str {
        match self {
            QLayout::Contiguous => "",
            QLayout::Padded => ",padded",
        }
    }
}

/// A quantized input of shape `ne`: returns the leaf (which gets the data)
/// and the tensor the op reads.
fn quant_input(ctx: &mut Context, dtype: DType, ne: [usize; 4], layout: QLayout) -> Result<(TensorId, TensorId)> {
    match layout {
        QLayout::Contiguous => {
            let t = ctx.tensor(dtype, ne)?;
            Ok((t, t))
        }
        QLayout::Padded => {
            let bs = dtype.block_size();
            let leaf = ctx.tensor(dtype, [ne[0] + bs, ne[1], ne[2], ne[3]])?;
            let nb1 = dtype.row_size(ne[0] + bs).unwrap_or(0);
            let view = ctx.view_4d(leaf, ne, nb1, nb1 * ne[1], nb1 * ne[1] * ne[2], dtype.bytes_per_block())?;
            Ok((leaf, view))
        }
    }
}

/// Row lengths (K) for a weight type: one that is not a multiple of 256 for
/// the 32-value types, whole super-blocks for the K-quants.
fn ks(dtype: DType) -> [usize; 2] {
    if dtype.block_size() == 256 { [256, 512] } else { [160, 256] }
}

fn mul_mat_case(
    type_a: DType,
    mnk: (usize, usize, usize),
    bs: [usize; 2],
    nr: [usize; 2],
    la: QLayout,
    lb: Layout,
) -> Case {
    mul_mat_case_with(type_a, mnk, bs, nr, la.tag(), lb, move |ctx, ne| quant_input(ctx, type_a, ne, la))
}

fn mul_mat_cases() -> Vec<Case> {
    let mut cases = Vec::new();
    let (qc, c) = (QLayout::Contiguous, Layout::Contiguous);
    let one = [1, 1];
    for type_a in weights() {
        let [k0, k1] = ks(type_a);
        // N = 1 and 2 take the dot path, N = 8 just the tiled one, 9 and more too.
        for (m, n) in [(16, 1), (33, 1), (16, 2), (16, 8), (16, 9), (33, 17), (64, 45)] {
            for k in [k0, k1] {
                cases.push(mul_mat_case(type_a, (m, n, k), one, one, qc, c));
            }
        }
        // Batches, with src0's batch broadcast over src1's.
        for (m, n) in [(16, 1), (16, 9)] {
            for (bs, nr) in [([2, 3], [1, 1]), ([2, 3], [2, 1]), ([1, 1], [2, 2]), ([2, 1], [1, 3])] {
                cases.push(mul_mat_case(type_a, (m, n, k0), bs, nr, qc, c));
            }
        }
        // Activations that are not packed, weights with gaps between rows.
        for (m, n) in [(16, 1), (16, 12)] {
            for (la, lb) in [
                (qc, Layout::Permuted),
                (qc, Layout::Transposed),
                (qc, Layout::Padded),
                (QLayout::Padded, c),
                (QLayout::Padded, Layout::Permuted),
            ] {
                cases.push(mul_mat_case(type_a, (m, n, k0), [2, 3], one, la, lb));
            }
        }
        // Large enough to be split over threads (one column and many).
        cases.push(mul_mat_case(type_a, (600, 1, 1024), one, one, qc, c));
        cases.push(mul_mat_case(type_a, (96, 33, 1024), one, one, qc, c));
    }
    cases
}

/// Values per row for row cases of `dtype`: two blocks (one super-block).
fn row_len(dtype: DType) -> usize {
    if dtype.block_size() == 256 { 256 } else { 64 }
}

fn rows_cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for dtype in all_quantized() {
        let k = row_len(dtype);
        for (ne, idx_ne) in [([k, 5, 3, 2], [7, 3, 2, 1]), ([k, 100, 1, 1], [9, 1, 1, 1])] {
            for layout in [QLayout::Contiguous, QLayout::Padded] {
                let name = format!("GET_ROWS(type={dtype},ne={},idx={}{})", shape(ne), shape(idx_ne), layout.tag());
                cases.push(
                    Case::new("GET_ROWS", name, move |ctx| {
                        let (_, a) = quant_input(ctx, dtype, ne, layout)?;
                        let idx = ctx.tensor(DType::I32, idx_ne)?;
                        Ok(Built::output(ctx.get_rows(a, idx)?).init(idx, Init::Integers { lo: 0, hi: ne[1] as i32 }))
                    })
                    .tolerance(Tolerance::Exact),
                );
            }
        }
    }
    // (rows per [.., j, k] written, destination shape with k values per row, index shape).
    let sets = [(5, [20, 3, 2], [5, 3, 2, 1]), (5, [20, 3, 2], [5, 1, 1, 1]), (6, [6, 4, 1], [6, 2, 1, 1])];
    for dtype in TARGETS {
        for k in [32, 96] {
            for (n, [ne1, ne2, ne3], idx_ne) in sets {
                let ne = [k, ne1, ne2, ne3];
                for (ld, ls) in [(QLayout::Contiguous, Layout::Contiguous), (QLayout::Padded, Layout::Padded)] {
                    let name = format!(
                        "SET_ROWS(type={dtype},ne={},rows={n},idx={}{}{})",
                        shape(ne),
                        shape(idx_ne),
                        ld.tag(),
                        ls.tag().replace(',', ",src:")
                    );
                    cases.push(
                        Case::new("SET_ROWS", name, move |ctx| {
                            let (_, dst) = quant_input(ctx, dtype, ne, ld)?;
                            let (_, rows) = input(ctx, DType::F32, [k, n, ne2, ne3], ls)?;
                            let idx = ctx.tensor(DType::I32, idx_ne)?;
                            let out = ctx.set_rows(dst, rows, idx)?;
                            Ok(Built::output(out).init(idx, Init::DistinctIndices { n: ne1 }))
                        })
                        .tolerance(Tolerance::Exact),
                    );
                }
            }
        }
    }
    cases
}

fn copy_cases() -> Vec<Case> {
    let mut cases = Vec::new();
    // F32 into a quantized type: the source in any layout, the destination
    // with dense rows (packed, padded, or another shape with the same rows).
    for to in TARGETS {
        for k in [32, 160] {
            let ne = [k, 4, 3, 2];
            let variants = [
                (Layout::Contiguous, QLayout::Contiguous),
                (Layout::Permuted, QLayout::Contiguous),
                (Layout::Transposed, QLayout::Contiguous),
                (Layout::Padded, QLayout::Padded),
            ];
            for (ls, ld) in variants {
                let name = format!(
                    "CPY(type_src=f32,type_dst={to},ne={}{}{})",
                    shape(ne),
                    ls.tag().replace(',', ",src:"),
                    ld.tag().replace(',', ",dst:")
                );
                cases.push(
                    Case::new("CPY", name, move |ctx| {
                        let (_, a) = input(ctx, DType::F32, ne, ls)?;
                        let (_, b) = quant_input(ctx, to, ne, ld)?;
                        Ok(Built::output(ctx.cpy(a, b)?))
                    })
                    .tolerance(Tolerance::Exact),
                );
            }
            let name = format!("CPY(type_src=f32,type_dst={to},ne={},ne_dst=[{k},6,4,1])", shape(ne));
            cases.push(
                Case::new("CPY", name, move |ctx| {
                    let a = ctx.tensor(DType::F32, ne)?;
                    let b = ctx.tensor(to, [k, 6, 4])?;
                    Ok(Built::output(ctx.cpy(a, b)?))
                })
                .tolerance(Tolerance::Exact),
            );
        }
    }
    // Block copies of every quantized type into its own type.
    for dtype in all_quantized() {
        let k = row_len(dtype);
        let ne = [k, 4, 3, 1];
        for (ls, ld) in [
            (QLayout::Contiguous, QLayout::Contiguous),
            (QLayout::Padded, QLayout::Contiguous),
            (QLayout::Contiguous, QLayout::Padded),
        ] {
            let name = format!(
                "CPY(type_src={dtype},type_dst={dtype},ne={}{}{})",
                shape(ne),
                ls.tag().replace(',', ",src:"),
                ld.tag().replace(',', ",dst:")
            );
            cases.push(
                Case::new("CPY", name, move |ctx| {
                    let (_, a) = quant_input(ctx, dtype, ne, ls)?;
                    let (_, b) = quant_input(ctx, dtype, ne, ld)?;
                    Ok(Built::output(ctx.cpy(a, b)?))
                })
                .tolerance(Tolerance::Exact),
            );
        }
        // Packed into packed with other row lengths: the blocks in order.
        let name = format!("CPY(type_src={dtype},type_dst={dtype},ne={},ne_dst=[{},6,1,1])", shape(ne), 2 * k);
        cases.push(
            Case::new("CPY", name, move |ctx| {
                let a = ctx.tensor(dtype, ne)?;
                let b = ctx.tensor(dtype, [2 * k, 6])?;
                Ok(Built::output(ctx.cpy(a, b)?))
            })
            .tolerance(Tolerance::Exact),
        );
        let name = format!("CONT(type={dtype},ne={},padded)", shape(ne));
        cases.push(
            Case::new("CONT", name, move |ctx| {
                let (_, a) = quant_input(ctx, dtype, ne, QLayout::Padded)?;
                Ok(Built::output(ctx.cont(a)?))
            })
            .tolerance(Tolerance::Exact),
        );
        for layout in [QLayout::Contiguous, QLayout::Padded] {
            let name = format!("DUP(type={dtype},ne={}{})", shape(ne), layout.tag());
            cases.push(
                Case::new("DUP", name, move |ctx| {
                    let (_, a) = quant_input(ctx, dtype, ne, layout)?;
                    Ok(Built::output(ctx.dup(a)?))
                })
                .tolerance(Tolerance::Exact),
            );
        }
    }
    cases
}

/// SmolLM2-135M's products as (rows M, values per row K): attention Q and
/// output, attention K and V (3 KV heads of 64), FFN gate and up, FFN down,
/// and the output (the tied token embedding).
pub(super) const SMOLLM2_SHAPES: [(usize, usize); 5] = [(576, 576), (192, 576), (1536, 576), (576, 1536), (49152, 576)];

fn perf_cases() -> Vec<Case> {
    let mut cases = Vec::new();
    let (qc, c, one) = (QLayout::Contiguous, Layout::Contiguous, [1, 1]);
    // SmolLM2-135M's products (rows M, values per row K), in its weights'
    // type (Q4_1) and its output's (Q8_0) alike; F16 ones are in `matmul`.
    for dtype in [DType::Q4_1, DType::Q8_0] {
        for (m, k) in SMOLLM2_SHAPES {
            for n in [1, 64] {
                cases.push(mul_mat_case(dtype, (m, n, k), one, one, qc, c).perf_only());
            }
        }
    }
    for n in [1, 64] {
        let name = format!("GET_ROWS(type=q8_0,ne=[576,49152,1,1],idx=[{n},1,1,1])");
        cases.push(
            Case::new("GET_ROWS", name, move |ctx| {
                let a = ctx.tensor(DType::Q8_0, [576, 49152])?;
                let idx = ctx.tensor(DType::I32, [n])?;
                Ok(Built::output(ctx.get_rows(a, idx)?).init(idx, Init::Integers { lo: 0, hi: 49152 }))
            })
            // n rows read as Q8_0 and written as f32.
            .bytes((n * (DType::Q8_0.row_size(576).unwrap_or(0) + 576 * 4)) as f64)
            .perf_only(),
        );
    }
    // The goals: 4096 × 14336 weights, one token and a 512-token batch.
    for dtype in [DType::Q4_0, DType::Q4_1, DType::Q8_0, DType::Q4_K, DType::Q6_K] {
        for n in [1, 512] {
            cases.push(mul_mat_case(dtype, (14336, n, 4096), one, one, qc, c).perf_only());
        }
    }
    cases
}
