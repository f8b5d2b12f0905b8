//! The sequence-model ops (issue 36's last list) on the CPU: their
//! conformance cases on their own (the whole suite runs them too),
//! hand-checkable values, and state indices that must be refused.

use gantry_cpu::CpuBackend;
use gantry_engine::{Backend, BufferUsage, Context, DType, GraphArena, TensorId};

const OPS: &str = "SSM_CONV,SSM_SCAN,SOLVE_TRI";

#[test]
fn sequence_cases_pass() {
    super::op_cases_pass(OPS, 3, 16);
}

/// Computes `out` on the CPU after writing the F32 and I32 inputs.
pub(super) fn compute(
    ctx: &mut Context,
    out: TensorId,
    f32s: &[(TensorId, &[f32])],
    i32s: &[(TensorId, &[i32])],
) -> gantry_engine::Result<Vec<f32>> {
    let arena = GraphArena::new();
    let graph = ctx.build_graph(&arena, &[out])?;
    let cpu = CpuBackend::with_threads(3)?;
    let buft = cpu.device().buffer_type();
    ctx.alloc_tensors(graph.leafs(), &buft, BufferUsage::Weights)?;
    ctx.alloc_tensors(graph.nodes(), &buft, BufferUsage::Compute)?;
    for (t, v) in f32s {
        ctx.set_f32(*t, v)?;
    }
    for (t, v) in i32s {
        ctx.set_i32(*t, v)?;
    }
    cpu.graph_compute(ctx, graph).into_result()?;
    ctx.read_f32(out)
}

#[test]
fn ssm_conv_slides_each_channel_window() {
    let mut ctx = Context::new();
    let sx = ctx.tensor(DType::F32, [4, 1, 1]).unwrap();
    let c = ctx.tensor(DType::F32, [2, 1]).unwrap();
    let out = ctx.ssm_conv(sx, c).unwrap();
    assert_eq!(ctx.desc(out).unwrap().ne, [1, 3, 1, 1]);
    let got = compute(&mut ctx, out, &[(sx, &[1.0, 2.0, 3.0, 4.0]), (c, &[10.0, 1.0])], &[]).unwrap();
    assert_eq!(got, [12.0, 23.0, 34.0]);
}

/// A one-element Mamba-2 scan of two tokens keeping three states, with
/// state `ids[0]` of `n_states` as the initial one.
fn tiny_scan(ids: i32, n_states: usize) -> gantry_engine::Result<Vec<f32>> {
    let mut ctx = Context::new();
    let s = ctx.tensor(DType::F32, [1, 1, 1, n_states])?;
    let x = ctx.tensor(DType::F32, [1, 1, 2, 1])?;
    let dt = ctx.tensor(DType::F32, [1, 2, 1])?;
    let a = ctx.tensor(DType::F32, [1, 1])?;
    let b = ctx.tensor(DType::F32, [1, 1, 2, 1])?;
    let c = ctx.tensor(DType::F32, [1, 1, 2, 1])?;
    let id = ctx.tensor(DType::I32, [1])?;
    let out = ctx.ssm_scan(s, x, dt, a, b, c, id, 3)?;
    let states: Vec<f32> = (0..n_states).map(|i| 0.5 + i as f32).collect();
    // softplus(21) is 21 in ggml; exp(21 · 0) = 1 keeps the state.
    let f32s: [(TensorId, &[f32]); 6] =
        [(s, &states), (x, &[1.0, 2.0]), (dt, &[21.0, 21.0]), (a, &[0.0]), (b, &[1.0, 1.0]), (c, &[1.0, 2.0])];
    compute(&mut ctx, out, &f32s, &[(id, &[ids])])
}

#[test]
fn ssm_scan_carries_the_state_and_keeps_snapshots() {
    // state 0.5 → 0.5 + 21·1 = 21.5 (y = 21.5), → 21.5 + 2·21 = 63.5 (y = 127);
    // then the final state, the one a token earlier, and zeros for the
    // snapshot from before the first token.
    assert_eq!(tiny_scan(0, 1).unwrap(), [21.5, 127.0, 63.5, 21.5, 0.0]);
    // ids pick the initial state: state 2 holds 2.5.
    assert_eq!(tiny_scan(2, 3).unwrap(), [23.5, 131.0, 65.5, 23.5, 0.0]);
}

#[test]
fn ssm_scan_refuses_state_ids_outside_the_states() {
    for (id, n_states) in [(1, 1), (-1, 2), (i32::MAX, 4), (i32::MIN, 1)] {
        let err = tiny_scan(id, n_states).unwrap_err().to_string();
        assert!(err.contains("SSM_SCAN") && err.contains(&format!("= {id} is outside")), "{err}");
    }
}

#[test]
fn ssm_builders_refuse_mismatched_shapes() {
    let mut ctx = Context::new();
    let sx = ctx.tensor(DType::F32, [2, 3, 1]).unwrap();
    let c_wide = ctx.tensor(DType::F32, [4, 3]).unwrap();
    let c_other = ctx.tensor(DType::F32, [2, 5]).unwrap();
    assert!(ctx.ssm_conv(sx, c_wide).unwrap_err().to_string().contains("SSM_CONV"));
    assert!(ctx.ssm_conv(sx, c_other).unwrap_err().to_string().contains("SSM_CONV"));
    // Mamba-1's per-element decay keeps only the final state.
    let s = ctx.tensor(DType::F32, [4, 1, 2, 1]).unwrap();
    let x = ctx.tensor(DType::F32, [1, 2, 3, 1]).unwrap();
    let dt = ctx.tensor(DType::F32, [2, 3, 1]).unwrap();
    let a = ctx.tensor(DType::F32, [4, 2]).unwrap();
    let b = ctx.tensor(DType::F32, [4, 1, 3, 1]).unwrap();
    let b3 = ctx.tensor(DType::F32, [4, 3, 3, 1]).unwrap();
    let ids = ctx.tensor(DType::I32, [1]).unwrap();
    assert!(ctx.ssm_scan(s, x, dt, a, b, b, ids, 1).is_ok());
    let err = ctx.ssm_scan(s, x, dt, a, b, b, ids, 2).unwrap_err().to_string();
    assert!(err.contains("SSM_SCAN") && err.contains("one kept state"), "{err}");
    // Three groups cannot share two heads.
    let err = ctx.ssm_scan(s, x, dt, a, b3, b3, ids, 1).unwrap_err().to_string();
    assert!(err.contains("SSM_SCAN") && err.contains("groups"), "{err}");
    assert!(ctx.ssm_scan(s, x, dt, a, b, b, ids, 0).is_err());
}

#[test]
fn solve_tri_substitutes_forward_and_ignores_the_upper_triangle() {
    let mut ctx = Context::new();
    let a = ctx.tensor(DType::F32, [2, 2]).unwrap();
    let b = ctx.tensor(DType::F32, [1, 2]).unwrap();
    let x = ctx.solve_tri(a, b, true, true, false).unwrap();
    // [[2, 99], [1, 4]] x = [4, 6]: x0 = 2, x1 = (6 - 2) / 4 = 1.
    let got = compute(&mut ctx, x, &[(a, &[2.0, 99.0, 1.0, 4.0]), (b, &[4.0, 6.0])], &[]).unwrap();
    assert_eq!(got, [2.0, 1.0]);
    let err = ctx.solve_tri(a, b, true, false, false).unwrap_err().to_string();
    assert!(err.contains("SOLVE_TRI"), "{err}");
}
