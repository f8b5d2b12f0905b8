//! Every instruction-set path against an f64 reference: shapes that are not
//! multiples of any tile, `k = 1` and `k = 0`, strided operands, F16 and
//! BF16 weights, blocks small enough that every loop runs several times,
//! one thread and several. Small sizes: these tests also run on an emulated
//! AVX-512 CPU (scripts/test_avx512_emulated.sh).

use half::{bf16, f16};

use super::blocking::Blocking;
use super::driver::{sgemm_blocked, sgemm_one_thread_blocked, task_floats};
use super::*;
use crate::parallel::{Par, PerThreadScratch};

/// One product's operands in memory, with their layout.
struct Operands {
    shape: Shape,
    dtype: LhsType,
    a_bytes: Vec<u8>,
    a_row_stride: usize,
    a_elem_stride: usize,
    /// A's values as f64 (after rounding to its dtype), row-major.
    a_values: Vec<f64>,
    b: Vec<f32>,
    b_col_stride: usize,
    b_elem_stride: usize,
    c_col_stride: usize,
}

/// A layout: gaps between elements (1: dense) and padding after rows/columns.
#[derive(Clone, Copy)]
struct Layout {
    a_gap: usize,
    a_pad: usize,
    b_gap: usize,
    b_pad: usize,
    c_pad: usize,
}

const DENSE: Layout = Layout { a_gap: 1, a_pad: 0, b_gap: 1, b_pad: 0, c_pad: 0 };
const STRIDED: Layout = Layout { a_gap: 2, a_pad: 3, b_gap: 3, b_pad: 1, c_pad: 5 };

/// A value in [-1, 1) from an index (deterministic, not periodic in small steps).
fn value(i: usize, seed: usize) -> f32 {
    ((i.wrapping_mul(2_654_435_761).wrapping_add(seed * 97) >> 7) % 2001) as f32 / 1000.0 - 1.0
}

impl Operands {
    fn new(shape: Shape, dtype: LhsType, layout: Layout) -> Self {
        let Shape { m, n, k } = shape;
        let size = dtype.size();
        let a_elem_stride = layout.a_gap * size;
        let a_row_stride = (k * layout.a_gap + layout.a_pad) * size;
        let mut a_bytes = vec![0u8; (m * a_row_stride).max(1)];
        let mut a_values = vec![0f64; m * k];
        for i in 0..m {
            for p in 0..k {
                let v = value(i * k + p, 1);
                let at = i * a_row_stride + p * a_elem_stride;
                a_values[i * k + p] = match dtype {
                    LhsType::F32 => {
                        a_bytes[at..at + 4].copy_from_slice(&v.to_le_bytes());
                        v as f64
                    }
                    LhsType::F16 => {
                        let h = f16::from_f32(v);
                        a_bytes[at..at + 2].copy_from_slice(&h.to_le_bytes());
                        h.to_f64()
                    }
                    LhsType::BF16 => {
                        let h = bf16::from_f32(v);
                        a_bytes[at..at + 2].copy_from_slice(&h.to_le_bytes());
                        h.to_f64()
                    }
                };
            }
        }
        let b_elem_stride = layout.b_gap * 4;
        let b_col_stride = (k * layout.b_gap + layout.b_pad) * 4;
        let mut b = vec![0f32; (n * b_col_stride / 4).max(1)];
        for j in 0..n {
            for p in 0..k {
                b[(j * b_col_stride + p * b_elem_stride) / 4] = value(j * k + p, 2);
            }
        }
        Self {
            shape,
            dtype,
            a_bytes,
            a_row_stride,
            a_elem_stride,
            a_values,
            b,
            b_col_stride,
            b_elem_stride,
            c_col_stride: m + layout.c_pad,
        }
    }

    fn lhs(&self) -> Lhs {
        Lhs {
            ptr: self.a_bytes.as_ptr(),
            dtype: self.dtype,
            row_stride: self.a_row_stride,
            elem_stride: self.a_elem_stride,
        }
    }

    fn rhs(&self) -> Rhs {
        Rhs { ptr: self.b.as_ptr() as *const u8, col_stride: self.b_col_stride, elem_stride: self.b_elem_stride }
    }

    /// C filled with NaN, so that an unwritten element (or a read of C
    /// before the first write) shows.
    fn new_c(&self) -> Vec<f32> {
        vec![f32::NAN; (self.shape.n * self.c_col_stride).max(1)]
    }

    /// Checks `c` against the f64 product, within the worst-case rounding
    /// of an f32 sum of k products; C's padding must be left alone.
    fn check(&self, c: &[f32], what: &str) {
        let Shape { m, n, k } = self.shape;
        for j in 0..n {
            for i in 0..m {
                let (mut exact, mut magnitude) = (0f64, 0f64);
                for p in 0..k {
                    let b = self.b[(j * self.b_col_stride + p * self.b_elem_stride) / 4] as f64;
                    exact += self.a_values[i * k + p] * b;
                    magnitude += (self.a_values[i * k + p] * b).abs();
                }
                let got = c[j * self.c_col_stride + i] as f64;
                let tol = (k as f64 + 2.0) * f32::EPSILON as f64 * magnitude + 1e-30;
                assert!((got - exact).abs() <= tol, "{what}: C[{i}, {j}] = {got}, expected {exact} (tolerance {tol})");
            }
            for i in m..self.c_col_stride.min(c.len() - j * self.c_col_stride) {
                assert!(c[j * self.c_col_stride + i].is_nan(), "{what}: C's padding at ({i}, {j}) was written");
            }
        }
    }
}

/// Blocks small enough that every loop of the driver runs several times
/// on small shapes: several k blocks, A blocks per band and B blocks.
fn tiny_blocks(kernels: &Kernels) -> Blocking {
    Blocking { kc: 5, mc: 2 * kernels.mr, nc: 3 * kernels.nr }
}

/// The paths to test: every one this CPU runs, once per set of kernels.
fn paths() -> impl Iterator<Item = Isa> {
    #[cfg(target_arch = "x86_64")]
    return Isa::available().filter(|&isa| isa != Isa::Avx512Vnni);
    #[cfg(not(target_arch = "x86_64"))]
    Isa::available()
}

/// Four threads and their scratch.
struct Threads {
    pool: rayon::ThreadPool,
    slots: PerThreadScratch,
}

impl Threads {
    fn new() -> Self {
        Self { pool: rayon::ThreadPoolBuilder::new().num_threads(4).build().unwrap(), slots: PerThreadScratch::new(4) }
    }
}

/// Runs `ops` on `isa` with `blk` on one thread and on four, and checks both.
fn run_both(threads: &Threads, isa: Isa, ops: &Operands, blk: &Blocking, what: &str) {
    let kernels = Kernels::of(isa);
    let out = |c: &mut Vec<f32>| Out { ptr: c.as_mut_ptr(), col_stride: ops.c_col_stride };
    let mut c = ops.new_c();
    let mut scratch = vec![0f32; task_floats(&kernels, blk, ops.shape)];
    // SAFETY: the operands hold the shape at their strides; C is separate.
    unsafe { sgemm_one_thread_blocked(&kernels, blk, ops.shape, &ops.lhs(), &ops.rhs(), &out(&mut c), &mut scratch) };
    ops.check(&c, &format!("{isa:?} one thread, {what}"));

    let par = Par::new(&threads.pool, 4, &threads.slots);
    let mut c = ops.new_c();
    // SAFETY: as above.
    unsafe { sgemm_blocked(&kernels, blk, ops.shape, &ops.lhs(), &ops.rhs(), &out(&mut c), &par) };
    ops.check(&c, &format!("{isa:?} four threads, {what}"));
}

#[test]
fn every_path_matches_the_f64_product() {
    let shapes = [
        Shape { m: 1, n: 1, k: 1 },
        Shape { m: 37, n: 11, k: 1 },
        Shape { m: 5, n: 3, k: 7 },
        Shape { m: 49, n: 9, k: 33 },
        Shape { m: 100, n: 23, k: 17 },
        Shape { m: 17, n: 50, k: 64 },
    ];
    let threads = Threads::new();
    for isa in paths() {
        let kernels = Kernels::of(isa);
        for shape in shapes {
            for dtype in [LhsType::F32, LhsType::F16, LhsType::BF16] {
                for (layout, name) in [(DENSE, "dense"), (STRIDED, "strided")] {
                    let ops = Operands::new(shape, dtype, layout);
                    let what = format!("{shape:?} {dtype:?} {name}");
                    run_both(&threads, isa, &ops, &Blocking::new(&kernels, shape), &format!("{what}, own blocks"));
                    run_both(&threads, isa, &ops, &tiny_blocks(&kernels), &format!("{what}, tiny blocks"));
                }
            }
        }
    }
}

#[test]
fn four_threads_split_rows_and_columns() {
    // Large enough for four threads (see MACS_PER_WORK_UNIT): 2 x 2 bands
    // (too few rows for four bands), then few rows (bands of columns).
    let threads = Threads::new();
    for isa in paths() {
        let kernels = Kernels::of(isa);
        for shape in [Shape { m: 150, n: 61, k: 200 }, Shape { m: 20, n: 300, k: 300 }] {
            let ops = Operands::new(shape, LhsType::F32, DENSE);
            run_both(&threads, isa, &ops, &Blocking::new(&kernels, shape), &format!("{shape:?}"));
        }
    }
}

#[test]
fn an_empty_k_gives_zeros_and_empty_products_do_nothing() {
    let threads = Threads::new();
    for isa in paths() {
        let kernels = Kernels::of(isa);
        let ops = Operands::new(Shape { m: 7, n: 3, k: 0 }, LhsType::F32, STRIDED);
        run_both(&threads, isa, &ops, &Blocking::new(&kernels, ops.shape), "k = 0");
        for shape in [Shape { m: 0, n: 3, k: 4 }, Shape { m: 3, n: 0, k: 4 }] {
            let ops = Operands::new(shape, LhsType::F32, DENSE);
            run_both(&threads, isa, &ops, &Blocking::new(&kernels, shape), "empty");
        }
    }
}
