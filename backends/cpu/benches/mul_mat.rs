//! MUL_MAT F32 on the CPU backend (its own GEMM, `cpu::sgemm`) against
//! OpenBLAS, the `matrixmultiply` crate and the `gemm` crate, on the same
//! shapes and thread counts in the same run.
//!
//! Shapes are ggml's `m x n x k` (result `m x n`, inner dimension `k`):
//! 1024³, 2048³, 4096 x 1 x 14336 (a feed-forward down projection for one
//! token: the mat-vec path), and SmolLM2-135M's products over a 512-token
//! prompt (576 x 512 x 576: attention; 1536 x 512 x 576: feed-forward up;
//! 576 x 512 x 1536: down), each on 1 and 2 threads.
//!
//! - `gantry`: one MUL_MAT node computed by `CpuBackend::graph_compute`.
//! - `openblas`: `cblas_sgemm` (column-major, A transposed: the same memory
//!   as Gantry's operands), loaded at run time from `$GANTRY_OPENBLAS` (a
//!   path), else numpy's bundled OpenBLAS (`numpy.libs/libscipy_openblas*`
//!   under a Python's site-packages: `scipy_cblas_sgemm64_`, ILP64), else
//!   the system's `libopenblas.so.0` (`cblas_sgemm`); its threads set with
//!   `openblas_set_num_threads` (or the prefixed one) to the row's count.
//!   When none is found the rows say why and leave it out.
//! - `matrixmultiply`: split into halves (columns, or rows when there is
//!   one column) over a rayon pool of the row's size.
//! - `gemm`: `gemm::gemm` with `Parallelism::Rayon` on such a pool, in the
//!   transposed form it runs fastest (what the backend used before it had
//!   its own GEMM).
//!
//! After criterion's report a table gives each row's median time per
//! implementation (over criterion's samples), its GFLOP/s, and Gantry's
//! speed over OpenBLAS (OpenBLAS's median / Gantry's: above 1 is faster).
//!
//! `cargo bench -p gantry-backends --bench mul_mat -- --warm-up-time 1 --measurement-time 3`
//!
//! Measured on a 2-core AMD EPYC (Zen 4, AVX-512; KVM, 1 MiB L2 per core,
//! 32 MiB L3), OpenBLAS 0.3.31 (numpy's wheel, core SkylakeX), 2026-… —
//! see the README's CPU section for the table.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use criterion::{BenchmarkGroup, Criterion, Throughput, measurement::WallTime};
use gantry_cpu::{self as cpu, CpuBackend, CpuDevice};
use gantry_engine::{Backend, BufferUsage, Context, DType, Device, GraphArena};

/// `(m, n, k)`.
const SHAPES: [(usize, usize, usize); 6] =
    [(1024, 1024, 1024), (2048, 2048, 2048), (4096, 1, 14336), (576, 512, 576), (1536, 512, 576), (576, 512, 1536)];
const THREADS: [usize; 2] = [1, 2];
/// The implementations, in the table's order.
const IMPLS: [&str; 4] = ["gantry", "openblas", "matrixmultiply", "gemm"];

fn values(n: usize, seed: usize) -> Vec<f32> {
    (0..n).map(|i| ((i * 2_654_435_761 + seed) % 2001) as f32 / 1000.0 - 1.0).collect()
}

/// `cblas_sgemm` with 32-bit integers.
type SgemmLp64 =
    unsafe extern "C" fn(i32, i32, i32, i32, i32, i32, f32, *const f32, i32, *const f32, i32, f32, *mut f32, i32);
/// `cblas_sgemm` with 64-bit integers (the enums stay C `int`s).
type SgemmIlp64 =
    unsafe extern "C" fn(i32, i32, i32, i64, i64, i64, f32, *const f32, i64, *const f32, i64, f32, *mut f32, i64);

/// `cblas_sgemm` with 32-bit or 64-bit integers.
#[derive(Clone, Copy)]
enum CblasSgemm {
    Lp64(SgemmLp64),
    Ilp64(SgemmIlp64),
}

/// The first of `names` that `lib` exports, as a `T`.
///
/// # Safety
/// `T` is the symbol's type.
unsafe fn symbol<T: Copy>(lib: &libloading::Library, names: &[&str]) -> Option<T> {
    // SAFETY: the caller's guarantee.
    names.iter().find_map(|name| unsafe { lib.get::<T>(name.as_bytes()) }.ok().map(|s| *s))
}

/// An OpenBLAS loaded at run time.
struct OpenBlas {
    /// Keeps the functions below loaded.
    _lib: libloading::Library,
    sgemm: CblasSgemm,
    set_threads: Option<unsafe extern "C" fn(i32)>,
    /// The file and the kernel core it chose (`openblas_get_corename`).
    about: String,
}

/// CBLAS's constants.
const COL_MAJOR: i32 = 102;
const NO_TRANS: i32 = 111;
const TRANS: i32 = 112;

impl OpenBlas {
    /// The first OpenBLAS found (see the module docs), or why there is none.
    fn find() -> Result<OpenBlas, String> {
        let mut tried = Vec::new();
        if let Some(path) = std::env::var_os("GANTRY_OPENBLAS") {
            return Self::open(Path::new(&path)).map_err(|e| format!("GANTRY_OPENBLAS: {e}"));
        }
        for path in
            numpy_openblas_candidates().into_iter().chain(["libopenblas.so.0", "libopenblas.so"].map(PathBuf::from))
        {
            match Self::open(&path) {
                Ok(blas) => return Ok(blas),
                Err(e) => tried.push(e),
            }
        }
        Err(format!("no OpenBLAS found (set GANTRY_OPENBLAS to one): {}", tried.join("; ")))
    }

    fn open(path: &Path) -> Result<OpenBlas, String> {
        // SAFETY: loading OpenBLAS runs its initializers, which only set up its threads and tables.
        let lib = unsafe { libloading::Library::new(path) }.map_err(|e| format!("{}: {e}", path.display()))?;
        // SAFETY: each symbol, when present, has the C signature named (OpenBLAS's cblas.h).
        unsafe {
            let sgemm = if let Some(f) = symbol::<SgemmIlp64>(&lib, &["scipy_cblas_sgemm64_", "cblas_sgemm64_"]) {
                CblasSgemm::Ilp64(f)
            } else if let Some(f) = symbol::<SgemmLp64>(&lib, &["cblas_sgemm"]) {
                CblasSgemm::Lp64(f)
            } else {
                return Err(format!("{}: no cblas_sgemm", path.display()));
            };
            let set_threads = symbol::<unsafe extern "C" fn(i32)>(
                &lib,
                &["scipy_openblas_set_num_threads64_", "openblas_set_num_threads64_", "openblas_set_num_threads"],
            );
            let corename = symbol::<unsafe extern "C" fn() -> *const std::ffi::c_char>(
                &lib,
                &["scipy_openblas_get_corename64_", "openblas_get_corename64_", "openblas_get_corename"],
            )
            .map_or_else(|| "?".into(), |f| std::ffi::CStr::from_ptr(f()).to_string_lossy().into_owned());
            let about = format!("{} (core {corename})", path.display());
            Ok(OpenBlas { _lib: lib, sgemm, set_threads, about })
        }
    }

    fn set_threads(&self, n: usize) {
        if let Some(f) = self.set_threads {
            // SAFETY: openblas_set_num_threads(int).
            unsafe { f(n as i32) }
        }
    }

    /// `c (m x n, column j at c[j * m..]) = a (m rows of k) * b (n columns of k)`.
    fn sgemm(&self, m: usize, n: usize, k: usize, a: &[f32], b: &[f32], c: &mut [f32]) {
        assert!(a.len() >= m * k && b.len() >= n * k && c.len() >= m * n);
        // Column-major: C (m x n, ldc m) = A^T (A stored k x m, lda k) * B (k x n, ldb k).
        // SAFETY: the matrices lie in the slices (asserted) with these leading dimensions.
        unsafe {
            match self.sgemm {
                CblasSgemm::Lp64(f) => f(
                    COL_MAJOR,
                    TRANS,
                    NO_TRANS,
                    m as i32,
                    n as i32,
                    k as i32,
                    1.0,
                    a.as_ptr(),
                    k as i32,
                    b.as_ptr(),
                    k as i32,
                    0.0,
                    c.as_mut_ptr(),
                    m as i32,
                ),
                CblasSgemm::Ilp64(f) => f(
                    COL_MAJOR,
                    TRANS,
                    NO_TRANS,
                    m as i64,
                    n as i64,
                    k as i64,
                    1.0,
                    a.as_ptr(),
                    k as i64,
                    b.as_ptr(),
                    k as i64,
                    0.0,
                    c.as_mut_ptr(),
                    m as i64,
                ),
            }
        }
    }
}

/// numpy's bundled OpenBLAS under the site-packages of Pythons in the usual
/// places (and the development machine's `/tmp/xl`).
fn numpy_openblas_candidates() -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> = ["/tmp/xl/lib", "/usr/local/lib", "/usr/lib"].iter().map(PathBuf::from).collect();
    if let Some(home) = std::env::var_os("HOME") {
        roots.push(Path::new(&home).join(".local/lib"));
    }
    let mut found = Vec::new();
    for root in roots {
        let Ok(pythons) = std::fs::read_dir(&root) else { continue };
        for python in pythons.flatten().filter(|e| e.file_name().to_string_lossy().starts_with("python3")) {
            for packages in ["site-packages", "dist-packages"] {
                let libs = python.path().join(packages).join("numpy.libs");
                let Ok(files) = std::fs::read_dir(&libs) else { continue };
                for file in files.flatten() {
                    let name = file.file_name().to_string_lossy().into_owned();
                    if name.starts_with("libscipy_openblas") && name.contains(".so") {
                        found.push(file.path());
                    }
                }
            }
        }
    }
    found
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

/// The same product with the `gemm` crate on `pool`, transposed (`c^T = b^T
/// a^T`, the same memory), which it runs fastest.
fn gemm_crate(pool: &rayon::ThreadPool, m: usize, n: usize, k: usize, a: &[f32], b: &[f32], c: &mut [f32]) {
    assert!(a.len() >= m * k && b.len() >= n * k && c.len() >= m * n);
    let threads = gemm::Parallelism::Rayon(pool.current_num_threads());
    // SAFETY: c^T is n x m row-major (c's memory), b^T is n x k row-major
    // (b's), a^T is k x m with a's row stride as its column stride.
    pool.install(|| unsafe {
        gemm::gemm(
            n,
            m,
            k,
            c.as_mut_ptr(),
            1,
            m as isize,
            false,
            b.as_ptr(),
            1,
            k as isize,
            a.as_ptr(),
            k as isize,
            1,
            0.0,
            1.0,
            false,
            false,
            false,
            threads,
        )
    });
}

/// Samples (seconds per iteration) by `(shape, threads, implementation)`.
type Timings = BTreeMap<((usize, usize, usize), usize, &'static str), Vec<f64>>;

/// Times `f` as `name/threads` in `group`, keeping criterion's samples.
fn timed(
    group: &mut BenchmarkGroup<'_, WallTime>,
    times: &RefCell<Timings>,
    key: ((usize, usize, usize), usize, &'static str),
    mut f: impl FnMut(),
) {
    group.bench_function(format!("{}/{}", key.2, key.1), |bench| {
        bench.iter_custom(|iters| {
            let t = Instant::now();
            for _ in 0..iters {
                f();
            }
            let e = t.elapsed();
            times.borrow_mut().entry(key).or_default().push(e.as_secs_f64() / iters as f64);
            e
        })
    });
}

/// Checks `out` against Gantry's result `ours` (a bench that computes
/// something else proves nothing).
fn check(name: &str, ours: &[f32], out: &[f32], k: usize) {
    if out.iter().all(|&v| v == 0.0) {
        return; // filtered out by criterion: never ran
    }
    let scale = ours.iter().map(|v| v.abs()).fold(1f32, f32::max);
    let worst = ours.iter().zip(out).map(|(x, y)| (x - y).abs()).fold(0f32, f32::max);
    assert!(worst <= 1e-5 * scale * (k as f32).sqrt(), "gantry and {name} differ by {worst}");
}

fn main() {
    let mut c = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .configure_from_args();
    let times: RefCell<Timings> = RefCell::default();
    let blas = OpenBlas::find();
    match &blas {
        Ok(b) => println!("OpenBLAS: {}", b.about),
        Err(why) => println!("OpenBLAS left out: {why}"),
    }
    for (m, n, k) in SHAPES {
        let mut group = c.benchmark_group(format!("mul_mat_f32_{m}x{n}x{k}"));
        group.throughput(Throughput::Elements((2 * m * n * k) as u64));
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
        let mut outs: BTreeMap<&str, Vec<f32>> = IMPLS[1..].iter().map(|&i| (i, vec![0f32; m * n])).collect();

        for threads in THREADS {
            let shape = (m, n, k);
            let backend = CpuBackend::with_threads(threads).unwrap();
            timed(&mut group, &times, (shape, threads, "gantry"), || {
                assert!(backend.graph_compute(&ctx, graph).is_success())
            });
            if let Ok(blas) = &blas {
                blas.set_threads(threads);
                let out = outs.get_mut("openblas").unwrap();
                timed(&mut group, &times, (shape, threads, "openblas"), || blas.sgemm(m, n, k, &a, &b, out));
            }
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
            let out = outs.get_mut("matrixmultiply").unwrap();
            timed(&mut group, &times, (shape, threads, "matrixmultiply"), || {
                matrixmultiply_gemm(&pool, m, n, k, &a, &b, out)
            });
            let out = outs.get_mut("gemm").unwrap();
            timed(&mut group, &times, (shape, threads, "gemm"), || gemm_crate(&pool, m, n, k, &a, &b, out));
        }
        let ours = ctx.read_f32(tc).unwrap();
        for (name, out) in &outs {
            check(name, &ours, out, k);
        }
        group.finish();
    }
    print_table(&times.borrow(), blas.as_ref().err());
}

/// The medians of every row, side by side.
fn print_table(times: &Timings, no_blas: Option<&String>) {
    let median = |key| {
        times.get(&key).map(|s: &Vec<f64>| {
            let mut s = s.clone();
            s.sort_by(f64::total_cmp);
            s[s.len() / 2]
        })
    };
    println!("\nMUL_MAT F32 on {}: median ms (GFLOP/s)", CpuDevice::new().description());
    if let Some(why) = no_blas {
        println!("(OpenBLAS left out: {why})");
    }
    print!("{:<18} {:>3}", "m x n x k", "thr");
    for name in IMPLS {
        print!(" {name:>19}");
    }
    println!("  gantry vs openblas");
    for (m, n, k) in SHAPES {
        for threads in THREADS {
            let shape = (m, n, k);
            let row: Vec<Option<f64>> = IMPLS.iter().map(|&i| median((shape, threads, i))).collect();
            if row.iter().all(Option::is_none) {
                continue;
            }
            print!("{:<18} {threads:>3}", format!("{m}x{n}x{k}"));
            let flops = 2.0 * (m * n * k) as f64;
            for t in &row {
                match t {
                    Some(t) => print!(" {:>9.3} ({:>7.1})", t * 1e3, flops / t / 1e9),
                    None => print!(" {:>19}", "-"),
                }
            }
            match (row[0], row[1]) {
                (Some(g), Some(o)) => println!("  {:.2}x", o / g),
                _ => println!(),
            }
        }
    }
}
