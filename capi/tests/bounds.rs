//! Sizes, counts and pointers from C are checked before they size anything:
//! each out-of-range one is `GANTRY_ERROR_INVALID_ARGUMENT` with a message
//! saying which argument and what it may be, never a panic, an abort or an
//! allocation of its size.

#[expect(dead_code, reason = "the shared helpers serve several test files; this one needs only some")]
mod common;

use std::ffi::c_void;

use common::{Product, cpu_backend, fails, free_backend, ok};
use gantry_capi::backend::GantryBackend;
use gantry_capi::context::{
    GantryContext, GantryDType, GantryTensor, gantry_context_alloc_weights, gantry_context_free, gantry_context_new,
    gantry_tensor_new,
};
use gantry_capi::data::{gantry_tensor_get_f32, gantry_tensor_set_f32};
use gantry_capi::graph::{GantryGraph, gantry_graph_build, gantry_graph_free};
use gantry_capi::jobs::{GantryJobSystem, GantryTaskFn, gantry_cpu_backend_new_with_jobs};
use gantry_capi::ops::gantry_reshape;
use gantry_capi::scheduler::{GantryScheduler, GantrySchedulerParams, gantry_scheduler_new};
use gantry_capi::status::GantryStatus;

const INVALID: GantryStatus = GantryStatus::GantryErrorInvalidArgument;

#[test]
fn shapes_beyond_the_engines_limits_are_refused_before_a_tensor_is_made() {
    let mut ctx = GantryContext::default();
    // SAFETY: one value to write.
    ok(unsafe { gantry_context_new(&mut ctx) });
    let mut t = GantryTensor::default();
    let f32 = GantryDType::GantryF32 as i32;
    for ne in [[1i64 << 40, 1 << 40], [i64::MAX, 2], [1 << 20, 1 << 20]] {
        // SAFETY: two sizes to read, one value to write.
        let message = fails(unsafe { gantry_tensor_new(ctx, f32, 2, ne.as_ptr(), &mut t) }, INVALID);
        assert!(message.contains("elements a tensor may have"), "{message}");
    }
    for ne in [[0i64, 4], [-1, 4]] {
        // SAFETY: as above.
        let message = fails(unsafe { gantry_tensor_new(ctx, f32, 2, ne.as_ptr(), &mut t) }, INVALID);
        assert!(message.contains("positive"), "{message}");
    }
    // A reshape takes sizes the same way.
    let ne = [64i64, 64];
    // SAFETY: as above.
    ok(unsafe { gantry_tensor_new(ctx, f32, 2, ne.as_ptr(), &mut t) });
    let huge = [1i64 << 32, 1 << 32, 1 << 32, 1];
    let mut r = GantryTensor::default();
    // SAFETY: four sizes to read, one value to write.
    let message = fails(unsafe { gantry_reshape(ctx, t, 4, huge.as_ptr(), &mut r) }, INVALID);
    assert!(message.contains("gantry_reshape"), "{message}");
    ok(gantry_context_free(ctx));
}

#[test]
fn counts_and_lengths_are_bounded_before_anything_is_read() {
    let cpu = cpu_backend();
    let p = Product::new(cpu, 4, 3, 2, 1.0);
    // The arrays are one element long: a bound checked late would read far
    // past them (AddressSanitizer or a crash), so these pass only if
    // nothing is read.
    // SAFETY: the counts are refused before the arrays are read.
    let message = fails(unsafe { gantry_context_alloc_weights(p.ctx, cpu, &p.w, 1 << 40) }, INVALID);
    assert!(message.contains("n = 1099511627776"), "{message}");
    let mut g = GantryGraph::default();
    // SAFETY: as above.
    let message = fails(unsafe { gantry_graph_build(p.ctx, &p.y, usize::MAX, &mut g) }, INVALID);
    assert!(message.contains("is more than the 65536 allowed"), "{message}");
    let value = [0.0f32];
    // SAFETY: as above: no slice of that length can exist, so none is made.
    let message = fails(unsafe { gantry_tensor_set_f32(p.ctx, p.w, value.as_ptr(), usize::MAX / 2) }, INVALID);
    assert!(message.contains("cannot be one array"), "{message}");
    let mut out = [0.0f32];
    // SAFETY: as above.
    fails(unsafe { gantry_tensor_get_f32(p.ctx, p.w, out.as_mut_ptr(), usize::MAX) }, INVALID);
    // A wrong element count is found before the tensor is read.
    // SAFETY: one float to write; 12 are asked for and refused first.
    let message = fails(unsafe { gantry_tensor_get_f32(p.ctx, p.w, out.as_mut_ptr(), 1) }, INVALID);
    assert!(message.contains("12 elements, the buffer 1"), "{message}");

    let mut s = GantryScheduler::default();
    // SAFETY: one backend; the count is refused before it is read.
    let message = fails(unsafe { gantry_scheduler_new(&cpu, usize::MAX, std::ptr::null(), &mut s) }, INVALID);
    assert!(message.contains("1 to 16 backends"), "{message}");
    for (params, what) in [
        (GantrySchedulerParams { graph_size: usize::MAX, n_copies: 0 }, "graph_size"),
        (GantrySchedulerParams { graph_size: 0, n_copies: 1 << 40 }, "n_copies"),
    ] {
        // SAFETY: one backend and one params value to read, one value to write.
        let message = fails(unsafe { gantry_scheduler_new(&cpu, 1, &params, &mut s) }, INVALID);
        assert!(message.contains(what), "{message}");
    }
    // The weights are as written.
    assert_eq!(p.get(p.w, 12), p.weights(1.0));
    ok(gantry_graph_free(p.graph));
    ok(gantry_context_free(p.ctx));
    free_backend(cpu);
}

#[test]
fn a_misaligned_pointer_is_refused_not_written_through() {
    let mut bytes = [0u64; 4];
    // One byte into an aligned array: misaligned for a handle (8 bytes).
    let misaligned = bytes.as_mut_ptr().cast::<u8>().wrapping_add(1).cast::<GantryContext>();
    // SAFETY: the pointer is inside `bytes` and refused before any write.
    let message = fails(unsafe { gantry_context_new(misaligned) }, INVALID);
    assert!(message.contains("not aligned"), "{message}");
    assert_eq!(bytes, [0; 4], "nothing was written");
}

unsafe extern "C" fn run_inline(_user_data: *mut c_void, n_tasks: usize, task: GantryTaskFn, task_data: *mut c_void) {
    for i in 0..n_tasks {
        // SAFETY: Gantry's task, called once per index with its data.
        unsafe { task(task_data, i) };
    }
}

#[test]
fn a_job_systems_concurrency_is_bounded_like_a_thread_count() {
    let mut cpu = GantryBackend::default();
    for concurrency in [0, 1 << 40, usize::MAX] {
        let jobs = GantryJobSystem { concurrency, run: Some(run_inline), user_data: std::ptr::null_mut() };
        // SAFETY: one job system to read, one value to write.
        let message = fails(unsafe { gantry_cpu_backend_new_with_jobs(&jobs, &mut cpu) }, INVALID);
        assert!(message.contains("jobs->concurrency"), "{message}");
    }
    let jobs = GantryJobSystem { concurrency: 2, run: Some(run_inline), user_data: std::ptr::null_mut() };
    // SAFETY: as above; `run_inline` needs no data.
    ok(unsafe { gantry_cpu_backend_new_with_jobs(&jobs, &mut cpu) });
    free_backend(cpu);
}

/// A null buffer is a size query only with a capacity of 0; one that
/// claims room is `GANTRY_ERROR_INVALID_ARGUMENT` (it was answered "too
/// small", which a caller following that protocol retries for ever).
#[test]
fn a_null_buffer_with_room_claimed_is_an_invalid_argument() {
    let cpu = cpu_backend();
    let mut len = 0usize;
    // SAFETY: a null name with cap 10 (refused before any write), one length to write.
    let e =
        fails(unsafe { gantry_capi::backend::gantry_backend_name(cpu, std::ptr::null_mut(), 10, &mut len) }, INVALID);
    assert!(e.contains("null pointer (length 10)"), "{e}");
    // SAFETY: the size query: null with cap 0, one length to write.
    fails(
        unsafe { gantry_capi::backend::gantry_backend_name(cpu, std::ptr::null_mut(), 0, &mut len) },
        GantryStatus::GantryErrorBufferTooSmall,
    );
    assert_eq!(len, "CPU".len());
    let p = Product::new(cpu, 4, 3, 2, 1.0);
    let mut s = GantryScheduler::default();
    // SAFETY: one backend to read, default params, one handle to write.
    ok(unsafe { gantry_scheduler_new(&cpu, 1, std::ptr::null(), &mut s) });
    let mut n = 0usize;
    // SAFETY: null sizes claiming room for 4 (refused before any write), one count to write.
    let e = fails(
        unsafe { gantry_capi::scheduler::gantry_scheduler_reserve(s, p.ctx, p.graph, std::ptr::null_mut(), 4, &mut n) },
        INVALID,
    );
    assert!(e.contains("bytes is a null pointer"), "{e}");
    ok(gantry_capi::scheduler::gantry_scheduler_free(s));
    ok(gantry_graph_free(p.graph));
    ok(gantry_context_free(p.ctx));
    free_backend(cpu);
}

/// Runs only the even tasks, and each of them twice; counts the batches of
/// more than one task in `user_data` (an `AtomicUsize`).
unsafe extern "C" fn run_evens_twice(
    user_data: *mut c_void,
    n_tasks: usize,
    task: GantryTaskFn,
    task_data: *mut c_void,
) {
    if n_tasks > 1 {
        // SAFETY: the test passes a live AtomicUsize.
        unsafe { &*(user_data as *const std::sync::atomic::AtomicUsize) }
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    for i in (0..n_tasks).step_by(2) {
        // SAFETY: Gantry's task, with its data (twice: Gantry must run it once).
        unsafe {
            task(task_data, i);
            task(task_data, i);
        }
    }
}

/// A host job system that skips tasks or runs one twice still gets every
/// output written once: the skipped ones run after its `run` returns, the
/// second runs are ignored (they had left outputs unwritten, with
/// `GANTRY_OK`).
#[test]
fn a_job_system_that_skips_or_repeats_tasks_still_gets_the_right_answer() {
    let split = std::sync::atomic::AtomicUsize::new(0);
    let jobs = GantryJobSystem {
        concurrency: 4,
        run: Some(run_evens_twice),
        user_data: &split as *const std::sync::atomic::AtomicUsize as *mut c_void,
    };
    let mut cpu = GantryBackend::default();
    // SAFETY: one job system to read, one value to write.
    ok(unsafe { gantry_cpu_backend_new_with_jobs(&jobs, &mut cpu) });
    let p = Product::new(cpu, 256, 256, 16, 0.5);
    let mut s = GantryScheduler::default();
    // SAFETY: one backend to read, default params, one handle to write.
    ok(unsafe { gantry_scheduler_new(&cpu, 1, std::ptr::null(), &mut s) });
    ok(gantry_capi::scheduler::gantry_scheduler_alloc(s, p.ctx, p.graph));
    p.set(p.x, &p.input());
    ok(gantry_capi::scheduler::gantry_scheduler_compute(s, p.ctx, p.graph));
    assert!(split.load(std::sync::atomic::Ordering::Relaxed) > 0, "the product was never split into tasks");
    assert_eq!(p.get(p.y, p.m * p.n), p.expected(0.5));
    ok(gantry_capi::scheduler::gantry_scheduler_free(s));
    ok(gantry_graph_free(p.graph));
    ok(gantry_context_free(p.ctx));
    free_backend(cpu);
}
