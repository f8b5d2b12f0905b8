//! The wgpu backend's kernels against small hand-computed references, on
//! whatever adapter this machine has (lavapipe in CI). Every test is skipped,
//! with a message, when there is no adapter.

use super::support::{Harness, assert_close, f16_round, values};
use gantry_engine::{BinaryOp, DType, Device, GluOp, RopeMode, RopeParams, UnaryOp};

/// Logical values of a contiguous 4-d array `v` with shape `ne` at (i0, i1, i2, i3).
fn at(v: &[f32], ne: [usize; 4], i: [usize; 4]) -> f32 {
    v[i[0] + ne[0] * (i[1] + ne[1] * (i[2] + ne[2] * i[3]))]
}

fn unary_ref(op: UnaryOp, x: f32) -> f32 {
    let x64 = x as f64;
    let y = match op {
        UnaryOp::Neg => -x64,
        UnaryOp::Abs => x64.abs(),
        UnaryOp::Sqr => x64 * x64,
        UnaryOp::Sqrt => x64.sqrt(),
        UnaryOp::Exp => x64.exp(),
        UnaryOp::Log => x64.ln(),
        UnaryOp::Tanh => x64.tanh(),
        UnaryOp::Relu => x64.max(0.0),
        UnaryOp::Gelu => {
            0.5 * x64 * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (x64 + 0.044715 * x64.powi(3))).tanh())
        }
        UnaryOp::GeluErf => 0.5 * x64 * (1.0 + erf(x64 / std::f64::consts::SQRT_2)),
        UnaryOp::Silu => x64 / (1.0 + (-x64).exp()),
        UnaryOp::Sigmoid => 1.0 / (1.0 + (-x64).exp()),
        UnaryOp::Sin => x64.sin(),
        UnaryOp::Cos => x64.cos(),
        UnaryOp::Softplus => x64.exp().ln_1p(),
        UnaryOp::Elu => {
            if x64 > 0.0 {
                x64
            } else {
                x64.exp_m1()
            }
        }
        UnaryOp::Hardswish => x64 * ((x64 + 3.0) / 6.0).clamp(0.0, 1.0),
        UnaryOp::Hardsigmoid => ((x64 + 3.0) / 6.0).clamp(0.0, 1.0),
        UnaryOp::GeluQuick => x64 / (1.0 + (-1.702 * x64).exp()),
        UnaryOp::Step => f64::from(u8::from(x64 > 0.0)),
        UnaryOp::Sgn => f64::from(u8::from(x64 > 0.0)) - f64::from(u8::from(x64 < 0.0)),
        UnaryOp::Round => x64.round(),
        UnaryOp::Floor => x64.floor(),
        UnaryOp::Ceil => x64.ceil(),
        UnaryOp::Trunc => x64.trunc(),
        UnaryOp::Expm1 => x64.exp_m1(),
    };
    y as f32
}

/// erf by its Taylor series (|x| < 3 here), independent of the shader's approximation.
fn erf(x: f64) -> f64 {
    let mut sum = 0.0;
    let mut term = x;
    for n in 0..80 {
        sum += term / (2 * n + 1) as f64;
        term *= -x * x / (n + 1) as f64;
    }
    2.0 / std::f64::consts::PI.sqrt() * sum
}

#[test]
fn wgpu_unary_scale_clamp_f32() {
    let dev = device_or_skip!();
    for op in UnaryOp::ALL {
        let mut h = Harness::new(dev);
        let (lo, hi) = if matches!(op, UnaryOp::Sqrt | UnaryOp::Log) { (0.1, 4.0) } else { (-3.0, 3.0) };
        let x = values(300, op as u64 + 1, lo, hi);
        let a = h.input(DType::F32, &[30, 10], &x);
        let y = h.ctx.unary(op, a).unwrap();
        h.compute(&[y]);
        let want: Vec<f32> = x.iter().map(|&v| unary_ref(op, v)).collect();
        assert_close(op.name(), &h.read(y), &want, 1e-5, 1e-5);
    }
    let mut h = Harness::new(dev);
    let x = values(100, 9, -3.0, 3.0);
    let a = h.input(DType::F32, &[100], &x);
    let s = h.ctx.scale(a, 2.5, -1.0).unwrap();
    let c = h.ctx.clamp(a, -0.5, 1.25).unwrap();
    let l = h.ctx.leaky_relu(a, 0.125).unwrap();
    h.compute(&[s, c, l]);
    assert_close("SCALE", &h.read(s), &x.iter().map(|v| v * 2.5 - 1.0).collect::<Vec<_>>(), 1e-6, 1e-6);
    assert_close("CLAMP", &h.read(c), &x.iter().map(|v| v.clamp(-0.5, 1.25)).collect::<Vec<_>>(), 0.0, 0.0);
    let leaky: Vec<f32> = x.iter().map(|&v| if v < 0.0 { 0.125 * v } else { v }).collect();
    assert_close("LEAKY_RELU", &h.read(l), &leaky, 0.0, 0.0);
}

#[test]
fn wgpu_unary_f16_and_views() {
    let dev = device_or_skip!();
    let mut h = Harness::new(dev);
    let x = f16_round(&values(64, 3, -2.0, 2.0));
    let a = h.input(DType::F16, &[8, 8], &x);
    let y = h.ctx.silu(a).unwrap();
    // A transposed view in, contiguous out: strided reads.
    let t = h.ctx.transpose(a).unwrap();
    let z = h.ctx.neg(t).unwrap();
    // With shader-f16 results are f16 stores; without, half-word atomics.
    h.compute(&[y, z]);
    let want: Vec<f32> = f16_round(&x.iter().map(|&v| unary_ref(UnaryOp::Silu, v)).collect::<Vec<_>>());
    assert_close("SILU f16", &h.read(y), &want, 2e-3, 2e-3);
    let mut want_t = vec![0.0; 64];
    for i in 0..8 {
        for j in 0..8 {
            want_t[i + 8 * j] = -x[j + 8 * i];
        }
    }
    assert_close("NEG of transpose", &h.read(z), &want_t, 0.0, 0.0);
}

#[test]
fn wgpu_binary_broadcast() {
    let dev = device_or_skip!();
    let ne = [6, 5, 4, 3];
    let bne = [6, 1, 4, 1];
    let x = values(ne.iter().product(), 11, -2.0, 2.0);
    let yv: Vec<f32> = values(bne.iter().product(), 12, 0.5, 2.0);
    for op in BinaryOp::ALL {
        let mut h = Harness::new(dev);
        let a = h.input(DType::F32, &ne, &x);
        let b = h.input(DType::F32, &bne, &yv);
        let c = h.ctx.binary(op, a, b).unwrap();
        h.compute(&[c]);
        let mut want = Vec::new();
        for i3 in 0..ne[3] {
            for i2 in 0..ne[2] {
                for i1 in 0..ne[1] {
                    for i0 in 0..ne[0] {
                        let av = at(&x, ne, [i0, i1, i2, i3]);
                        let bv = at(&yv, bne, [i0 % bne[0], i1 % bne[1], i2 % bne[2], i3 % bne[3]]);
                        want.push(op.apply(av, bv));
                    }
                }
            }
        }
        assert_close(op.name(), &h.read(c), &want, 1e-6, 1e-6);
    }
    // F16 a with F32 b, in place.
    if dev.facts().shader_f16 {
        let mut h = Harness::new(dev);
        let xa = f16_round(&values(40, 5, -1.0, 1.0));
        let a = h.input(DType::F16, &[10, 4], &xa);
        let b = h.input(DType::F32, &[10], &values(10, 6, -1.0, 1.0));
        let bv = h.input_values(b);
        let c = h.ctx.binary_inplace(BinaryOp::Add, a, b).unwrap();
        h.compute(&[c]);
        let want: Vec<f32> = f16_round(&(0..40).map(|i| xa[i] + bv[i % 10]).collect::<Vec<_>>());
        assert_close("ADD f16 in place", &h.read(a), &want, 1e-3, 1e-3);
    }
}

#[test]
fn wgpu_glu() {
    let dev = device_or_skip!();
    let x = values(2 * 16 * 3, 21, -3.0, 3.0);
    for op in GluOp::ALL {
        let unary = match op {
            GluOp::Swiglu => UnaryOp::Silu,
            GluOp::Geglu => UnaryOp::Gelu,
            GluOp::Reglu => UnaryOp::Relu,
            GluOp::GegluErf => UnaryOp::GeluErf,
            GluOp::GegluQuick => UnaryOp::GeluQuick,
        };
        let act = |v: f32| unary_ref(unary, v);
        for swapped in [false, true] {
            let mut h = Harness::new(dev);
            let a = h.input(DType::F32, &[32, 3], &x);
            let y = h.ctx.glu(op, a, swapped).unwrap();
            h.compute(&[y]);
            let mut want = Vec::new();
            for r in 0..3 {
                for i in 0..16 {
                    let (first, second) = (x[r * 32 + i], x[r * 32 + 16 + i]);
                    want.push(if swapped { act(second) * first } else { act(first) * second });
                }
            }
            assert_close(&format!("{} swapped={swapped}", op.name()), &h.read(y), &want, 1e-5, 1e-5);
        }
        let mut h = Harness::new(dev);
        let g = values(48, 22, -1.0, 1.0);
        let a = h.input(DType::F32, &[16, 3], &x[..48]);
        let b = h.input(DType::F32, &[16, 3], &g);
        let y = h.ctx.glu_split(op, a, b).unwrap();
        h.compute(&[y]);
        let want: Vec<f32> = (0..48).map(|i| act(x[i]) * g[i]).collect();
        assert_close(&format!("{} split", op.name()), &h.read(y), &want, 1e-5, 1e-5);
    }
}

#[test]
fn wgpu_copies_concat_repeat() {
    let dev = device_or_skip!();
    let ne = [4, 3, 2, 1];
    let x = values(24, 31, -5.0, 5.0);
    let mut h = Harness::new(dev);
    let a = h.input(DType::F32, &[4, 3, 2], &x);
    // CONT of a permuted view: result[i0, i1, i2] = a[i2, i0, i1]... permute axes [1, 2, 0, 3]:
    // source dim 0 -> 1, 1 -> 2, 2 -> 0.
    let p = h.ctx.permute(a, [1, 2, 0, 3]).unwrap();
    let c = h.ctx.cont(p).unwrap();
    let r = h.ctx.repeat_to(a, [8, 3, 4, 2]).unwrap();
    let b = h.input(DType::F32, &[4, 2, 2], &values(16, 32, -1.0, 1.0));
    let bv = h.input_values(b);
    let cat = h.ctx.concat(a, b, 1).unwrap();
    h.compute(&[c, r, cat]);
    let pne = [2, 4, 3, 1];
    let mut want = Vec::new();
    for i2 in 0..pne[2] {
        for i1 in 0..pne[1] {
            for i0 in 0..pne[0] {
                want.push(at(&x, ne, [i1, i2, i0, 0]));
            }
        }
    }
    assert_close("CONT of permute", &h.read(c), &want, 0.0, 0.0);
    let mut want = Vec::new();
    for i3 in 0..2 {
        for i2 in 0..4 {
            for i1 in 0..3 {
                for i0 in 0..8 {
                    let _ = i3;
                    want.push(at(&x, ne, [i0 % 4, i1 % 3, i2 % 2, 0]));
                }
            }
        }
    }
    assert_close("REPEAT", &h.read(r), &want, 0.0, 0.0);
    let mut want = Vec::new();
    for i2 in 0..2 {
        for i1 in 0..5 {
            for i0 in 0..4 {
                want.push(if i1 < 3 {
                    at(&x, ne, [i0, i1, i2, 0])
                } else {
                    at(&bv, [4, 2, 2, 1], [i0, i1 - 3, i2, 0])
                });
            }
        }
    }
    assert_close("CONCAT dim 1", &h.read(cat), &want, 0.0, 0.0);

    // CPY converting F32 -> F16 into a view of a bigger tensor, and I32 moves exactly.
    if dev.facts().shader_f16 {
        let mut h = Harness::new(dev);
        let src = h.input(DType::F32, &[6, 2], &x[..12]);
        let dst = h.input(DType::F16, &[6, 4], &[0.0; 24]);
        let nb1 = h.ctx.desc(dst).unwrap().nb[1];
        let view = h.ctx.view_2d(dst, 6, 2, nb1, nb1).unwrap();
        let y = h.ctx.cpy(src, view).unwrap();
        h.compute(&[y]);
        let mut want = vec![0.0; 24];
        want[6..18].copy_from_slice(&f16_round(&x[..12]));
        assert_close("CPY f32 -> f16 view", &h.read(dst), &want, 0.0, 0.0);
    }
    // BF16 (and F16 without shader-f16) results are written half a word at a time.
    let mut h = Harness::new(dev);
    let src = h.input(DType::F32, &[7, 3], &values(21, 33, -100.0, 100.0));
    let sv = h.input_values(src);
    let dst = h.ctx.tensor(DType::BF16, [7, 3]).unwrap();
    let y = h.ctx.cpy(src, dst).unwrap();
    h.compute(&[y]);
    let want: Vec<f32> = sv.iter().map(|&v| half::bf16::from_f32(v).to_f32()).collect();
    assert_close("CPY f32 -> bf16", &h.read(dst), &want, 0.0, 0.0);

    let mut h = Harness::new(dev);
    let big = [16_777_217, -2_000_000_001, 7, i32::MAX];
    let a = h.input_i32(&[4], &big);
    let d = h.ctx.dup(a).unwrap();
    h.compute(&[d]);
    assert_eq!(h.ctx.read_i32(d).unwrap_or_default().len(), 4);
    let mut raw = vec![0u8; 16];
    h.ctx.read_tensor_bytes(d, 0, &mut raw).unwrap();
    assert_eq!(bytemuck::cast_slice::<u8, i32>(&raw), &big, "I32 DUP is exact");
}

#[test]
fn wgpu_get_rows_set_rows() {
    let dev = device_or_skip!();
    let mut h = Harness::new(dev);
    let x = values(5 * 7 * 2, 41, -1.0, 1.0);
    let a = h.input(DType::F32, &[5, 7, 2], &x);
    let idx = h.input_i32(&[3, 2], &[6, 0, 2, 1, 1, 5]);
    let g = h.ctx.get_rows(a, idx).unwrap();
    h.compute(&[g]);
    let rows = [[6, 0, 2], [1, 1, 5]];
    let mut want = Vec::new();
    for (b, picks) in rows.iter().enumerate() {
        for &r in picks {
            want.extend((0..5).map(|i| at(&x, [5, 7, 2, 1], [i, r, b, 0])));
        }
    }
    assert_close("GET_ROWS f32", &h.read(g), &want, 0.0, 0.0);

    let dst_dtype = if dev.facts().shader_f16 { DType::F16 } else { DType::F32 };
    let mut h = Harness::new(dev);
    let cache = h.input(dst_dtype, &[4, 6], &[0.0; 24]);
    let rows = values(8, 42, -1.0, 1.0);
    let src = h.input(DType::F32, &[4, 2], &rows);
    let at_rows = h.input_i32(&[2], &[4, 1]);
    let y = h.ctx.set_rows(cache, src, at_rows).unwrap();
    h.compute(&[y]);
    let mut want = vec![0.0; 24];
    want[16..20].copy_from_slice(&rows[..4]);
    want[4..8].copy_from_slice(&rows[4..]);
    if dst_dtype == DType::F16 {
        want = f16_round(&want);
    }
    assert_close("SET_ROWS", &h.read(cache), &want, 0.0, 0.0);
}

#[test]
fn wgpu_reductions() {
    let dev = device_or_skip!();
    let ne = [37, 3, 2, 1];
    let x = values(37 * 6, 51, -2.0, 2.0);
    let mut h = Harness::new(dev);
    let a = h.input(DType::F32, &[37, 3, 2], &x);
    let s = h.ctx.sum(a).unwrap();
    let sr = h.ctx.sum_rows(a).unwrap();
    let m = h.ctx.mean(a).unwrap();
    let mat = h.input(DType::F32, &[300, 4], &values(1200, 52, -1.0, 1.0));
    let matv = h.input_values(mat);
    let am = h.ctx.argmax(mat).unwrap();
    h.compute(&[s, sr, m, am]);
    let total: f64 = x.iter().map(|&v| v as f64).sum();
    assert_close("SUM", &h.read(s), &[total as f32], 1e-4, 1e-5);
    let rows: Vec<f32> = x.chunks(ne[0]).map(|r| r.iter().map(|&v| v as f64).sum::<f64>() as f32).collect();
    assert_close("SUM_ROWS", &h.read(sr), &rows, 1e-5, 1e-5);
    let means: Vec<f32> = rows.iter().map(|v| v / ne[0] as f32).collect();
    assert_close("MEAN", &h.read(m), &means, 1e-6, 1e-5);
    let want: Vec<f32> = matv
        .chunks(300)
        .map(|r| r.iter().enumerate().fold((0, f32::MIN), |b, (i, &v)| if v > b.1 { (i, v) } else { b }).0 as f32)
        .collect();
    assert_eq!(h.read(am), want, "ARGMAX");
}

#[test]
fn wgpu_norms_softmax_mask() {
    let dev = device_or_skip!();
    let (n, rows) = (300, 4);
    let x = values(n * rows, 61, -3.0, 3.0);
    let mut h = Harness::new(dev);
    let a = h.input(DType::F32, &[n, rows], &x);
    let nm = h.ctx.norm(a, 1e-5).unwrap();
    let rms = h.ctx.rms_norm(a, 1e-6).unwrap();
    h.compute(&[nm, rms]);
    let mut want_n = Vec::new();
    let mut want_r = Vec::new();
    for r in x.chunks(n) {
        let mean = r.iter().map(|&v| v as f64).sum::<f64>() / n as f64;
        let var = r.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / n as f64;
        want_n.extend(r.iter().map(|&v| ((v as f64 - mean) / (var + 1e-5).sqrt()) as f32));
        let ms = r.iter().map(|&v| (v as f64).powi(2)).sum::<f64>() / n as f64;
        want_r.extend(r.iter().map(|&v| (v as f64 / (ms + 1e-6).sqrt()) as f32));
    }
    assert_close("NORM", &h.read(nm), &want_n, 1e-5, 1e-4);
    assert_close("RMS_NORM", &h.read(rms), &want_r, 1e-5, 1e-4);

    // Softmax with a causal F16/F32 mask, scale and ALiBi over 3 heads.
    let (nkv, nq, heads) = (10, 3, 3);
    let logits = values(nkv * nq * heads, 62, -4.0, 4.0);
    let mut mask = vec![0.0f32; nkv * 4];
    for q in 0..4 {
        for k in 0..nkv {
            if k > q + 6 {
                mask[q * nkv + k] = f32::NEG_INFINITY;
            }
        }
    }
    for mask_dtype in [DType::F32, DType::F16] {
        for max_bias in [0.0f32, 8.0] {
            let mut h = Harness::new(dev);
            let l = h.input(DType::F32, &[nkv, nq, heads], &logits);
            let m = h.input(mask_dtype, &[nkv, 4], &mask);
            let y = h.ctx.soft_max_ext(l, Some(m), 0.7, max_bias).unwrap();
            h.compute(&[y]);
            let mut want = Vec::new();
            for hd in 0..heads {
                let slope = if max_bias > 0.0 {
                    let n_log2 = 2.0f32; // 3 heads -> 2
                    let (m0, m1) = (2f32.powf(-max_bias / n_log2), 2f32.powf(-max_bias / 2.0 / n_log2));
                    if (hd as f32) < n_log2 { m0.powi(hd as i32 + 1) } else { m1.powi(2 * (hd as i32 - 2) + 1) }
                } else {
                    1.0
                };
                for q in 0..nq {
                    let row: Vec<f64> = (0..nkv)
                        .map(|k| (logits[(hd * nq + q) * nkv + k] * 0.7) as f64 + (slope * mask[q * nkv + k]) as f64)
                        .collect();
                    let mx = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                    let sum: f64 = row.iter().map(|v| (v - mx).exp()).sum();
                    want.extend(row.iter().map(|v| ((v - mx).exp() / sum) as f32));
                }
            }
            assert_close(&format!("SOFT_MAX mask {mask_dtype} max_bias {max_bias}"), &h.read(y), &want, 1e-6, 1e-5);
        }
    }

    let mut h = Harness::new(dev);
    let a = h.input(DType::F32, &[5, 4, 2], &values(40, 63, -1.0, 1.0));
    let av = h.input_values(a);
    let d = h.ctx.diag_mask_inf(a, 1).unwrap();
    h.compute(&[d]);
    let want: Vec<f32> = (0..40).map(|i| if i % 5 > 1 + (i / 5) % 4 { f32::NEG_INFINITY } else { av[i] }).collect();
    assert_close("DIAG_MASK_INF", &h.read(d), &want, 0.0, 0.0);
}

/// ROPE reference from ggml's formulas (rope_yarn with its ramp and corr dims).
fn rope_ref(x: &[f32], ne: [usize; 4], pos: &[i32], ff: Option<&[f32]>, p: &RopeParams) -> Vec<f32> {
    let n_dims = p.n_dims;
    let corr = |beta: f32| {
        n_dims as f64 * (p.n_ctx_orig as f64 / (beta as f64 * 2.0 * std::f64::consts::PI)).ln()
            / (2.0 * (p.freq_base as f64).ln())
    };
    let low = corr(p.beta_fast).floor().max(0.0);
    let high = corr(p.beta_slow).ceil().min(n_dims as f64 - 1.0);
    let mut out = x.to_vec();
    for i3 in 0..ne[3] {
        for i2 in 0..ne[2] {
            for i1 in 0..ne[1] {
                let base = ne[0] * (i1 + ne[1] * (i2 + ne[2] * i3));
                for j in 0..n_dims / 2 {
                    let theta_extrap = pos[i2] as f64 * (p.freq_base as f64).powf(-2.0 * j as f64 / n_dims as f64)
                        / ff.map_or(1.0, |f| f[j] as f64);
                    let theta_interp = p.freq_scale as f64 * theta_extrap;
                    let mut theta = theta_interp;
                    let mut mscale = p.attn_factor as f64;
                    if p.ext_factor != 0.0 {
                        let y = (j as f64 - low) / (high - low).max(0.001);
                        let ramp = (1.0 - y.clamp(0.0, 1.0)) * p.ext_factor as f64;
                        theta = theta_interp * (1.0 - ramp) + theta_extrap * ramp;
                        mscale *= 1.0 + 0.1 * (1.0 / p.freq_scale as f64).ln();
                    }
                    let (e0, e1) = match p.mode {
                        RopeMode::Normal => (2 * j, 2 * j + 1),
                        RopeMode::Neox => (j, j + n_dims / 2),
                    };
                    let (x0, x1) = (x[base + e0] as f64, x[base + e1] as f64);
                    out[base + e0] = ((x0 * theta.cos() - x1 * theta.sin()) * mscale) as f32;
                    out[base + e1] = ((x0 * theta.sin() + x1 * theta.cos()) * mscale) as f32;
                }
            }
        }
    }
    out
}

#[test]
fn wgpu_rope() {
    let dev = device_or_skip!();
    let ne = [12, 3, 5, 1];
    let x = values(ne.iter().product(), 71, -1.0, 1.0);
    let pos = [0, 1, 7, 30, 1000];
    let ff = values(4, 72, 1.0, 3.0);
    for mode in [RopeMode::Normal, RopeMode::Neox] {
        for yarn in [false, true] {
            for with_ff in [false, true] {
                let mut p = RopeParams::new(8, mode, 10000.0);
                if yarn {
                    p.n_ctx_orig = 4096;
                    p.freq_scale = 0.25;
                    p.ext_factor = 1.0;
                    p.attn_factor = 1.1;
                }
                let mut h = Harness::new(dev);
                let a = h.input(DType::F32, &[12, 3, 5], &x);
                let ps = h.input_i32(&[5], &pos);
                let f = with_ff.then(|| h.input(DType::F32, &[4], &ff));
                let y = h.ctx.rope(a, ps, f, p).unwrap();
                h.compute(&[y]);
                let want = rope_ref(&x, ne, &pos, with_ff.then_some(&ff[..]), &p);
                let what = format!("ROPE {mode:?} yarn={yarn} ff={with_ff}");
                assert_close(&what, &h.read(y), &want, 2e-4, 1e-3);
            }
        }
    }
}

/// `a^T b` in f64 over logical values: a [k, m, a2, a3], b [k, n, b2, b3].
fn mul_mat_ref(a: &[f32], ane: [usize; 4], b: &[f32], bne: [usize; 4]) -> Vec<f32> {
    let k = ane[0];
    let mut out = Vec::new();
    for i3 in 0..bne[3] {
        for i2 in 0..bne[2] {
            for n in 0..bne[1] {
                for m in 0..ane[1] {
                    let (a2, a3) = (i2 / (bne[2] / ane[2]), i3 / (bne[3] / ane[3]));
                    let s: f64 =
                        (0..k).map(|kk| at(a, ane, [kk, m, a2, a3]) as f64 * at(b, bne, [kk, n, i2, i3]) as f64).sum();
                    out.push(s as f32);
                }
            }
        }
    }
    out
}

#[test]
fn wgpu_mul_mat_plain() {
    let dev = device_or_skip!();
    // Up to 8 columns use the matrix-vector kernel, 9 and 70 the tiled one
    // (with ragged tiles); K = 45 is not a multiple of 8; src0's batch broadcasts.
    for (dtype, n) in [
        (DType::F32, 1),
        (DType::F32, 3),
        (DType::F32, 8),
        (DType::F32, 9),
        (DType::F32, 70),
        (DType::F16, 2),
        (DType::F16, 70),
    ] {
        let ane = [45, 67, 2, 1];
        let bne = [45, n, 4, 1];
        let mut av = values(ane.iter().product(), 81, -1.0, 1.0);
        if dtype == DType::F16 {
            av = f16_round(&av);
        }
        let bv = values(bne.iter().product(), 82, -1.0, 1.0);
        let mut h = Harness::new(dev);
        let a = h.input(dtype, &ane, &av);
        let b = h.input(DType::F32, &bne, &bv);
        let y = h.ctx.mul_mat(a, b).unwrap();
        h.compute(&[y]);
        assert_close(&format!("MUL_MAT {dtype} n={n}"), &h.read(y), &mul_mat_ref(&av, ane, &bv, bne), 1e-4, 1e-4);
    }
    // A permuted src1 (the attention's K^T Q pattern): strided rows.
    let mut h = Harness::new(dev);
    let av = values(16 * 9 * 2, 83, -1.0, 1.0);
    let qv = values(16 * 2 * 5, 84, -1.0, 1.0);
    let a = h.input(DType::F32, &[16, 9, 2], &av);
    let q = h.input(DType::F32, &[16, 2, 5], &qv);
    let qp = h.ctx.permute(q, [0, 2, 1, 3]).unwrap(); // [16, 5, 2]
    let y = h.ctx.mul_mat(a, qp).unwrap();
    h.compute(&[y]);
    let mut qlog = Vec::new();
    for i2 in 0..2 {
        for i1 in 0..5 {
            for i0 in 0..16 {
                qlog.push(at(&qv, [16, 2, 5, 1], [i0, i2, i1, 0]));
            }
        }
    }
    let want = mul_mat_ref(&av, [16, 9, 2, 1], &qlog, [16, 5, 2, 1]);
    assert_close("MUL_MAT permuted src1", &h.read(y), &want, 1e-4, 1e-4);
}

#[expect(clippy::too_many_arguments, reason = "the reference takes every input of FLASH_ATTN_EXT and its scalars")]
fn flash_ref(
    q: &[f32],
    qne: [usize; 4],
    k: &[f32],
    v: &[f32],
    kne: [usize; 4],
    dv: usize,
    mask: Option<&[f32]>,
    scale: f32,
    softcap: f32,
) -> Vec<f32> {
    let (d, nq, nh) = (qne[0], qne[1], qne[2]);
    let (nkv, nhkv) = (kne[1], kne[2]);
    let mut out = vec![0.0; dv * nh * nq];
    for iq in 0..nq {
        for h in 0..nh {
            let hk = h / (nh / nhkv);
            let mut s: Vec<f64> = (0..nkv)
                .map(|j| {
                    let mut dot = 0.0f64;
                    for c in 0..d {
                        dot += q[c + d * (iq + nq * h)] as f64 * k[c + d * (j + nkv * hk)] as f64;
                    }
                    let mut x = dot * scale as f64;
                    if softcap != 0.0 {
                        x = softcap as f64 * (x / softcap as f64).tanh();
                    }
                    x + mask.map_or(0.0, |m| m[j + nkv * iq] as f64)
                })
                .collect();
            let mx = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            s.iter_mut().for_each(|x| *x = (*x - mx).exp());
            let sum: f64 = s.iter().sum();
            for c in 0..dv {
                let o: f64 = (0..nkv).map(|j| s[j] * v[c + dv * (j + nkv * hk)] as f64).sum();
                out[c + dv * (h + nh * iq)] = (o / sum) as f32;
            }
        }
    }
    out
}

#[test]
fn wgpu_flash_attn() {
    let dev = device_or_skip!();
    let (d, nq, nh, nkv, nhkv, dv) = (40, 3, 4, 70, 2, 24);
    let qv = values(d * nq * nh, 91, -1.0, 1.0);
    let kv = values(d * nkv * nhkv, 92, -1.0, 1.0);
    let vv = values(dv * nkv * nhkv, 93, -1.0, 1.0);
    let mut mask = vec![0.0f32; nkv * nq];
    for q in 0..nq {
        for j in 0..nkv {
            if j > 60 + q {
                mask[q * nkv + j] = f32::NEG_INFINITY;
            }
        }
    }
    let kv_dtype = if dev.facts().shader_f16 { DType::F16 } else { DType::F32 };
    for softcap in [0.0f32, 20.0] {
        let mut h = Harness::new(dev);
        let q = h.input(DType::F32, &[d, nq, nh], &qv);
        let k = h.input(kv_dtype, &[d, nkv, nhkv], &kv);
        let v = h.input(kv_dtype, &[dv, nkv, nhkv], &vv);
        let m = h.input(DType::F16, &[nkv, nq], &mask);
        let y = h.ctx.flash_attn_ext(q, k, v, Some(m), 0.3, 0.0, softcap).unwrap();
        h.compute(&[y]);
        let (kr, vr) = if kv_dtype == DType::F16 { (f16_round(&kv), f16_round(&vv)) } else { (kv.clone(), vv.clone()) };
        let want = flash_ref(&qv, [d, nq, nh, 1], &kr, &vr, [d, nkv, nhkv, 1], dv, Some(&mask), 0.3, softcap);
        assert_close(&format!("FLASH_ATTN_EXT softcap {softcap}"), &h.read(y), &want, 1e-5, 1e-4);
    }
}

#[test]
fn wgpu_supports_op_is_honest() {
    let dev = device_or_skip!();
    let mut h = Harness::new(dev);
    let x = h.input(DType::F32, &[32, 2], &[0.5; 64]);
    // Copies between quantized tensors have no kernel here (quantizing F32 has).
    let q = h.ctx.tensor(DType::Q8_0, [32, 2]).unwrap();
    let cq = h.ctx.cont(q).unwrap();
    assert!(dev.unsupported_reason(&h.ctx, cq).is_some());
    let q2 = h.ctx.tensor(DType::Q8_0, [32, 2]).unwrap();
    let to_q = h.ctx.cpy(x, q2).unwrap();
    assert!(dev.unsupported_reason(&h.ctx, to_q).is_none());
    // Nor do dtypes without a dequantizer.
    let w = h.ctx.tensor(DType::Q8_1, [256, 2]).unwrap();
    let x2 = h.input(DType::F32, &[256, 1], &[1.0; 256]);
    let mm = h.ctx.mul_mat(w, x2).unwrap();
    assert!(dev.unsupported_reason(&h.ctx, mm).is_some());
    // Views compute nothing and are supported.
    let t = h.ctx.transpose(x).unwrap();
    assert!(dev.unsupported_reason(&h.ctx, t).is_none());
    // Computing an unsupported node is an error, not garbage.
    h.allocate();
    assert!(h.try_compute(&[cq]).is_err());
}

#[test]
fn wgpu_grid_beyond_one_dimension() {
    let dev = device_or_skip!();
    // 65535 * 256 + 1000 elements need a second grid dimension of workgroups.
    let n = 65535 * 256 + 1000;
    if dev.buffer_type().max_size() < 4 * n {
        eprintln!("skipped: largest buffer below {} bytes", 4 * n);
        return;
    }
    let x: Vec<f32> = (0..n).map(|i| (i % 1000) as f32).collect();
    let mut h = Harness::new(dev);
    let a = h.input(DType::F32, &[n], &x);
    let y = h.ctx.scale_inplace(a, 2.0, 1.0).unwrap();
    h.compute(&[y]);
    let got = h.read(a);
    let bad = got.iter().enumerate().find(|&(i, &v)| v != x[i] * 2.0 + 1.0);
    assert!(bad.is_none(), "element {:?} of {n} wrong", bad);
}
