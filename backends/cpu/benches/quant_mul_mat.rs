//! Quantized MUL_MAT on 2 threads (`GANTRY_BENCH_THREADS`), as a user gets it: one MUL_MAT node
//! computed by the CPU backend (`graph_compute`), against the
//! dequantize-then-F32-GEMM path (the `gemm` crate) and F16/F32 weights.
//!
//! Groups (K values per row, M rows, N columns):
//! - `k4096_m14336/n{1,32,512}`: the goals, for Q4_0, Q4_1, Q8_0,
//!   Q4_K, Q6_K, F16 and F32: `backend/<type>` is the CPU backend,
//!   `dequant+gemm/<type>` the baseline (plain `gemm` for F32), and for N = 1
//!   `matvec/f16|f32` the standalone F16/F32 mat-vec kernels of `cpu::float_matvec`,
//!   and `read/<type>`, one parallel read of the backend's weight buffer: the
//!   memory floor (its table ratio is the backend's time over the floor's).
//!   `GANTRY_BENCH_GGML_SHAPE=1` swaps to K = 14336, M = 4096, the shape of
//!   ggml's `test-backend-ops perf -o MUL_MAT` (same bytes, same FLOPs).
//! - `smollm2/<shape>/n{1,64}`: the products of SmolLM2-135M (Q4_1 weights,
//!   Q8_0 output matrix) for one token and a 64-token prompt, where the
//!   per-call cost matters: `backend/<type>` against `dequant+gemm/<type>`.
//!
//! - `smollm2/layers_q4_1/n{1,64}`: SmolLM2's 30 layers of products, 210
//!   MUL_MAT nodes, as one graph against one compute per node (see
//!   `bench_layers`): the cost of a graph of small nodes.
//!
//! After criterion's own report a table gives each case's median time,
//! GB/s (weight bytes / time), GFLOP/s, and its speed-up over its baseline
//! (the baseline's median over its own) measured in the same run.
//!
//! Run: `cargo bench -p gantry-backends --bench quant_mul_mat -- --warm-up-time 1 --measurement-time 3 [filter]`

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use criterion::{BenchmarkGroup, Criterion, Throughput, measurement::WallTime};
use gantry_cpu::float_matvec::{Rows, f16_mat_vec, f32_mat_vec};
use gantry_cpu::quant::dequantize_rows;
use gantry_cpu::{self as cpu, CpuBackend};
use gantry_engine::quant::quantize_row;
use gantry_engine::{Backend, BufferUsage, Context, DType, GraphArena, TensorId};
use half::f16;
use rayon::prelude::*;

/// Threads of the backend and the baselines: `GANTRY_BENCH_THREADS`, default 2.
fn threads() -> usize {
    std::env::var("GANTRY_BENCH_THREADS").ok().and_then(|t| t.parse().ok()).filter(|&t| t > 0).unwrap_or(2)
}

/// One case's samples (seconds per iteration), weight bytes, FLOPs, and the
/// case (full id) it is compared with in the table.
struct Timing {
    samples: Vec<f64>,
    bytes: usize,
    flops: f64,
    baseline: Option<String>,
}

/// Every case timed, by full id (`<prefix>/<id>`).
type Timings = BTreeMap<String, Timing>;

/// Deterministic values in [−1, 1).
fn signal(n: usize, seed: u64) -> Vec<f32> {
    gantry_engine::SplitMix64::new(seed).values(n, -1.0, 1.0)
}

/// Weights of `dtype` (row-major bytes), generated in parallel.
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

/// One MUL_MAT node on the CPU backend, allocated and filled once.
struct BackendProduct {
    ctx: Context,
    arena: GraphArena,
    w: TensorId,
    y: TensorId,
}

impl BackendProduct {
    /// The product with its weights in a CPU buffer, or, `repacked`, in a
    /// `CPU_REPACK` one.
    fn new(dtype: DType, (k, m, n): (usize, usize, usize), weights: &[u8], x: &[f32], repacked: bool) -> Self {
        let mut ctx = Context::new();
        let w = ctx.tensor(dtype, [k, m]).expect("weights");
        let xt = ctx.tensor(DType::F32, [k, n]).expect("activations");
        let y = ctx.mul_mat(w, xt).expect("mul_mat");
        if repacked {
            ctx.alloc_tensors(&[w], &cpu::repack_buffer_type(), BufferUsage::Weights).expect("alloc");
            ctx.alloc_tensors(&[xt, y], &cpu::buffer_type(), BufferUsage::Any).expect("alloc");
        } else {
            ctx.alloc_tensors(&[w, xt, y], &cpu::buffer_type(), BufferUsage::Any).expect("alloc");
        }
        ctx.set_bytes(w, weights).expect("weights");
        ctx.set_f32(xt, x).expect("activations");
        Self { ctx, arena: GraphArena::new(), w, y }
    }

    fn compute(&self, backend: &CpuBackend) {
        let graph = self.ctx.build_graph(&self.arena, &[self.y]).expect("graph");
        backend.graph_compute(&self.ctx, graph).into_result().expect("compute");
    }

    /// Reads every weight byte once on the pool (wrapping sums of 64-bit
    /// words, which vectorize) from the backend's own buffer: the floor under
    /// any product that streams the weights from memory.
    fn read_weights(&self, bytes: usize, pool: &rayon::ThreadPool) -> u64 {
        let (entry, placement) = self.ctx.tensor_buffer(self.w).expect("weights placed");
        let data = match entry.buffer.as_any().downcast_ref::<cpu::RepackBuffer>() {
            Some(repacked) => repacked.matrix(self.w, placement.offset).expect("repacked weights").data,
            None => {
                let p = self.ctx.host_ptr(self.w).expect("weights on the host");
                // SAFETY: the weight tensor is placed in a host buffer and spans
                // `bytes` bytes from `p`; nothing writes it while this runs.
                unsafe { std::slice::from_raw_parts(p.cast_const(), bytes) }
            }
        };
        let (head, words, tail) = bytemuck::pod_align_to::<u8, u64>(data);
        let edges = head.iter().chain(tail).map(|&b| u64::from(b)).sum::<u64>();
        // One contiguous part per thread, as the kernels split their rows.
        let part = words.len().div_ceil(threads()).max(1);
        pool.install(|| words.par_chunks(part).map(sum_words).reduce(|| 0, u64::wrapping_add)).wrapping_add(edges)
    }
}

/// Σ of the words (wrapping), eight lanes at a time, with AVX2 where the CPU
/// has it (the bench is compiled for the baseline x86-64).
fn sum_words(words: &[u64]) -> u64 {
    #[inline(always)]
    fn lanes(words: &[u64]) -> u64 {
        let mut acc = [0u64; 8];
        let mut chunks = words.chunks_exact(8);
        for c in &mut chunks {
            for (a, w) in acc.iter_mut().zip(c) {
                *a = a.wrapping_add(*w);
            }
        }
        chunks.remainder().iter().chain(&acc).fold(0, |a, &w| a.wrapping_add(w))
    }
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx2")]
        fn avx2(words: &[u64]) -> u64 {
            lanes(words)
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2 (checked just above).
            return unsafe { avx2(words) };
        }
    }
    lanes(words)
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
    let wf = &mut wf[..k * m];
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
            gemm::Parallelism::Rayon(threads()),
        )
    }
}

/// Times `f` as case `id` of `group`, keeping every sample for the table,
/// where it is compared with case `baseline` (an id of the same group).
fn timed(
    group: &mut BenchmarkGroup<'_, WallTime>,
    times: &RefCell<Timings>,
    prefix: &str,
    id: &str,
    baseline: Option<&str>,
    (bytes, flops): (usize, f64),
    mut f: impl FnMut(),
) {
    let full = format!("{prefix}/{id}");
    let baseline = baseline.map(|b| format!("{prefix}/{b}"));
    group.bench_function(id, |b| {
        b.iter_custom(|iters| {
            let t = Instant::now();
            for _ in 0..iters {
                f();
            }
            let e = t.elapsed();
            let mut times = times.borrow_mut();
            let entry = times.entry(full.clone()).or_insert_with(|| Timing {
                samples: Vec::new(),
                bytes,
                flops,
                baseline: baseline.clone(),
            });
            entry.samples.push(e.as_secs_f64() / iters as f64);
            e
        })
    });
}

/// Benchmarks one shape for `dtypes`: the backend, the dequantize-then-GEMM
/// baseline, and (for N = 1) the standalone F16/F32 mat-vecs.
fn bench_shape(
    c: &mut Criterion,
    times: &RefCell<Timings>,
    (group_name, prefix): (&str, &str),
    (k, m, n): (usize, usize, usize),
    dtypes: &[DType],
    (backend, pool): (&CpuBackend, &rayon::ThreadPool),
) {
    let mut group = c.benchmark_group(group_name);
    let x = signal(k * n, 777);
    let mut dst = vec![0f32; m * n];
    let mut wf = Vec::new();
    let flops = 2.0 * (k * m * n) as f64;
    for &dtype in dtypes {
        let name = dtype.name().to_lowercase();
        let bytes = dtype.row_size(k).unwrap_or(0) * m;
        group.throughput(Throughput::Bytes(bytes as u64));
        // Generated only when a case of this type passes the filter.
        let weights: RefCell<Option<Vec<u8>>> = RefCell::default();
        let w = || -> std::cell::Ref<'_, Vec<u8>> {
            if weights.borrow().is_none() {
                *weights.borrow_mut() = Some(weight_bytes(dtype, k, m, pool));
            }
            std::cell::Ref::map(weights.borrow(), |w| w.as_ref().expect("generated above"))
        };
        // F32 weights need no dequantization: the baseline is plain GEMM.
        let baseline = format!("{}/{name}", if dtype == DType::F32 { "gemm" } else { "dequant+gemm" });
        let mut product: Option<BackendProduct> = None;
        timed(&mut group, times, prefix, &format!("backend/{name}"), Some(&baseline), (bytes, flops), || {
            product.get_or_insert_with(|| BackendProduct::new(dtype, (k, m, n), &w(), &x, false)).compute(backend)
        });
        if cpu::repacks_layout(&gantry_engine::TensorDesc::contiguous(dtype, [k, m, 1, 1]).expect("shape").layout()) {
            // The same product from the weights repacked at load (`CPU_REPACK`),
            // against the plain layout; for N = 1 also its floor, a read of
            // the repacked bytes.
            let mut repacked: Option<BackendProduct> = None;
            let plain = format!("backend/{name}");
            timed(&mut group, times, prefix, &format!("repacked/{name}"), Some(&plain), (bytes, flops), || {
                repacked.get_or_insert_with(|| BackendProduct::new(dtype, (k, m, n), &w(), &x, true)).compute(backend)
            });
            if n == 1 {
                timed(
                    &mut group,
                    times,
                    prefix,
                    &format!("read-repacked/{name}"),
                    Some(&format!("repacked/{name}")),
                    (bytes, flops),
                    || {
                        let p = repacked.get_or_insert_with(|| BackendProduct::new(dtype, (k, m, n), &w(), &x, true));
                        std::hint::black_box(p.read_weights(bytes, pool));
                    },
                );
            }
        }
        if n == 1 {
            // The memory floor, compared with the backend: its "speed-up" is
            // how many times the floor the backend takes.
            timed(
                &mut group,
                times,
                prefix,
                &format!("read/{name}"),
                Some(&format!("backend/{name}")),
                (bytes, flops),
                || {
                    let p = product.get_or_insert_with(|| BackendProduct::new(dtype, (k, m, n), &w(), &x, false));
                    std::hint::black_box(p.read_weights(bytes, pool));
                },
            );
        }
        drop(product);
        if n == 1 && matches!(dtype, DType::F16 | DType::F32) {
            timed(&mut group, times, prefix, &format!("matvec/{name}"), Some(&baseline), (bytes, flops), || {
                let w = w();
                match dtype {
                    DType::F16 => {
                        f16_mat_vec(Rows { data: bytemuck::cast_slice(&w), k, m, row_stride: k }, &x, &mut dst, pool)
                    }
                    _ => f32_mat_vec(Rows { data: bytemuck::cast_slice(&w), k, m, row_stride: k }, &x, &mut dst, pool),
                }
                .expect("mat_vec");
            });
        }
        timed(&mut group, times, prefix, &baseline, None, (bytes, flops), || {
            if wf.len() < k * m {
                wf.resize(k * m, 0.0);
            }
            dequant_gemm(dtype, &w(), (k, m, n), &x, &mut wf, &mut dst, pool);
        });
    }
    group.finish();
}

fn main() {
    let mut c = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .configure_from_args();
    let pool = &rayon::ThreadPoolBuilder::new().num_threads(threads()).build().expect("thread pool");
    let backend = &CpuBackend::with_threads(threads()).expect("CPU backend");
    let times: RefCell<Timings> = RefCell::default();

    let (k, m) = if std::env::var_os("GANTRY_BENCH_GGML_SHAPE").is_some() { (14336, 4096) } else { (4096, 14336) };
    let goal_types = [DType::Q4_0, DType::Q4_1, DType::Q8_0, DType::Q4_K, DType::Q6_K, DType::F16, DType::F32];
    for n in [1usize, 32, 512] {
        let group = format!("quant_mul_mat/k{k}_m{m}/n{n}");
        bench_shape(&mut c, &times, (&group, &format!("n{n}")), (k, m, n), &goal_types, (backend, pool));
    }

    // SmolLM2-135M: (name, weights, K, M).
    let smollm2 = [
        ("attn_q", DType::Q4_1, 576, 576),
        ("attn_kv", DType::Q4_1, 576, 192),
        ("ffn_up", DType::Q4_1, 576, 1536),
        ("ffn_down", DType::Q4_1, 1536, 576),
        ("output", DType::Q8_0, 576, 49152),
    ];
    for (name, dtype, k, m) in smollm2 {
        for n in [1usize, 64] {
            let group = format!("smollm2/{name}_k{k}_m{m}/n{n}");
            let prefix = format!("smollm2 {name} n{n}");
            bench_shape(&mut c, &times, (&group, &prefix), (k, m, n), &[dtype], (backend, pool));
        }
    }
    for n in [1usize, 64] {
        bench_layers(&mut c, &times, n, backend, pool);
    }
    c.final_summary();
    print_table(&times.borrow());
}

/// The median and best sample of each case, GB/s and GFLOP/s (of the
/// median), and how many times faster than its baseline it is: baseline
/// median / median, and best / best (which other processes on a shared
/// machine disturb less).
fn print_table(times: &Timings) {
    let sorted = |t: &Timing| {
        let mut s = t.samples.clone();
        s.sort_by(f64::total_cmp);
        (s[s.len() / 2], s[0])
    };
    println!(
        "\n{:<44} {:>12} {:>12} {:>9} {:>10}  speed-up over baseline (median, best)",
        format!("{} threads", threads()),
        "median",
        "best",
        "GB/s",
        "GFLOP/s"
    );
    for (id, t) in times {
        let (m, best) = sorted(t);
        let ratio = match t.baseline.as_ref().and_then(|b| times.get(b).map(|bt| (b, sorted(bt)))) {
            Some((b, (bm, bbest))) => format!(
                "{:>6.2}x {:>6.2}x  vs {}",
                bm / m,
                bbest / best,
                b.split_once('/').map_or(b.as_str(), |(_, id)| id)
            ),
            None => String::new(),
        };
        println!(
            "{id:<44} {:>9.3} ms {:>9.3} ms {:>9.2} {:>10.2}  {ratio}",
            m * 1e3,
            best * 1e3,
            t.bytes as f64 / m / 1e9,
            t.flops / m / 1e9
        );
    }
}

/// SmolLM2-135M's 30 layers of products (Q4_1: attention Q, K, V, output,
/// FFN gate, up, down) on `n` columns, 210 independent MUL_MAT nodes: one
/// graph of all of them (`graph`: the backend runs it on a pool thread,
/// which joins every kernel) against one compute per node (`node_by_node`:
/// each kernel that splits hands its work over to the pool and waits).
fn bench_layers(c: &mut Criterion, times: &RefCell<Timings>, n: usize, backend: &CpuBackend, pool: &rayon::ThreadPool) {
    const LAYERS: usize = 30;
    let shapes = [(576, 576), (576, 192), (576, 192), (576, 576), (576, 1536), (576, 1536), (1536, 576)];
    let mut ctx = Context::new();
    let x576 = ctx.tensor(DType::F32, [576, n]).expect("activations");
    let x1536 = ctx.tensor(DType::F32, [1536, n]).expect("activations");
    let mut weights = Vec::new();
    let mut outputs = Vec::new();
    for _ in 0..LAYERS {
        for (k, m) in shapes {
            let w = ctx.tensor(DType::Q4_1, [k, m]).expect("weights");
            let y = ctx.mul_mat(w, if k == 576 { x576 } else { x1536 }).expect("mul_mat");
            weights.push((w, k, m));
            outputs.push(y);
        }
    }
    let mut all: Vec<TensorId> = vec![x576, x1536];
    all.extend(weights.iter().map(|w| w.0));
    all.extend(&outputs);
    ctx.alloc_tensors(&all, &cpu::buffer_type(), BufferUsage::Any).expect("alloc");
    ctx.set_f32(x576, &signal(576 * n, 5)).expect("activations");
    ctx.set_f32(x1536, &signal(1536 * n, 6)).expect("activations");
    for &(w, k, m) in &weights {
        ctx.set_bytes(w, &weight_bytes(DType::Q4_1, k, m, pool)).expect("weights");
    }
    let arena = GraphArena::new();
    let whole = ctx.build_graph(&arena, &outputs).expect("graph");
    let single: Vec<_> = outputs.iter().map(|&y| ctx.build_graph(&arena, &[y]).expect("graph")).collect();
    let bytes: usize = weights.iter().map(|&(_, k, m)| DType::Q4_1.row_size(k).unwrap_or(0) * m).sum();
    let flops: f64 = weights.iter().map(|&(_, k, m)| 2.0 * (k * m * n) as f64).sum();

    let mut group = c.benchmark_group(format!("smollm2/layers_q4_1/n{n}"));
    group.throughput(Throughput::Bytes(bytes as u64));
    let prefix = format!("smollm2 30 layers n{n}");
    timed(&mut group, times, &prefix, "graph", Some("node_by_node"), (bytes, flops), || {
        backend.graph_compute(&ctx, whole).into_result().expect("compute");
    });
    timed(&mut group, times, &prefix, "node_by_node", None, (bytes, flops), || {
        for &g in &single {
            backend.graph_compute(&ctx, g).into_result().expect("compute");
        }
    });
    group.finish();
}
