//! A callback that calls back into the API gets `GANTRY_ERROR_REENTRANT`
//! (it used to deadlock: the call waited for locks its own compute or
//! generation held), the call that ran the callback completes, and other
//! threads keep working meanwhile. Each test runs under a deadline, so a
//! regression fails instead of hanging.

#[expect(dead_code, reason = "the shared helpers serve several test files; this one needs only some")]
mod common;

use std::ffi::{CStr, c_char, c_void};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::{Product, cpu_backend, free_backend, last_error, ok, within};
use gantry_capi::backend::{GantryBackend, gantry_backend_set_abort_callback};
use gantry_capi::context::{GantryContext, gantry_context_free, gantry_context_new};
use gantry_capi::data::gantry_tensor_get_f32;
use gantry_capi::graph::gantry_graph_free;
use gantry_capi::jobs::{GantryJobSystem, GantryTaskFn, gantry_cpu_backend_new_with_jobs};
use gantry_capi::model::{
    GantryModel, GantryModelParams, gantry_model_free, gantry_model_generate, gantry_model_load, gantry_model_n_vocab,
    gantry_model_tokenize,
};
use gantry_capi::scheduler::{
    GantryScheduler, gantry_scheduler_alloc, gantry_scheduler_compute, gantry_scheduler_free, gantry_scheduler_new,
    gantry_scheduler_release,
};
use gantry_capi::status::{GantryStatus, gantry_status_name};

/// What a callback saw of the calls it made: each call's name, status and
/// message (a callback must not panic: it is called from C's side of the
/// ABI, so it records and the test checks afterwards).
#[derive(Default)]
struct Seen {
    calls: Mutex<Vec<(&'static str, GantryStatus, String)>>,
    polls: AtomicUsize,
}

impl Seen {
    fn record(&self, call: &'static str, status: GantryStatus) {
        self.calls.lock().unwrap_or_else(|e| e.into_inner()).push((call, status, last_error()));
    }

    /// Checks that every recorded call was refused as re-entrant, naming
    /// `callback`, and that `expected` calls were recorded.
    fn check(&self, callback: &str, expected: &[&str]) {
        let calls = self.calls.lock().unwrap();
        let names: Vec<&str> = calls.iter().map(|c| c.0).collect();
        assert_eq!(names, expected);
        for (call, status, message) in calls.iter().filter(|c| !c.0.starts_with("other thread")) {
            assert_eq!(*status, GantryStatus::GantryErrorReentrant, "{call}: {message}");
            assert!(message.starts_with(call), "{call}: {message}");
            assert!(message.contains(callback), "{call}: {message}");
        }
    }
}

/// The handles an abort callback re-enters with.
struct AbortProbe {
    sched: GantryScheduler,
    ctx: GantryContext,
    graph: gantry_capi::graph::GantryGraph,
    y: gantry_capi::context::GantryTensor,
    n: usize,
    seen: Seen,
}

/// An abort callback that, on its first poll, calls back into the API: the
/// very compute that polls it (which held the scheduler it waits for), a
/// read of its context, an unrelated new context; checks that the two
/// lock-free functions answer; and has another thread make and free a
/// context while it runs. It never aborts.
unsafe extern "C" fn reentering_abort(user_data: *mut c_void) -> bool {
    // SAFETY: the test passes a pointer to an `AbortProbe` that outlives the compute.
    let probe = unsafe { &*(user_data as *const AbortProbe) };
    if probe.seen.polls.fetch_add(1, Ordering::SeqCst) > 0 {
        return false;
    }
    let seen = &probe.seen;
    seen.record("gantry_scheduler_compute", gantry_scheduler_compute(probe.sched, probe.ctx, probe.graph));
    let mut out = vec![0.0f32; probe.n];
    // SAFETY: `n` floats to write.
    let read = unsafe { gantry_tensor_get_f32(probe.ctx, probe.y, out.as_mut_ptr(), probe.n) };
    seen.record("gantry_tensor_get_f32", read);
    let mut unrelated = GantryContext::default();
    // SAFETY: one value to write.
    seen.record("gantry_context_new", unsafe { gantry_context_new(&mut unrelated) });
    // SAFETY: a static NUL-terminated string.
    let name = unsafe { CStr::from_ptr(gantry_status_name(GantryStatus::GantryErrorReentrant as i32)) };
    if name.to_bytes() != b"GANTRY_ERROR_REENTRANT" {
        seen.record("gantry_status_name", GantryStatus::GantryErrorPanic);
    }
    // Another thread is not inside the callback: its calls work as always.
    let (made, freed) = std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let mut c = GantryContext::default();
                // SAFETY: one value to write.
                let made = unsafe { gantry_context_new(&mut c) };
                (made, gantry_context_free(c))
            })
            .join()
            .unwrap_or((GantryStatus::GantryErrorPanic, GantryStatus::GantryErrorPanic))
    });
    seen.record("other thread: gantry_context_new", made);
    seen.record("other thread: gantry_context_free", freed);
    false
}

#[test]
fn an_abort_callback_that_reenters_gets_an_error_and_the_compute_completes() {
    let calls = within(120, "a compute whose abort callback re-enters", || {
        let cpu = cpu_backend();
        let p = Product::new(cpu, 16, 8, 4, 0.5);
        let mut sched = GantryScheduler::default();
        // SAFETY: one backend to read, default params, one value to write.
        ok(unsafe { gantry_scheduler_new(&cpu, 1, std::ptr::null(), &mut sched) });
        let probe =
            Box::new(AbortProbe { sched, ctx: p.ctx, graph: p.graph, y: p.y, n: p.m * p.n, seen: Seen::default() });
        let user_data = &*probe as *const AbortProbe as *mut c_void;
        // SAFETY: the callback and its probe outlive every compute until it is removed below.
        ok(unsafe { gantry_backend_set_abort_callback(cpu, Some(reentering_abort), user_data) });
        ok(gantry_scheduler_alloc(sched, p.ctx, p.graph));
        p.set(p.x, &p.input());
        ok(gantry_scheduler_compute(sched, p.ctx, p.graph));
        assert!(probe.seen.polls.load(Ordering::SeqCst) >= 1, "the abort callback was never polled");
        assert_eq!(p.get(p.y, p.m * p.n), p.expected(0.5), "the compute around the callback");
        // SAFETY: removing the callback.
        ok(unsafe { gantry_backend_set_abort_callback(cpu, None, std::ptr::null_mut()) });
        // Nothing stays marked: the compute's thread calls as before.
        ok(gantry_scheduler_compute(sched, p.ctx, p.graph));
        ok(gantry_scheduler_release(sched, p.ctx));
        ok(gantry_scheduler_free(sched));
        ok(gantry_graph_free(p.graph));
        ok(gantry_context_free(p.ctx));
        free_backend(cpu);
        let calls = probe.seen.calls.lock().unwrap().iter().map(|c| (c.0, c.1)).collect::<Vec<_>>();
        probe.seen.check(
            "the abort callback",
            &[
                "gantry_scheduler_compute",
                "gantry_tensor_get_f32",
                "gantry_context_new",
                "other thread: gantry_context_new",
                "other thread: gantry_context_free",
            ],
        );
        calls
    });
    let other: Vec<GantryStatus> = calls.iter().filter(|c| c.0.starts_with("other thread")).map(|c| c.1).collect();
    assert_eq!(other, [GantryStatus::GantryOk; 2], "another thread's calls while the callback ran");
}

/// A host job system that runs every task on the calling thread, after
/// trying to call back into the API.
struct ReenteringJobs {
    seen: Seen,
}

unsafe extern "C" fn reentering_run(
    user_data: *mut c_void,
    n_tasks: usize,
    task: GantryTaskFn,
    task_data: *mut c_void,
) {
    // SAFETY: the test passes a pointer to a `ReenteringJobs` that outlives the backend.
    let jobs = unsafe { &*(user_data as *const ReenteringJobs) };
    if jobs.seen.polls.fetch_add(1, Ordering::SeqCst) == 0 {
        let mut c = GantryContext::default();
        // SAFETY: one value to write.
        jobs.seen.record("gantry_context_new", unsafe { gantry_context_new(&mut c) });
    }
    for i in 0..n_tasks {
        // SAFETY: Gantry's task, called once per index with its data.
        unsafe { task(task_data, i) };
    }
}

#[test]
fn a_job_systems_run_that_reenters_gets_an_error_and_the_compute_completes() {
    within(120, "a compute whose job system re-enters", || {
        let jobs = Box::new(ReenteringJobs { seen: Seen::default() });
        let system = GantryJobSystem {
            concurrency: 4,
            run: Some(reentering_run),
            user_data: &*jobs as *const ReenteringJobs as *mut c_void,
        };
        let mut cpu = GantryBackend::default();
        // SAFETY: one job system to read (its `run` and data outlive the backend), one value to write.
        ok(unsafe { gantry_cpu_backend_new_with_jobs(&system, &mut cpu) });
        let p = Product::new(cpu, 256, 256, 64, 0.125);
        let mut sched = GantryScheduler::default();
        // SAFETY: as above.
        ok(unsafe { gantry_scheduler_new(&cpu, 1, std::ptr::null(), &mut sched) });
        ok(gantry_scheduler_alloc(sched, p.ctx, p.graph));
        p.set(p.x, &p.input());
        ok(gantry_scheduler_compute(sched, p.ctx, p.graph));
        let y = p.get(p.y, p.m * p.n);
        let worst = y.iter().zip(p.expected(0.125)).map(|(a, b)| (a - b).abs()).fold(0.0, f32::max);
        assert!(worst < 1e-2, "max |error| {worst}");
        assert!(jobs.seen.polls.load(Ordering::SeqCst) >= 1, "the job system was never given work");
        jobs.seen.check("the job system's run", &["gantry_context_new"]);
        ok(gantry_scheduler_free(sched));
        ok(gantry_graph_free(p.graph));
        ok(gantry_context_free(p.ctx));
        free_backend(cpu);
    });
}

/// What a token callback re-enters with.
struct TokenProbe {
    model: GantryModel,
    seen: Seen,
}

/// A token callback that calls its own model's functions (which the
/// generation holds) and goes on.
unsafe extern "C" fn reentering_token(_token: u32, _piece: *const c_char, _len: usize, user_data: *mut c_void) -> bool {
    // SAFETY: the test passes a pointer to a `TokenProbe` that outlives the generation.
    let probe = unsafe { &*(user_data as *const TokenProbe) };
    if probe.seen.polls.fetch_add(1, Ordering::SeqCst) == 0 {
        let mut n_vocab = 0usize;
        // SAFETY: one value to write.
        probe.seen.record("gantry_model_n_vocab", unsafe { gantry_model_n_vocab(probe.model, &mut n_vocab) });
        let mut tokens = [0u32; 8];
        let mut n = 0usize;
        // SAFETY: a NUL-terminated string, 8 tokens and one count to write.
        let tokenized =
            unsafe { gantry_model_tokenize(probe.model, c"Paris".as_ptr(), false, tokens.as_mut_ptr(), 8, &mut n) };
        probe.seen.record("gantry_model_tokenize", tokenized);
    }
    true
}

#[test]
fn a_token_callback_that_reenters_gets_an_error_and_the_generation_completes() {
    let path = match gantry::model::fetch::smollm2_path() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("skipped: SmolLM2 could not be had: {e}");
            return;
        }
    };
    within(120, "a generation whose token callback re-enters", move || {
        let path = std::ffi::CString::new(path.to_str().expect("UTF-8 model path")).unwrap();
        let params = GantryModelParams { backends: c"cpu".as_ptr(), n_ctx: 64, n_threads: 2, kv_f32: false };
        let mut model = GantryModel::default();
        // SAFETY: a NUL-terminated path, one params value (its backends a
        // NUL-terminated string), one value to write.
        ok(unsafe { gantry_model_load(path.as_ptr(), &params, &mut model) });
        let mut prompt = [0u32; 16];
        let mut n_prompt = 0usize;
        // SAFETY: a NUL-terminated string, 16 tokens and one count to write.
        ok(unsafe {
            gantry_model_tokenize(
                model,
                c"The capital of France is".as_ptr(),
                false,
                prompt.as_mut_ptr(),
                16,
                &mut n_prompt,
            )
        });
        let probe = Box::new(TokenProbe { model, seen: Seen::default() });
        let mut generated = 0usize;
        // SAFETY: `n_prompt` tokens to read; the callback and its probe outlive the call.
        ok(unsafe {
            gantry_model_generate(
                model,
                prompt.as_ptr(),
                n_prompt,
                4,
                0.0,
                0,
                Some(reentering_token),
                &*probe as *const TokenProbe as *mut c_void,
                &mut generated,
            )
        });
        assert_eq!(generated, 4);
        assert_eq!(probe.seen.polls.load(Ordering::SeqCst), 4, "the callback saw every token");
        probe.seen.check("the token callback", &["gantry_model_n_vocab", "gantry_model_tokenize"]);
        // The model's functions answer again once the generation returned.
        let mut n_vocab = 0usize;
        // SAFETY: one value to write.
        ok(unsafe { gantry_model_n_vocab(model, &mut n_vocab) });
        assert!(n_vocab > 0);
        ok(gantry_model_free(model));
    });
}
