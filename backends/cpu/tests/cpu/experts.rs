//! The mixture-of-experts ops on the CPU: their conformance cases on their
//! own (a quick loop while working on them; the whole suite runs them too),
//! and ids out of range reported as errors naming the op and tensors.

use gantry_cpu::CpuBackend;
use gantry_engine::{Backend, BufferUsage, Context, DType, GraphArena, TensorId};

const OPS: &str = "MUL_MAT_ID,ADD_ID,ARGSORT,TOP_K,CUMSUM,SWIGLU_OAI,SOFT_MAX";

#[test]
fn expert_and_routing_cases_pass() {
    super::op_cases_pass(OPS, 2, 151);
}

/// Computes `out` on the CPU after writing `inputs`; the error message when it fails.
fn compute_err(ctx: &mut Context, out: TensorId, inputs: &[(TensorId, &[f32])]) -> Option<String> {
    let arena = GraphArena::new();
    let graph = ctx.build_graph(&arena, &[out]).unwrap();
    let cpu = CpuBackend::with_threads(2).unwrap();
    let buft = cpu.device().buffer_type();
    ctx.alloc_tensors(graph.leafs(), &buft, BufferUsage::Weights).unwrap();
    ctx.alloc_tensors(graph.nodes(), &buft, BufferUsage::Compute).unwrap();
    for (t, v) in inputs {
        ctx.set_f32(*t, v).unwrap();
    }
    cpu.graph_compute(ctx, graph).into_result().err().map(|e| e.to_string())
}

#[test]
fn an_expert_id_out_of_range_is_an_error_not_a_read() {
    for bad in [4.0, -1.0, 1e9] {
        let mut ctx = Context::new();
        let w = ctx.tensor(DType::Q8_0, [32, 3, 4]).unwrap();
        let x = ctx.tensor(DType::F32, [32, 1, 2]).unwrap();
        let ids = ctx.tensor(DType::I32, [2, 2]).unwrap();
        ctx.set_name(ids, "routing").unwrap();
        let y = ctx.mul_mat_id(w, x, ids).unwrap();
        let err = compute_err(&mut ctx, y, &[(w, &[0.5; 384]), (x, &[1.0; 64]), (ids, &[0.0, 1.0, 3.0, bad as f32])])
            .expect("an id outside the experts must fail the compute");
        assert!(err.contains("MUL_MAT_ID") && err.contains("routing") && err.contains("[1, 1]"), "{err}");
        assert!(err.contains("outside the 4 experts"), "{err}");
    }
}

#[test]
fn a_bias_id_out_of_range_is_an_error_not_a_read() {
    let mut ctx = Context::new();
    let a = ctx.tensor(DType::F32, [8, 2, 1]).unwrap();
    let b = ctx.tensor(DType::F32, [8, 3]).unwrap();
    let ids = ctx.tensor(DType::I32, [2, 1]).unwrap();
    let y = ctx.add_id(a, b, ids).unwrap();
    let err = compute_err(&mut ctx, y, &[(a, &[1.0; 16]), (b, &[1.0; 24]), (ids, &[2.0, 3.0])])
        .expect("an id outside the bias rows must fail the compute");
    assert!(err.contains("ADD_ID") && err.contains("row 3") && err.contains("outside the 3 rows"), "{err}");
}

/// `out` of a MUL_MAT_ID over `n_expert` experts of `dtype` weights
/// (`[k, 21, n_expert]`: each expert ends in a short group of rows), the
/// weights in `weights_buft`, the rest in plain CPU memory; tokens choose
/// experts all over the stack.
fn experts_product(
    weights_buft: &std::sync::Arc<dyn gantry_engine::BufferType>,
    dtype: DType,
    k: usize,
    (n_used, n_tokens): (usize, usize),
) -> Vec<f32> {
    let (m, n_expert) = (21, 7);
    let mut ctx = Context::new();
    let w = ctx.tensor(dtype, [k, m, n_expert]).unwrap();
    let x = ctx.tensor(DType::F32, [k, 1, n_tokens]).unwrap();
    let ids = ctx.tensor(DType::I32, [n_used, n_tokens]).unwrap();
    let y = ctx.mul_mat_id(w, x, ids).unwrap();
    let arena = GraphArena::new();
    let graph = ctx.build_graph(&arena, &[y]).unwrap();
    ctx.alloc_tensors(&[w], weights_buft, BufferUsage::Weights).unwrap();
    let cpu_buft = gantry_cpu::buffer_type();
    ctx.alloc_tensors(&[x, ids], &cpu_buft, BufferUsage::Weights).unwrap();
    ctx.alloc_tensors(graph.nodes(), &cpu_buft, BufferUsage::Compute).unwrap();
    let wv: Vec<f32> = (0..k * m * n_expert).map(|i| ((i * 7) % 23) as f32 / 11.0 - 1.0).collect();
    ctx.set_f32(w, &wv).unwrap();
    ctx.set_f32(x, &(0..k * n_tokens).map(|i| ((i * 5) % 17) as f32 / 8.0 - 1.0).collect::<Vec<_>>()).unwrap();
    // Distinct experts per token, all over the stack.
    let chosen: Vec<f32> = (0..n_used * n_tokens).map(|i| ((i % n_used * 3 + i / n_used) % n_expert) as f32).collect();
    ctx.set_f32(ids, &chosen).unwrap();
    let cpu = CpuBackend::with_threads(2).unwrap();
    cpu.graph_compute(&ctx, graph).into_result().unwrap();
    ctx.read_f32(y).unwrap()
}

#[test]
fn repacked_experts_give_the_plain_product() {
    // Several tokens (experts grouped by the tokens that chose them), and
    // one token's six experts (the shared products, four then two).
    for shape in [(2, 7), (6, 1)] {
        for (dtype, k) in [
            (DType::Q8_0, 64),
            (DType::Q4_0, 64),
            (DType::Q2_K, 256),
            (DType::Q3_K, 256),
            (DType::Q4_K, 256),
            (DType::Q6_K, 256),
        ] {
            let plain = experts_product(&gantry_cpu::buffer_type(), dtype, k, shape);
            let repacked = experts_product(&gantry_cpu::repack_buffer_type(), dtype, k, shape);
            assert!(plain.iter().any(|&v| v != 0.0));
            // Both quantize the activations and dot whole blocks: the same sums, in another order.
            for (i, (p, r)) in plain.iter().zip(&repacked).enumerate() {
                assert!(
                    (p - r).abs() <= 1e-4 * p.abs().max(1.0),
                    "{dtype} {shape:?} slot {i}: plain {p}, repacked {r}"
                );
            }
            // And each slot is its own expert's product: near the F32 weights'
            // (within the 4-bit weights' rounding), where another expert's
            // would be off by the whole scale. (Q2_K's rounding is a third
            // of the scale on these weights: its slots are the plain
            // product's, checked above.)
            if shape.1 == 1 && dtype != DType::Q2_K {
                let f32s = experts_product(&gantry_cpu::buffer_type(), DType::F32, k, shape);
                let err = repacked.iter().zip(&f32s).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
                let scale = f32s.iter().map(|v| v.abs()).fold(0f32, f32::max);
                assert!(err <= 0.15 * scale, "{dtype}: {err} off the F32 product (scale {scale})");
            }
        }
    }
}
