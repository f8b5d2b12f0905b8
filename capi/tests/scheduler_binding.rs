//! A scheduler is bound to the first context it works in: given another,
//! every call is an error naming both contexts, and neither context loses
//! or changes anything (the scheduler's buffer ids, looked up in the other
//! context, used to free or overwrite its weights).

mod common;

use common::{Product, cpu_backend, fails, free_backend, ok, within};
use gantry_capi::context::gantry_context_free;
use gantry_capi::graph::gantry_graph_free;
use gantry_capi::scheduler::{
    GantryScheduler, gantry_scheduler_alloc, gantry_scheduler_compute, gantry_scheduler_compute_async,
    gantry_scheduler_free, gantry_scheduler_new, gantry_scheduler_release, gantry_scheduler_reserve,
    gantry_scheduler_wait,
};
use gantry_capi::status::GantryStatus;

fn new_scheduler(backend: &gantry_capi::backend::GantryBackend) -> GantryScheduler {
    let mut s = GantryScheduler::default();
    // SAFETY: one backend to read, default params, one value to write.
    ok(unsafe { gantry_scheduler_new(backend, 1, std::ptr::null(), &mut s) });
    s
}

/// Computes `p` with `s` and checks the numbers.
fn compute_and_check(s: GantryScheduler, p: &Product, seed: f32) {
    ok(gantry_scheduler_alloc(s, p.ctx, p.graph));
    p.set(p.x, &p.input());
    ok(gantry_scheduler_compute(s, p.ctx, p.graph));
    assert_eq!(p.get(p.y, p.m * p.n), p.expected(seed));
}

#[test]
fn a_scheduler_refuses_a_second_context_naming_both_and_touches_neither() {
    within(120, "the binding test", || {
        let cpu = cpu_backend();
        let a = Product::new(cpu, 8, 6, 3, 1.0);
        let b = Product::new(cpu, 8, 6, 3, -3.0);
        let s = new_scheduler(&cpu);
        compute_and_check(s, &a, 1.0);

        let names_both = |message: &str| {
            for id in [s.id, a.ctx.id, b.ctx.id] {
                assert!(message.contains(&format!("{id:#x}")), "{message} does not name {id:#x}");
            }
        };
        let state = GantryStatus::GantryErrorState;
        let mut bytes = [0usize; 4];
        let mut n_bytes = 0usize;
        // SAFETY: four sizes and one count to write.
        let reserve = unsafe { gantry_scheduler_reserve(s, b.ctx, b.graph, bytes.as_mut_ptr(), 4, &mut n_bytes) };
        names_both(&fails(reserve, state));
        names_both(&fails(gantry_scheduler_alloc(s, b.ctx, b.graph), state));
        names_both(&fails(gantry_scheduler_compute(s, b.ctx, b.graph), state));
        names_both(&fails(gantry_scheduler_compute_async(s, b.ctx, b.graph), state));
        // Release is where the old code freed the other context's buffers.
        names_both(&fails(gantry_scheduler_release(s, b.ctx), state));
        ok(gantry_scheduler_wait(s));

        // Both contexts' weights read back as written; the first context's
        // result is still there and the scheduler still computes it.
        assert_eq!(b.get(b.w, b.k * b.m), b.weights(-3.0), "the second context's weights changed");
        assert_eq!(a.get(a.w, a.k * a.m), a.weights(1.0), "the first context's weights changed");
        assert_eq!(a.get(a.y, a.m * a.n), a.expected(1.0));
        compute_and_check(s, &a, 1.0);

        // The second context is whole: a scheduler of its own computes it.
        let s_b = new_scheduler(&cpu);
        compute_and_check(s_b, &b, -3.0);
        assert_eq!(a.get(a.w, a.k * a.m), a.weights(1.0));

        for (sched, p) in [(s, &a), (s_b, &b)] {
            ok(gantry_scheduler_release(sched, p.ctx));
            ok(gantry_scheduler_free(sched));
            ok(gantry_graph_free(p.graph));
        }
        ok(gantry_context_free(a.ctx));
        ok(gantry_context_free(b.ctx));
        free_backend(cpu);
    });
}

#[test]
fn a_scheduler_is_bound_by_its_first_use_not_by_a_release_before_it() {
    within(120, "the first-use test", || {
        let cpu = cpu_backend();
        let a = Product::new(cpu, 4, 3, 2, 0.5);
        let b = Product::new(cpu, 4, 3, 2, 2.0);
        let s = new_scheduler(&cpu);
        // A release before any use gives nothing back and binds nothing.
        ok(gantry_scheduler_release(s, a.ctx));
        // The first reserve binds it, here to the second context.
        let mut n_bytes = 0usize;
        // SAFETY: no sizes written (null with cap 0), one count to write.
        ok(unsafe { gantry_scheduler_reserve(s, b.ctx, b.graph, std::ptr::null_mut(), 0, &mut n_bytes) });
        assert_eq!(n_bytes, 1);
        compute_and_check(s, &b, 2.0);
        let message = fails(gantry_scheduler_compute(s, a.ctx, a.graph), GantryStatus::GantryErrorState);
        assert!(message.contains("bound to context"), "{message}");
        assert_eq!(a.get(a.w, a.k * a.m), a.weights(0.5));

        // Freeing the bound context does not unbind it: its buffer ids
        // would still be looked up in whichever context came next.
        ok(gantry_scheduler_free(s));
        let s = new_scheduler(&cpu);
        compute_and_check(s, &b, 2.0);
        ok(gantry_graph_free(b.graph));
        ok(gantry_context_free(b.ctx));
        let message = fails(gantry_scheduler_alloc(s, a.ctx, a.graph), GantryStatus::GantryErrorState);
        assert!(message.contains(&format!("{:#x}", b.ctx.id)), "{message}");
        let s_a = new_scheduler(&cpu);
        compute_and_check(s_a, &a, 0.5);
        for sched in [s, s_a] {
            ok(gantry_scheduler_free(sched));
        }
        ok(gantry_graph_free(a.graph));
        ok(gantry_context_free(a.ctx));
        free_backend(cpu);
    });
}

/// Every kind's first handle used to be the same number: a scheduler's
/// handle given to `gantry_context_free` freed a live context. A handle of
/// another kind is now `GANTRY_ERROR_INVALID_HANDLE`, and nothing is freed.
#[test]
fn a_handle_of_another_kind_is_refused_and_frees_nothing() {
    within(120, "the handle kind test", || {
        let cpu = cpu_backend();
        let p = Product::new(cpu, 8, 6, 3, 1.0);
        let s = new_scheduler(&cpu);
        let as_context = gantry_capi::context::GantryContext { id: s.id };
        let as_graph = gantry_capi::graph::GantryGraph { id: p.ctx.id };
        let as_scheduler = GantryScheduler { id: p.graph.id };
        let e = fails(gantry_context_free(as_context), GantryStatus::GantryErrorInvalidHandle);
        assert!(e.contains("context handle"), "{e}");
        fails(gantry_graph_free(as_graph), GantryStatus::GantryErrorInvalidHandle);
        fails(gantry_scheduler_free(as_scheduler), GantryStatus::GantryErrorInvalidHandle);
        // The context, graph and scheduler all still work.
        compute_and_check(s, &p, 1.0);
        ok(gantry_scheduler_free(s));
        ok(gantry_graph_free(p.graph));
        ok(gantry_context_free(p.ctx));
        free_backend(cpu);
    });
}

/// Two contexts built the same way number their tensors the same: a tensor
/// handle of one used to name the other's tensor of that number. A tensor
/// handle now carries its context's tag: another context's is
/// `GANTRY_ERROR_INVALID_HANDLE`, and neither context changes.
#[test]
fn a_tensor_of_another_context_is_refused_and_changes_nothing() {
    within(120, "the tensor context test", || {
        let cpu = cpu_backend();
        let a = Product::new(cpu, 8, 6, 3, 1.0);
        let b = Product::new(cpu, 8, 6, 3, -3.0);
        let values = vec![7.0f32; a.k * a.n];
        // SAFETY: `values` holds as many floats as passed.
        let status = unsafe { gantry_capi::data::gantry_tensor_set_f32(b.ctx, a.x, values.as_ptr(), values.len()) };
        let e = fails(status, GantryStatus::GantryErrorInvalidHandle);
        assert!(e.contains("another context"), "{e}");
        let mut sum = gantry_capi::context::GantryTensor::default();
        // SAFETY: one tensor to write.
        let status = unsafe { gantry_capi::ops::gantry_add(b.ctx, b.y, a.y, &mut sum) };
        fails(status, GantryStatus::GantryErrorInvalidHandle);
        assert_eq!(sum, gantry_capi::context::GantryTensor::default(), "no tensor was made");
        let mut graph = gantry_capi::graph::GantryGraph::default();
        // SAFETY: one output to read, one graph to write.
        let status = unsafe { gantry_capi::graph::gantry_graph_build(b.ctx, &a.y, 1, &mut graph) };
        fails(status, GantryStatus::GantryErrorInvalidHandle);
        // Each context still computes its own product with its own weights.
        for (p, seed) in [(&a, 1.0), (&b, -3.0)] {
            let s = new_scheduler(&cpu);
            compute_and_check(s, p, seed);
            ok(gantry_scheduler_free(s));
        }
        for p in [a, b] {
            ok(gantry_graph_free(p.graph));
            ok(gantry_context_free(p.ctx));
        }
        free_backend(cpu);
    });
}
