//! MUL_MAT F32 on the CPU backend against the `matrixmultiply` crate, on
//! the same shapes and thread counts in the same run.
//!
//! Shapes are ggml's `m x n x k` (result `m x n`, inner dimension `k`):
//! 1024³, 2048³, and 4096 x 1 x 14336 (a feed-forward down projection for
//! one token: a 14336-long input, 4096 outputs). `matrixmultiply` runs on 2
//! threads by splitting the result into halves (columns, or rows when there
//! is one column) over a rayon pool of that size.
//!
//! `cargo bench -p gantry-backends --bench mul_mat -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use gantry_backends::cpu::{self, CpuBackend};
use gantry_engine::{Backend, BufferUsage, Context, DType, GraphArena};

const SHAPES: [(usize, usize, usize); 3] = [(1024, 1024, 1024), (2048, 2048, 2048), (4096, 1, 14336)];
const THREADS: [usize; 2] = [1, 2];

fn values(n: usize, seed: usize) -> Vec<f32> {
    (0..n).map(|i| ((i * 2_654_435_761 + seed) % 2001) as f32 / 1000.0 - 1.0).collect()
}

/// `c (m x n, column j at c[j * m..]) = a (m rows of k) * b (n columns of k)`
/// with matrixmultiply, split over `pool`'s threads.
fn matrixmultiply_gemm(pool: &rayon::ThreadPool, m: usize, n: usize, k: usize, a: &[f32], b: &[f32], c: &mut [f32]) {
    let parts = pool.current_num_threads();
    let sgemm = |rows: std::ops::Range<usize>, cols: std::ops::Range<usize>, c: &mut [f32]| {
        // SAFETY: every pointer and stride addresses the given slices: a is
        // m x k row-major, b is k x n column-major, c is m x n column-major;
        // `c` starts at element (rows.start, cols.start) of the full result.
        unsafe {
            matrixmultiply::sgemm(
                rows.len(),
                k,
                cols.len(),
                1.0,
                a.as_ptr().add(rows.start * k),
                k as isize,
                1,
                b.as_ptr().add(cols.start * k),
                1,
                k as isize,
                0.0,
                c.as_mut_ptr(),
                1,
                m as isize,
            )
        }
    };
    if parts == 1 {
        sgemm(0..m, 0..n, c);
    } else if n >= parts {
        let per = n.div_ceil(parts);
        pool.scope(|s| {
            for (i, chunk) in c.chunks_mut(per * m).enumerate() {
                let cols = i * per..(i * per + chunk.len() / m);
                s.spawn(move |_| sgemm(0..m, cols, chunk));
            }
        });
    } else {
        // One column: split its rows; each part writes its own slice.
        let per = m.div_ceil(parts);
        pool.scope(|s| {
            for (i, chunk) in c.chunks_mut(per).enumerate() {
                let rows = i * per..i * per + chunk.len();
                s.spawn(move |_| sgemm(rows, 0..1, chunk));
            }
        });
    }
}

fn bench(c: &mut Criterion) {
    for (m, n, k) in SHAPES {
        let mut group = c.benchmark_group(format!("mul_mat_f32_{m}x{n}x{k}"));
        group.throughput(Throughput::Elements((2 * m * n * k) as u64));
        group.sample_size(10);
        let (a, b) = (values(m * k, 1), values(n * k, 2));

        let mut ctx = Context::new();
        let ta = ctx.tensor(DType::F32, [k, m]).unwrap();
        let tb = ctx.tensor(DType::F32, [k, n]).unwrap();
        let tc = ctx.mul_mat(ta, tb).unwrap();
        let arena = GraphArena::new();
        let graph = ctx.build_graph(&arena, &[tc]).unwrap();
        ctx.alloc_tensors(&[ta, tb, tc], &cpu::buffer_type(), BufferUsage::Any).unwrap();
        ctx.set_f32(ta, &a).unwrap();
        ctx.set_f32(tb, &b).unwrap();
        let mut out = vec![0f32; m * n];

        for threads in THREADS {
            let backend = CpuBackend::with_threads(threads).unwrap();
            group.bench_function(BenchmarkId::new("gantry", threads), |bench| {
                bench.iter(|| assert!(backend.graph_compute(&ctx, graph).is_success()))
            });
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
            group.bench_function(BenchmarkId::new("matrixmultiply", threads), |bench| {
                bench.iter(|| matrixmultiply_gemm(&pool, m, n, k, black_box(&a), black_box(&b), &mut out))
            });
        }
        // The two agree (a bench that computes something else proves nothing).
        let ours = ctx.read_f32(tc).unwrap();
        let scale = ours.iter().map(|v| v.abs()).fold(1f32, f32::max);
        let worst = ours.iter().zip(&out).map(|(x, y)| (x - y).abs()).fold(0f32, f32::max);
        assert!(worst <= 1e-4 * scale * (k as f32).sqrt(), "gantry and matrixmultiply differ by {worst}");
        group.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
