//! wgpu graph plans: recorded once, computed again with new input data,
//! recorded again when the context changed, updated to another graph.

use super::support::{Harness, assert_close, values};
use gantry_arenas::GraphArena;
use gantry_engine::{DType, Device};

#[test]
fn a_recorded_plan_computes_new_data_and_follows_changes() {
    let _ = device_or_skip!();
    // A device of its own: the bind-group count below must not see the
    // other tests, which run at the same time on the shared device.
    let platform = gantry_wgpu::WgpuPlatform::new();
    let Some(device) = platform.wgpu_devices().first().cloned() else { return };
    let mut h = Harness::new(&device);
    let w = h.input(DType::F32, &[32, 16], &values(32 * 16, 1, -1.0, 1.0));
    let x = h.input(DType::F32, &[32, 2], &values(64, 2, -1.0, 1.0));
    let y = h.ctx.mul_mat(w, x).unwrap();
    let y = h.ctx.silu(y).unwrap();
    let z = h.ctx.scale(y, 2.0, 0.0).unwrap();
    h.compute(&[z]);
    let arena = GraphArena::new();
    let graph = h.ctx.build_graph(&arena, &[z]).unwrap();
    let backend = h.backend.clone();
    assert!(backend.supports_graph_plans());
    let plan = backend.graph_plan_create(&h.ctx, graph).unwrap();
    let groups = h.device.cached_bind_groups();
    for seed in 3..6 {
        h.ctx.set_f32(x, &values(64, seed, -1.0, 1.0)).unwrap();
        backend.graph_compute(&h.ctx, graph).into_result().unwrap();
        let want = h.read(z);
        h.ctx.set_f32(z, &[0.0; 32]).unwrap();
        backend.graph_plan_compute(&h.ctx, plan).into_result().unwrap();
        assert_close(&format!("seed {seed}"), &h.read(z), &want, 0.0, 0.0);
    }
    assert_eq!(h.device.cached_bind_groups(), groups, "computing a plan makes no bind group");

    // Another graph in the same plan: neg(x).
    let n = h.ctx.neg(x).unwrap();
    let buft = h.device.buffer_type();
    h.ctx.alloc_tensors(&[n], &buft, gantry_engine::BufferUsage::Compute).unwrap();
    let arena2 = GraphArena::new();
    let graph2 = h.ctx.build_graph(&arena2, &[n]).unwrap();
    backend.graph_plan_update(&h.ctx, plan, graph2).unwrap();
    backend.graph_plan_compute(&h.ctx, plan).into_result().unwrap();
    let xs = h.read(x);
    assert_close("neg", &h.read(n), &xs.iter().map(|v| -v).collect::<Vec<_>>(), 0.0, 0.0);
    backend.graph_plan_free(plan).unwrap();
    assert!(backend.graph_plan_compute(&h.ctx, plan).into_result().is_err(), "a freed plan is stale");
}

#[test]
fn the_buffer_type_names_its_device_by_handle() {
    let device = device_or_skip!();
    let named = device.buffer_type().device().expect("a wgpu buffer type has a device");
    assert_eq!(named.name(), device.name());
    assert!(named.supports_buft(device.buffer_type().as_ref()));
}
