//! Quantized MUL_MAT on 2 threads: Gantry's integer kernels against the
//! dequantize-then-F32-GEMM path (the `gemm` crate), and F16/F32 baselines.
//!
//! Shapes (K values per row, M rows, N columns): 4096 × 14336 with N = 1
//! (token generation), 32 and 512 (prompt batches). `GANTRY_BENCH_GGML_SHAPE=1`
//! swaps to K = 14336, M = 4096, the shape of ggml's `test-backend-ops perf -o
//! MUL_MAT` (same bytes, same FLOPs). After criterion's own report a table
//! gives each case's median time, GB/s (weight bytes / time) and GFLOP/s.
//!
//! Run: `cargo bench -p gantry-backends --bench quant_mul_mat -- --warm-up-time 1 --measurement-time 3 [filter]`

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput};
use gantry_backends::cpu::quant::{
    QuantMatrix, dequantize_rows, f16_mat_vec, f32_mat_vec, quant_mul_mat, quant_mul_mat_scratch_size,
};
use gantry_engine::DType;
use gantry_engine::quant::quantize_row;
use half::f16;
use rayon::prelude::*;

const THREADS: usize = 2;

/// Per case: seconds per iteration of each sample, weight bytes, FLOPs.
type Timings = BTreeMap<String, (Vec<f64>, usize, f64)>;

/// Deterministic values in [−1, 1).
fn signal(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect()
}

/// Weights of `dtype` (row-major bytes), generated once per type.
fn weight_bytes(dtype: DType, k: usize, m: usize, pool: &rayon::ThreadPool) -> Vec<u8> {
    let row = dtype.row_size(k).expect("whole blocks");
    let mut data = vec![0u8; row * m];
    pool.install(|| {
        data.par_chunks_mut(row).enumerate().for_each(|(r, out)| {
            let x = signal(k, r as u64 + 1);
            match dtype {
                DType::F32 => out.copy_from_slice(bytemuck::cast_slice(&x)),
                DType::F16 => {
                    let h: Vec<f16> = x.iter().map(|&v| f16::from_f32(v)).collect();
                    out.copy_from_slice(bytemuck::cast_slice(&h));
                }
                q => quantize_row(q, &x, out).expect("quantize"),
            }
        });
    });
    data
}

/// The dequantize-then-GEMM baseline: all weights to f32 (in parallel), then one F32 GEMM.
fn dequant_gemm(
    dtype: DType,
    w: &[u8],
    (k, m, n): (usize, usize, usize),
    x: &[f32],
    wf: &mut [f32],
    dst: &mut [f32],
    pool: &rayon::ThreadPool,
) {
    let row = dtype.row_size(k).unwrap_or(0);
    pool.install(|| {
        wf.par_chunks_mut(k * 64).zip(w.par_chunks(row * 64)).for_each(|(out, src)| match dtype {
            DType::F32 => out.copy_from_slice(bytemuck::cast_slice(src)),
            DType::F16 => {
                let h: &[f16] = bytemuck::cast_slice(src);
                for (o, v) in out.iter_mut().zip(h) {
                    *o = v.to_f32();
                }
            }
            q => dequantize_rows(q, src, row, k, 0..src.len() / row, out, k).expect("dequantize"),
        });
        f32_gemm((k, m, n), wf, x, dst);
    });
}

/// dst[j][i] = Σ_t w[i][t] · x[j][t] with the `gemm` crate, on the current rayon pool.
fn f32_gemm((k, m, n): (usize, usize, usize), w: &[f32], x: &[f32], dst: &mut [f32]) {
    assert!(w.len() >= k * m && x.len() >= k * n && dst.len() >= m * n);
    // SAFETY: the three matrices lie within the slices (asserted above) with
    // the strides given: dst is m × n with m fastest, w is m × k row-major,
    // x^T is k × n with k fastest.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst.as_mut_ptr(),
            m as isize,
            1,
            false,
            w.as_ptr(),
            1,
            k as isize,
            x.as_ptr(),
            k as isize,
            1,
            0.0,
            1.0,
            false,
            false,
            false,
            gemm::Parallelism::Rayon(THREADS),
        )
    }
}

fn main() {
    let mut c = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .configure_from_args();
    let pool = &rayon::ThreadPoolBuilder::new().num_threads(THREADS).build().expect("thread pool");
    let (k, m) = if std::env::var_os("GANTRY_BENCH_GGML_SHAPE").is_some() { (14336, 4096) } else { (4096, 14336) };
    let weights: RefCell<BTreeMap<DType, Vec<u8>>> = RefCell::default();
    let times: RefCell<Timings> = RefCell::default();
    let mut wf = vec![0f32; k * m];

    for n in [1usize, 32, 512] {
        let x = signal(k * n, 777);
        let mut dst = vec![0f32; m * n];
        let flops = 2.0 * (k * m * n) as f64;
        let mut group = c.benchmark_group(format!("quant_mul_mat/k{k}_m{m}/n{n}"));
        for dtype in [DType::Q4_0, DType::Q4_1, DType::Q8_0, DType::Q4_K, DType::Q6_K, DType::F16, DType::F32] {
            let bytes = dtype.row_size(k).unwrap_or(0) * m;
            group.throughput(Throughput::Bytes(bytes as u64));
            let get_w = || weights.borrow_mut().entry(dtype).or_insert_with(|| weight_bytes(dtype, k, m, pool)).clone();
            let get_w = &get_w;
            let mut timed = |id: String, mut f: Box<dyn FnMut() + '_>| {
                let full = format!("n{n}/{id}");
                group.bench_function(&id, |b| {
                    b.iter_custom(|iters| {
                        let t = Instant::now();
                        for _ in 0..iters {
                            f();
                        }
                        let e = t.elapsed();
                        let mut times = times.borrow_mut();
                        let entry = times.entry(full.clone()).or_insert((Vec::new(), bytes, flops));
                        entry.0.push(e.as_secs_f64() / iters as f64);
                        e
                    })
                });
            };
            let name = dtype.name().to_lowercase();
            if dtype.is_quantized() {
                let mut scratch = vec![0u8; quant_mul_mat_scratch_size(dtype, k, n, THREADS).expect("scratch")];
                let mut w_cache: Option<Vec<u8>> = None;
                let (x, dst) = (&x, &mut dst);
                timed(
                    format!("gantry/{name}"),
                    Box::new(move || {
                        let w = w_cache.get_or_insert_with(get_w);
                        let qm = QuantMatrix { dtype, data: w, row_stride: dtype.row_size(k).unwrap_or(0), k, m };
                        quant_mul_mat(&qm, x, k, n, dst, m, &mut scratch, pool).expect("quant_mul_mat");
                    }),
                );
            } else if n == 1 {
                let mut w_cache: Option<Vec<u8>> = None;
                let (x, dst) = (&x, &mut dst);
                timed(
                    format!("gantry/{name}"),
                    Box::new(move || {
                        let w = w_cache.get_or_insert_with(get_w);
                        match dtype {
                            DType::F16 => f16_mat_vec(bytemuck::cast_slice(w), k, m, k, x, dst, pool),
                            _ => f32_mat_vec(bytemuck::cast_slice(w), k, m, k, x, dst, pool),
                        }
                        .expect("mat_vec");
                    }),
                );
            }
            // F32 weights need no dequantization: this is plain GEMM.
            let label = if dtype == DType::F32 { "gemm" } else { "dequant+gemm" };
            let mut w_cache: Option<Vec<u8>> = None;
            let (x, dst, wf) = (&x, &mut dst, &mut wf);
            timed(
                format!("{label}/{name}"),
                Box::new(move || {
                    let w = w_cache.get_or_insert_with(get_w);
                    dequant_gemm(dtype, w, (k, m, n), x, wf, dst, pool);
                }),
            );
        }
        group.finish();
    }
    c.final_summary();

    println!("\n{:<34} {:>12} {:>9} {:>10}", format!("k{k} m{m}, {THREADS} threads"), "median", "GB/s", "GFLOP/s");
    for (id, (samples, bytes, flops)) in times.borrow_mut().iter_mut() {
        samples.sort_by(f64::total_cmp);
        let t = samples[samples.len() / 2];
        println!("{id:<34} {:>9.3} ms {:>9.2} {:>10.2}", t * 1e3, *bytes as f64 / t / 1e9, *flops / t / 1e9);
    }
}
