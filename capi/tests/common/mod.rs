//! What the C ABI's Rust tests share: calling through the exported
//! functions as a C host would, a CPU backend, a small graph with weights,
//! and a deadline so that a deadlock fails a test instead of hanging it.

use std::ffi::CStr;
use std::sync::mpsc;
use std::time::Duration;

use gantry_capi::backend::{GantryBackend, gantry_backend_free};
use gantry_capi::context::{
    GantryContext, GantryDType, GantryTensor, gantry_context_alloc_weights, gantry_context_new, gantry_tensor_new,
    gantry_tensor_set_input,
};
use gantry_capi::data::{gantry_tensor_get_f32, gantry_tensor_set_f32};
use gantry_capi::graph::{GantryGraph, gantry_graph_build};
use gantry_capi::ops::gantry_mul_mat;
use gantry_capi::registry::{GantryRegistry, gantry_registry_backend, gantry_registry_free, gantry_registry_new};
use gantry_capi::status::{GantryStatus, gantry_last_error, gantry_status_name};

/// This thread's last error message.
pub fn last_error() -> String {
    // SAFETY: gantry_last_error never returns null; the text lives until the
    // next call on this thread, and is copied here.
    unsafe { CStr::from_ptr(gantry_last_error()) }.to_string_lossy().into_owned()
}

/// The name of a status.
pub fn name(status: GantryStatus) -> String {
    // SAFETY: gantry_status_name returns a static NUL-terminated string.
    unsafe { CStr::from_ptr(gantry_status_name(status as i32)) }.to_string_lossy().into_owned()
}

/// Panics with the message unless `status` is `GANTRY_OK`.
#[track_caller]
pub fn ok(status: GantryStatus) {
    assert_eq!(status, GantryStatus::GantryOk, "{}: {}", name(status), last_error());
}

/// Asserts that `status` is `want` with a message; returns the message.
#[track_caller]
pub fn fails(status: GantryStatus, want: GantryStatus) -> String {
    let message = last_error();
    assert_eq!(status, want, "wanted {}, got {}: {message}", name(want), name(status));
    assert!(!message.is_empty(), "{} without a message", name(status));
    message
}

/// A backend on the CPU (the registry is freed again; the backend stays).
pub fn cpu_backend() -> GantryBackend {
    let mut reg = GantryRegistry::default();
    // SAFETY: `reg` is one writable value.
    ok(unsafe { gantry_registry_new(&mut reg) });
    let mut cpu = GantryBackend::default();
    // SAFETY: a NUL-terminated name and one writable value.
    ok(unsafe { gantry_registry_backend(reg, c"cpu".as_ptr(), &mut cpu) });
    ok(gantry_registry_free(reg));
    cpu
}

/// A context holding `y = W x` with the weight `W` (`[k, m]`) in `backend`'s
/// memory and the input `x` (`[k, n]`) placed by a scheduler.
pub struct Product {
    pub ctx: GantryContext,
    pub w: GantryTensor,
    pub x: GantryTensor,
    pub y: GantryTensor,
    pub graph: GantryGraph,
    pub k: usize,
    pub m: usize,
    pub n: usize,
}

impl Product {
    /// A new context with `W` made and written (values from `seed`).
    pub fn new(backend: GantryBackend, k: usize, m: usize, n: usize, seed: f32) -> Self {
        let mut ctx = GantryContext::default();
        // SAFETY: one writable value.
        ok(unsafe { gantry_context_new(&mut ctx) });
        let tensor = |ne: [i64; 2]| {
            let mut t = GantryTensor::default();
            // SAFETY: two sizes to read, one value to write.
            ok(unsafe { gantry_tensor_new(ctx, GantryDType::GantryF32 as i32, 2, ne.as_ptr(), &mut t) });
            t
        };
        let w = tensor([k as i64, m as i64]);
        let x = tensor([k as i64, n as i64]);
        ok(gantry_tensor_set_input(ctx, x));
        // SAFETY: one tensor to read.
        ok(unsafe { gantry_context_alloc_weights(ctx, backend, &w, 1) });
        let mut y = GantryTensor::default();
        // SAFETY: one value to write.
        ok(unsafe { gantry_mul_mat(ctx, w, x, &mut y) });
        let mut graph = GantryGraph::default();
        // SAFETY: one tensor to read, one value to write.
        ok(unsafe { gantry_graph_build(ctx, &y, 1, &mut graph) });
        let p = Self { ctx, w, x, y, graph, k, m, n };
        p.set(w, &p.weights(seed));
        p
    }

    /// The values `W` was written with for `seed`.
    pub fn weights(&self, seed: f32) -> Vec<f32> {
        (0..self.k * self.m).map(|i| seed + (i % 7) as f32 * 0.25).collect()
    }

    /// Input values.
    pub fn input(&self) -> Vec<f32> {
        (0..self.k * self.n).map(|i| (i % 5) as f32 - 2.0).collect()
    }

    /// `y` as computed on the host from `W` (of `seed`) and [`Self::input`].
    pub fn expected(&self, seed: f32) -> Vec<f32> {
        let (w, x) = (self.weights(seed), self.input());
        let mut y = vec![0.0; self.m * self.n];
        for col in 0..self.n {
            for row in 0..self.m {
                y[col * self.m + row] = (0..self.k).map(|i| w[row * self.k + i] * x[col * self.k + i]).sum();
            }
        }
        y
    }

    /// Writes `values` into `t`.
    pub fn set(&self, t: GantryTensor, values: &[f32]) {
        // SAFETY: `values.len()` floats to read.
        ok(unsafe { gantry_tensor_set_f32(self.ctx, t, values.as_ptr(), values.len()) });
    }

    /// Reads `t` (of `n` elements).
    pub fn get(&self, t: GantryTensor, n: usize) -> Vec<f32> {
        let mut out = vec![0.0; n];
        // SAFETY: `n` floats to write.
        ok(unsafe { gantry_tensor_get_f32(self.ctx, t, out.as_mut_ptr(), n) });
        out
    }
}

/// Frees a backend.
pub fn free_backend(backend: GantryBackend) {
    ok(gantry_backend_free(backend));
}

/// Runs `f` on another thread and returns its result, failing the test if
/// it has not returned within `seconds` (a deadlock then fails instead of
/// hanging the run; the stuck thread is left behind and dies with the
/// process).
pub fn within<R: Send + 'static>(seconds: u64, what: &str, f: impl FnOnce() -> R + Send + 'static) -> R {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(Duration::from_secs(seconds)) {
        Ok(r) => r,
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("{what} did not return within {seconds} s: a deadlock"),
        Err(mpsc::RecvTimeoutError::Disconnected) => panic!("{what} panicked (see above)"),
    }
}
