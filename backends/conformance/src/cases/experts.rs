//! Cases for the mixture-of-experts feed-forward: MUL_MAT_ID with every
//! weight type MUL_MAT takes (one activation row per chosen expert, and one
//! shared row broadcast over them; a token choosing one expert twice;
//! experts no token chooses; one token and many), ADD_ID, and gpt-oss's
//! SWIGLU_OAI (fused, swapped and split, inputs beyond the clamp).

use gantry_engine::DType;

use super::{Layout, input, shape};
use crate::{Built, Case, Init, Tolerance};

/// ggml's tolerance for MUL_MAT and MUL_MAT_ID.
const MUL_MAT_NMSE: f64 = 5e-4;

/// One MUL_MAT_ID case's sizes.
#[derive(Debug, Clone, Copy)]
struct Moe {
    n_expert: usize,
    n_used: usize,
    /// Activation rows per token: `n_used`, or 1 (broadcast).
    n_b: usize,
    n_tokens: usize,
    m: usize,
    k: usize,
    /// Ids may repeat within a token.
    repeats: bool,
}

fn mul_mat_id_case(type_a: DType, c: Moe) -> Case {
    let Moe { n_expert, n_used, n_b, n_tokens, m, k, repeats } = c;
    let name = format!(
        "MUL_MAT_ID(type_a={type_a},type_b=f32,n_mats={n_expert},n_used={n_used},b={},m={m},n={n_tokens},k={k}{})",
        n_b == 1,
        if repeats { ",repeats" } else { "" }
    );
    let flops = 2.0 * (m * k * n_used * n_tokens) as f64;
    Case::new("MUL_MAT_ID", name, move |ctx| {
        let w = ctx.tensor(type_a, [k, m, n_expert])?;
        let b = ctx.tensor(DType::F32, [k, n_b, n_tokens])?;
        let ids = ctx.tensor(DType::I32, [n_used, n_tokens])?;
        let out = ctx.mul_mat_id(w, b, ids)?;
        let pick =
            if repeats { Init::Integers { lo: 0, hi: n_expert as i32 } } else { Init::DistinctIndices { n: n_expert } };
        Ok(Built::output(out).init(ids, pick))
    })
    .tolerance(Tolerance::Nmse(MUL_MAT_NMSE))
    .flops(flops)
}

/// Every weight type: the plain ones, the ones Gantry quantizes, and the
/// read-only lookup types (seeded random blocks).
fn weight_types() -> impl Iterator<Item = DType> {
    [DType::F32, DType::F16, DType::BF16].into_iter().chain(DType::QUANTIZED_WEIGHTS).chain(DType::LOOKUP_WEIGHTS)
}

/// A row length every type takes: whole 256-value super-blocks for the K-quants.
fn k_for(dtype: DType) -> usize {
    if dtype.block_size() == 256 { 256 } else { 64 }
}

fn mul_mat_id_cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for type_a in weight_types() {
        let k = k_for(type_a);
        let moe = |n_expert, n_used, n_b, n_tokens, m| Moe { n_expert, n_used, n_b, n_tokens, m, k, repeats: false };
        for c in [
            // Token generation: one token, a few of many experts.
            moe(8, 2, 2, 1, 16),
            moe(8, 2, 1, 1, 16),
            // A batch: every expert chosen by several tokens.
            moe(4, 2, 2, 9, 33),
            moe(4, 2, 1, 9, 33),
            // More tokens per expert than the dot path's columns (the GEMM, the tiled driver).
            moe(4, 4, 4, 12, 16),
            // Experts nobody chooses, one expert per token.
            moe(16, 1, 1, 3, 7),
        ] {
            cases.push(mul_mat_id_case(type_a, c));
        }
        cases.push(mul_mat_id_case(type_a, Moe { repeats: true, ..moe(3, 4, 2, 5, 16) }));
    }
    // Odd row lengths for the plain types.
    for type_a in [DType::F32, DType::F16, DType::BF16] {
        cases.push(mul_mat_id_case(
            type_a,
            Moe { n_expert: 5, n_used: 3, n_b: 3, n_tokens: 4, m: 9, k: 37, repeats: false },
        ));
    }
    // A transposed view of the activations (rows not dense).
    cases.push(
        Case::new("MUL_MAT_ID", "MUL_MAT_ID(type_a=q4_0,type_b=f32,n_mats=4,n_used=2,b:permuted)".into(), |ctx| {
            let w = ctx.tensor(DType::Q4_0, [64, 8, 4])?;
            let (_, b) = input(ctx, DType::F32, [64, 2, 5, 1], Layout::Permuted)?;
            let ids = ctx.tensor(DType::I32, [2, 5])?;
            let out = ctx.mul_mat_id(w, b, ids)?;
            Ok(Built::output(out).init(ids, Init::DistinctIndices { n: 4 }))
        })
        .tolerance(Tolerance::Nmse(MUL_MAT_NMSE)),
    );
    // Qwen3-MoE-like sizes (perf only): 128 experts, 8 used, 512 tokens.
    for type_a in [DType::Q4_K, DType::Q8_0, DType::F16] {
        let c = Moe { n_expert: 128, n_used: 8, n_b: 1, n_tokens: 512, m: 768, k: 2048, repeats: false };
        cases.push(mul_mat_id_case(type_a, c).perf_only());
        cases.push(mul_mat_id_case(type_a, Moe { n_tokens: 1, ..c }).perf_only());
    }
    cases
}

fn add_id_cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for (n, n_used, n_tokens, n_expert) in [(16, 2, 5, 4), (33, 4, 1, 32), (1, 1, 1, 1), (64, 3, 7, 3)] {
        let name = format!("ADD_ID(n={n},n_used={n_used},n_tokens={n_tokens},n_expert={n_expert})");
        cases.push(
            Case::new("ADD_ID", name, move |ctx| {
                let a = ctx.tensor(DType::F32, [n, n_used, n_tokens])?;
                let b = ctx.tensor(DType::F32, [n, n_expert])?;
                let ids = ctx.tensor(DType::I32, [n_used, n_tokens])?;
                let out = ctx.add_id(a, b, ids)?;
                Ok(Built::output(out).init(ids, Init::Integers { lo: 0, hi: n_expert as i32 }))
            })
            .tolerance(Tolerance::Exact),
        );
    }
    // A permuted view of `a` (rows dense, slots strided).
    cases.push(
        Case::new("ADD_ID", "ADD_ID(n=16,n_used=3,n_tokens=4,n_expert=5,a:permuted)".into(), |ctx| {
            let (_, a) = input(ctx, DType::F32, [16, 3, 4, 1], Layout::Permuted)?;
            let b = ctx.tensor(DType::F32, [16, 5])?;
            let ids = ctx.tensor(DType::I32, [3, 4])?;
            let out = ctx.add_id(a, b, ids)?;
            Ok(Built::output(out).init(ids, Init::Integers { lo: 0, hi: 5 }))
        })
        .tolerance(Tolerance::Exact),
    );
    cases
}

fn swiglu_oai_cases() -> Vec<Case> {
    let mut cases = Vec::new();
    // gpt-oss's alpha and limit, and a limit every input passes.
    for (alpha, limit) in [(1.702f32, 7.0f32), (0.5, 100.0)] {
        for ne in [[64, 4, 3, 1], [10, 1, 1, 1], [2, 5, 2, 2]] {
            for form in ["fused", "swapped", "split"] {
                let name = format!("SWIGLU_OAI(ne={},{form},alpha={alpha},limit={limit})", shape(ne));
                cases.push(
                    Case::new("SWIGLU_OAI", name, move |ctx| {
                        let wide = Init::Uniform { lo: -10.0, hi: 10.0 };
                        let (out, leafs) = if form == "split" {
                            let a = ctx.tensor(DType::F32, ne)?;
                            let b = ctx.tensor(DType::F32, ne)?;
                            (ctx.swiglu_oai_split(a, b, alpha, limit)?, vec![a, b])
                        } else {
                            let a = ctx.tensor(DType::F32, [2 * ne[0], ne[1], ne[2], ne[3]])?;
                            (ctx.swiglu_oai(a, alpha, limit, form == "swapped")?, vec![a])
                        };
                        Ok(leafs.into_iter().fold(Built::output(out), |b, l| b.init(l, wide)))
                    })
                    .tolerance(Tolerance::Nmse(1e-6)),
                );
            }
        }
    }
    cases
}

pub fn cases() -> Vec<Case> {
    let mut cases = mul_mat_id_cases();
    cases.extend(add_id_cases());
    cases.extend(swiglu_oai_cases());
    cases
}
