//! The CPU backend on the host's rayon pool, or on the host's job system,
//! starts no threads of its own: the process's threads (`/proc/self/task`)
//! are counted before and after building the backend and computing a graph
//! whose kernels split their work (a dense product, a quantized product, a
//! mat-vec, an elementwise op). The backend with its own pool is counted
//! too, so the counter is seen to work. Linux only; its own process (no test
//! harness), so no other test's threads are counted.

use std::sync::Arc;

use gantry_cpu::{CpuBackend, CpuDevice, rayon};
use gantry_engine::sched::{Scheduler, SchedulerParams};
use gantry_engine::{Backend, BufferUsage, Context, DType, GraphArena};
use gantry_testing::{HostJobs, InlineJobs};

fn threads() -> usize {
    std::fs::read_dir("/proc/self/task").map(|d| d.count()).unwrap_or(0)
}

/// Computes `y = silu(W x)` (a 512×512 product over 16 columns), the
/// mat-vec of W with one column and the product of W in Q8_0 with x on
/// `backend`; returns the first output of each.
fn compute(backend: Arc<dyn Backend>) -> (f32, f32, f32) {
    let mut ctx = Context::new();
    let w = ctx.tensor(DType::F32, [512, 512]).unwrap();
    let wq = ctx.tensor(DType::Q8_0, [512, 512]).unwrap();
    let x = ctx.tensor(DType::F32, [512, 16]).unwrap();
    let v = ctx.tensor(DType::F32, [512, 1]).unwrap();
    ctx.alloc_tensors(&[w, wq, x, v], &backend.device().buffer_type(), BufferUsage::Weights).unwrap();
    ctx.set_f32(w, &vec![0.002; 512 * 512]).unwrap();
    ctx.set_f32(wq, &vec![0.002; 512 * 512]).unwrap();
    ctx.set_f32(x, &vec![1.0; 512 * 16]).unwrap();
    ctx.set_f32(v, &vec![1.0; 512]).unwrap();
    let y = ctx.mul_mat(w, x).unwrap();
    let y = ctx.silu(y).unwrap();
    let z = ctx.mul_mat(w, v).unwrap();
    let q = ctx.mul_mat(wq, x).unwrap();
    let arena = GraphArena::new();
    let graph = ctx.build_graph(&arena, &[y, z, q]).unwrap();
    let mut sched = Scheduler::new(&[backend], SchedulerParams::default()).unwrap();
    for _ in 0..3 {
        sched.graph_compute(&mut ctx, graph).unwrap();
    }
    (ctx.read_f32(y).unwrap()[0], ctx.read_f32(z).unwrap()[0], ctx.read_f32(q).unwrap()[0])
}

/// `compute`'s outputs are silu(512 · 0.002) and 512 · 0.002 (the quantized product's within Q8_0's error).
fn check((y, z, q): (f32, f32, f32)) {
    let expected: f32 = 512.0 * 0.002;
    assert!((y - expected / (1.0 + (-expected).exp())).abs() < 1e-4, "y = {y}");
    assert!((z - expected).abs() < 1e-4, "z = {z}");
    assert!((q - expected).abs() < 1e-2, "q = {q}");
}

fn main() {
    if !std::path::Path::new("/proc/self/task").is_dir() {
        println!("cpu_host_threads: skipped (no /proc/self/task on this system)");
        return;
    }
    let start = threads();
    let pool = Arc::new(rayon::ThreadPoolBuilder::new().num_threads(3).build().unwrap());
    pool.broadcast(|_| ());
    let with_pool = threads();
    assert_eq!(with_pool, start + 3, "the host's pool of 3 threads");

    let backend: Arc<dyn Backend> = Arc::new(CpuBackend::with_pool(CpuDevice::new(), pool.clone()));
    check(compute(backend));
    let after = threads();
    assert_eq!(after, with_pool, "computing on the host's pool started {} threads", after - with_pool);

    // The host's job system: over threads of the host's (made first), and all on the calling thread.
    let host_threads = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    host_threads.broadcast(|_| ());
    let jobs = Arc::new(HostJobs::new(host_threads));
    let with_jobs = threads();
    assert_eq!(with_jobs, after + 2, "the host's job system of 2 threads");
    check(compute(Arc::new(CpuBackend::with_job_system(CpuDevice::new(), jobs.clone()))));
    assert!(jobs.tasks_run() > 0, "the kernels ran as the host's tasks");
    let inline = Arc::new(InlineJobs::new());
    check(compute(Arc::new(CpuBackend::with_job_system(CpuDevice::new(), inline.clone()))));
    assert!(inline.tasks_run() > 0, "the kernels ran as the inline job system's tasks");
    let after_jobs = threads();
    assert_eq!(after_jobs, with_jobs, "computing on the host's job systems started {} threads", after_jobs - with_jobs);
    let after = after_jobs;

    // The counter sees threads: a backend with its own pool of 3 adds 2
    // (the thread that computes a graph works as the third).
    let own = CpuBackend::with_threads(3).unwrap();
    let with_own = threads();
    assert_eq!(with_own, after + 2, "a backend's own pool of 3 threads");
    drop(own);
    println!(
        "cpu_host_threads: {start} threads at start, {with_pool} with the host's pool of 3, {with_jobs} with \
         the host's job system of 2, {after} after computing on them (0 started), {with_own} with a backend's \
         own pool of 3"
    );
}
