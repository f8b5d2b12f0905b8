//! MUL_MAT on the first wgpu device (lavapipe in CI, so CPU-bound numbers)
//! beside `matrixmultiply`'s single-threaded sgemm on the same f32 values in
//! the same run. Each wgpu sample is one graph compute: one submission and
//! the wait for it, as the scheduler runs a split.
//!
//! Shapes are ggml's `m x n x k` (result `m x n`, inner dimension `k`):
//! SmolLM2's feed-forward up projection for one token and for a 64-token
//! batch (576 -> 1536), in F32 and Q4_1 (the model's weight format; the
//! baseline multiplies the same values dequantized), and a 512³ F32 product.
//!
//! `cargo bench -p gantry-backends --features wgpu --bench wgpu_mul_mat -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use gantry_engine::{BufferUsage, Context, DType, Device, GraphArena};
use gantry_wgpu::WgpuPlatform;

const SHAPES: [(DType, usize, usize, usize); 5] = [
    (DType::F32, 1536, 1, 576),
    (DType::Q4_1, 1536, 1, 576),
    (DType::F32, 1536, 64, 576),
    (DType::Q4_1, 1536, 64, 576),
    (DType::F32, 512, 512, 512),
];

fn values(n: usize, seed: usize) -> Vec<f32> {
    (0..n).map(|i| ((i * 2_654_435_761 + seed) % 2001) as f32 / 1000.0 - 1.0).collect()
}

/// Q4_1 blocks holding `v` (rows of multiples of 32): each block's minimum
/// and range over 15 steps, written by hand so the bench needs no quantizer;
/// returns the blocks and the values they decode to.
fn q4_1(v: &[f32]) -> (Vec<u8>, Vec<f32>) {
    let mut bytes = Vec::with_capacity(v.len() / 32 * 20);
    let mut decoded = Vec::with_capacity(v.len());
    for block in v.chunks(32) {
        let min = block.iter().cloned().fold(f32::INFINITY, f32::min);
        let max = block.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
        let d = half::f16::from_f32((max - min) / 15.0);
        let m = half::f16::from_f32(min);
        let (df, mf) = (d.to_f32(), m.to_f32());
        let q: Vec<u8> =
            block.iter().map(|&x| if df == 0.0 { 0 } else { ((x - mf) / df).round().clamp(0.0, 15.0) as u8 }).collect();
        bytes.extend_from_slice(&d.to_le_bytes());
        bytes.extend_from_slice(&m.to_le_bytes());
        for j in 0..16 {
            bytes.push(q[j] | (q[j + 16] << 4));
        }
        decoded.extend(q.iter().map(|&x| x as f32 * df + mf));
    }
    (bytes, decoded)
}

/// `c (m x n, column j at c[j * m..]) = a (m rows of k) * b (n columns of k)`.
fn sgemm(m: usize, n: usize, k: usize, a: &[f32], b: &[f32], c: &mut [f32]) {
    // SAFETY: a is m x k row-major, b is k x n column-major (n columns of k),
    // c is m x n column-major; every stride and extent stays in the slices.
    unsafe {
        matrixmultiply::sgemm(
            m,
            k,
            n,
            1.0,
            a.as_ptr(),
            k as isize,
            1,
            b.as_ptr(),
            1,
            k as isize,
            0.0,
            c.as_mut_ptr(),
            1,
            m as isize,
        )
    }
}

fn bench(c: &mut Criterion) {
    let platform = WgpuPlatform::new();
    let Some(dev) = platform.wgpu_devices().first() else {
        eprintln!("no wgpu adapter: nothing to bench");
        return;
    };
    let backend = dev.init_backend(None).expect("backend");
    for (dtype, m, n, k) in SHAPES {
        let mut group = c.benchmark_group(format!("mul_mat_{}_{m}x{n}x{k}", dtype.name()));
        group.throughput(Throughput::Elements((2 * m * n * k) as u64));
        group.sample_size(10);
        let (wv, xv) = (values(m * k, 1), values(n * k, 2));
        let (wbytes, wdec) = match dtype {
            DType::Q4_1 => q4_1(&wv),
            _ => (bytemuck::cast_slice(&wv).to_vec(), wv.clone()),
        };

        let mut ctx = Context::new();
        let w = ctx.tensor(dtype, [k, m]).unwrap();
        let x = ctx.tensor(DType::F32, [k, n]).unwrap();
        let y = ctx.mul_mat(w, x).unwrap();
        let buft = dev.buffer_type();
        let align = buft.alignment();
        let sizes: Vec<usize> =
            [w, x, y].iter().map(|&t| ctx.desc(t).unwrap().nbytes().next_multiple_of(align)).collect();
        let buffer = ctx.alloc_buffer(&buft, sizes.iter().sum(), BufferUsage::Compute).unwrap();
        ctx.place(w, buffer, 0).unwrap();
        ctx.place(x, buffer, sizes[0]).unwrap();
        ctx.place(y, buffer, sizes[0] + sizes[1]).unwrap();
        ctx.write_tensor_bytes(w, 0, &wbytes).unwrap();
        ctx.write_tensor_bytes(x, 0, bytemuck::cast_slice(&xv)).unwrap();
        let arena = GraphArena::new();
        let graph = ctx.build_graph(&arena, &[y]).unwrap();
        backend.graph_compute(&ctx, graph).into_result().unwrap();
        // The two sides agree before they are timed.
        let mut want = vec![0f32; m * n];
        sgemm(m, n, k, &wdec, &xv, &mut want);
        let got = ctx.read_f32(y).unwrap();
        let err = got.iter().zip(&want).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
        assert!(err < 1e-2, "wgpu and the baseline differ by {err}");

        group.bench_function(BenchmarkId::new(dev.name(), dev.description()), |bch| {
            bch.iter(|| backend.graph_compute(&ctx, graph).into_result().unwrap())
        });
        group.bench_function(BenchmarkId::new("matrixmultiply", "1 thread, f32"), |bch| {
            bch.iter(|| sgemm(m, n, k, black_box(&wdec), black_box(&xv), &mut want))
        });
        group.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
