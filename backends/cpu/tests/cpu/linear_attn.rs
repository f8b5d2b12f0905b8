//! The recurrent linear-attention ops on the CPU (RWKV_WKV6,
//! GATED_LINEAR_ATTN, RWKV_WKV7, GATED_DELTA_NET): their conformance cases
//! on their own, hand-checkable one-element recurrences, and shapes the
//! builders must refuse.

use gantry_engine::{Context, DType, TensorId};

use super::seq::compute;

const OPS: &str = "RWKV_WKV6,GATED_LINEAR_ATTN,RWKV_WKV7,GATED_DELTA_NET";

#[test]
fn linear_attention_cases_pass() {
    super::op_cases_pass(OPS, 3, 25);
}

/// `n` per-token inputs of one head of size 1 over `n_t` tokens.
fn token_inputs<const N: usize>(ctx: &mut Context, n_t: usize) -> [TensorId; N] {
    std::array::from_fn(|_| ctx.tensor(DType::F32, [1, 1, n_t]).unwrap())
}

#[test]
fn wkv6_carries_the_state_per_sequence() {
    // One sequence of two tokens: out = r·(tf·k·v + st), st' = st·td + k·v.
    // Token 0: k·v = 3, out = 1.5 + 10, st = 5 + 3; token 1: k·v = 2,
    // out = 1 + 8, st = 4 + 2.
    let run = |n_seqs: usize, states: &[f32]| {
        let mut ctx = Context::new();
        let [k, v, r, td] = token_inputs(&mut ctx, 2);
        let tf = ctx.tensor(DType::F32, [1, 1]).unwrap();
        let s = ctx.tensor(DType::F32, [1, n_seqs]).unwrap();
        let out = ctx.rwkv_wkv6(k, v, r, tf, td, s).unwrap();
        let f32s: [(TensorId, &[f32]); 6] =
            [(k, &[1.0, 2.0]), (v, &[3.0, 1.0]), (r, &[1.0, 1.0]), (tf, &[0.5]), (td, &[0.5, 0.5]), (s, states)];
        compute(&mut ctx, out, &f32s, &[]).unwrap()
    };
    assert_eq!(run(1, &[10.0]), [11.5, 9.0, 6.0]);
    // Two sequences of one token each, each from its own state.
    assert_eq!(run(2, &[10.0, 20.0]), [11.5, 21.0, 8.0, 12.0]);
}

#[test]
fn gla_and_wkv7_follow_their_recurrences() {
    let mut ctx = Context::new();
    let [k, v, q, g] = token_inputs(&mut ctx, 2);
    let s = ctx.tensor(DType::F32, [1, 1]).unwrap();
    let out = ctx.gated_linear_attn(k, v, q, g, s, 2.0).unwrap();
    // st' = st·g + k·v, out = st'·q·scale: 10·0.5 + 3 = 8 → 16; 4 + 2 = 6 → 12.
    let f32s: [(TensorId, &[f32]); 5] =
        [(k, &[1.0, 2.0]), (v, &[3.0, 1.0]), (q, &[1.0, 1.0]), (g, &[0.5, 0.5]), (s, &[10.0])];
    assert_eq!(compute(&mut ctx, out, &f32s, &[]).unwrap(), [16.0, 12.0, 6.0]);

    let mut ctx = Context::new();
    let [r, w, k, v, a, b] = token_inputs(&mut ctx, 2);
    let s = ctx.tensor(DType::F32, [1, 1]).unwrap();
    let out = ctx.rwkv_wkv7(r, w, k, v, a, b, s).unwrap();
    // sa = a·st; st' = st·w + v·k + sa·b; out = st'·r. Token 0: sa = 10,
    // st = 5 + 3 + 1 = 9; token 1: sa = 0, st = 4.5 + 2 = 6.5.
    let f32s: [(TensorId, &[f32]); 7] = [
        (r, &[1.0, 1.0]),
        (w, &[0.5, 0.5]),
        (k, &[1.0, 2.0]),
        (v, &[3.0, 1.0]),
        (a, &[1.0, 0.0]),
        (b, &[0.1, 0.0]),
        (s, &[10.0]),
    ];
    let got = compute(&mut ctx, out, &f32s, &[]).unwrap();
    assert!(got.iter().zip([9.0, 6.5, 6.5]).all(|(x, y)| (x - y).abs() < 1e-6), "{got:?}");
}

#[test]
fn gated_delta_net_corrects_towards_v_and_keeps_snapshots() {
    let mut ctx = Context::new();
    let [q, k, v, g, beta] = std::array::from_fn(|_| ctx.tensor(DType::F32, [1, 1, 2, 1]).unwrap());
    let s = ctx.tensor(DType::F32, [1, 1, 1, 1]).unwrap();
    let out = ctx.gated_delta_net(q, k, v, g, beta, s, 3).unwrap();
    // decay exp(0) = 1; d = (v - st·k)·beta; st += k·d; out = st·q / √1.
    // Token 0: d = 1, st = 1; token 1: d = 1.5, st = 2.5. Then the final
    // state, the one a token earlier, and zeros from before the first.
    let f32s: [(TensorId, &[f32]); 6] =
        [(q, &[1.0, 1.0]), (k, &[1.0, 1.0]), (v, &[2.0, 4.0]), (g, &[0.0, 0.0]), (beta, &[0.5, 0.5]), (s, &[0.0])];
    assert_eq!(compute(&mut ctx, out, &f32s, &[]).unwrap(), [1.0, 2.5, 2.5, 1.0, 0.0]);
}

#[test]
fn linear_attention_builders_refuse_mismatched_shapes() {
    let mut ctx = Context::new();
    let [k, v, r, td] = token_inputs(&mut ctx, 3);
    let tf = ctx.tensor(DType::F32, [1, 1]).unwrap();
    let tf_wide = ctx.tensor(DType::F32, [2, 1]).unwrap();
    let s1 = ctx.tensor(DType::F32, [1, 1]).unwrap();
    let s2 = ctx.tensor(DType::F32, [1, 2]).unwrap();
    assert!(ctx.rwkv_wkv6(k, v, r, tf, td, s1).is_ok());
    // Three tokens cannot split evenly over two sequences.
    let err = ctx.rwkv_wkv6(k, v, r, tf, td, s2).unwrap_err().to_string();
    assert!(err.contains("RWKV_WKV6") && err.contains("evenly"), "{err}");
    let err = ctx.rwkv_wkv6(k, v, r, tf_wide, td, s1).unwrap_err().to_string();
    assert!(err.contains("RWKV_WKV6") && err.contains("[S, H]"), "{err}");
    let short = ctx.tensor(DType::F32, [1, 1, 2]).unwrap();
    let err = ctx.rwkv_wkv7(short, k, k, k, k, k, s1).unwrap_err().to_string();
    assert!(err.contains("RWKV_WKV7"), "{err}");
    // Every token every other float: not contiguous.
    let wide = ctx.tensor(DType::F32, [2, 1, 3]).unwrap();
    let gaps = ctx.view_3d(wide, [1, 1, 3], 8, 8, 0).unwrap();
    let err = ctx.gated_linear_attn(gaps, v, r, td, s1, 1.0).unwrap_err().to_string();
    assert!(err.contains("GATED_LINEAR_ATTN") && err.contains("contiguous"), "{err}");

    // GATED_DELTA_NET: v [2, 4, 3, 2] sets the sizes.
    let v = ctx.tensor(DType::F32, [2, 4, 3, 2]).unwrap();
    let qk = ctx.tensor(DType::F32, [2, 2, 3, 1]).unwrap();
    let qk3 = ctx.tensor(DType::F32, [2, 3, 3, 2]).unwrap();
    let g = ctx.tensor(DType::F32, [1, 4, 3, 2]).unwrap();
    let g_kda = ctx.tensor(DType::F32, [2, 4, 3, 2]).unwrap();
    let g_bad = ctx.tensor(DType::F32, [3, 4, 3, 2]).unwrap();
    let beta = g;
    let state = ctx.tensor(DType::F32, [2, 2, 4, 2]).unwrap();
    assert!(ctx.gated_delta_net(qk, qk, v, g, beta, state, 1).is_ok());
    assert!(ctx.gated_delta_net(qk, qk, v, g_kda, beta, state, 4).is_ok());
    let err = ctx.gated_delta_net(qk3, qk, v, g, beta, state, 1).unwrap_err().to_string();
    assert!(err.contains("GATED_DELTA_NET") && err.contains("H_qk dividing H"), "{err}");
    let err = ctx.gated_delta_net(qk, qk, v, g_bad, beta, state, 1).unwrap_err().to_string();
    assert!(err.contains("GATED_DELTA_NET") && err.contains("[1 or S"), "{err}");
    let err = ctx.gated_delta_net(qk, qk, v, g, g_kda, state, 1).unwrap_err().to_string();
    assert!(err.contains("GATED_DELTA_NET"), "{err}");
    assert!(ctx.gated_delta_net(qk, qk, v, g, beta, state, 0).is_err());
}
