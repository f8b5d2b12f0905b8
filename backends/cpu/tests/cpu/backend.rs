//! The CPU backend through the engine's traits: registry, device, platform
//! extensions, events, buffers over caller memory, and errors (never panics).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use gantry_cpu::{self as cpu, CpuBackend, CpuDevice, CpuPlatform};
use gantry_engine::{
    AbortCallback, Backend, BufferUsage, ComputeStatus, Context, DType, Device, DeviceType, Error, GraphArena,
    HostMemory, Platform, SetAbortCallback, SetThreadCount, TensorId, WeightRepack, device_extension,
    platform_extension,
};

fn alloc(ctx: &mut Context, ts: &[TensorId]) {
    ctx.alloc_tensors(ts, &cpu::buffer_type(), BufferUsage::Any).unwrap();
}

fn compute(backend: &dyn Backend, ctx: &Context, out: TensorId) -> ComputeStatus {
    let arena = GraphArena::new();
    let graph = ctx.build_graph(&arena, &[out]).unwrap();
    backend.graph_compute(ctx, graph)
}

fn failure(status: ComputeStatus) -> String {
    match status {
        ComputeStatus::Failed(e) => e.to_string(),
        other => panic!("expected a failure, got {other:?}"),
    }
}

#[test]
fn the_cpu_uses_only_host_buffer_types() {
    // Memory that is not host memory.
    let remote = gantry_engine::testing::TestBufferType::device("Remote", 256);
    assert!(!CpuDevice::new().supports_buft(&remote));
}

#[test]
fn thread_count_extension() {
    let platform = CpuPlatform::new();
    let set = platform_extension::<SetThreadCount>(&platform).expect("the CPU platform sets thread counts");
    let backend = platform.device().init_backend(None).unwrap();
    (set.0)(backend.as_ref(), 3).unwrap();
    let cpu = backend.as_any().downcast_ref::<CpuBackend>().unwrap();
    assert_eq!(cpu.n_threads(), 3);
    assert!((set.0)(backend.as_ref(), 0).is_err());
    assert!(platform.extension(std::any::TypeId::of::<String>()).is_none());
}

#[test]
fn abort_callback_stops_between_nodes() {
    let platform = CpuPlatform::new();
    let set = platform_extension::<SetAbortCallback>(&platform).unwrap();
    let backend = platform.device().init_backend(Some("threads=2")).unwrap();
    let mut ctx = Context::new();
    let x = ctx.tensor(DType::F32, [4]).unwrap();
    let a = ctx.scale(x, 2.0, 0.0).unwrap();
    let b = ctx.scale(a, 2.0, 0.0).unwrap();
    let c = ctx.scale(b, 2.0, 0.0).unwrap();
    alloc(&mut ctx, &[x, a, b, c]);
    ctx.set_f32(x, &[1.0; 4]).unwrap();
    ctx.fill_tensor_bytes(c, 0, 16, 0).unwrap();
    // Let two nodes run, then ask to stop.
    let polls = Arc::new(AtomicUsize::new(0));
    let p = polls.clone();
    let callback: AbortCallback = Arc::new(move || p.fetch_add(1, Ordering::SeqCst) >= 2);
    (set.0)(backend.as_ref(), Some(callback)).unwrap();
    assert!(matches!(compute(backend.as_ref(), &ctx, c), ComputeStatus::Aborted));
    assert_eq!(ctx.read_f32(b).unwrap(), vec![4.0; 4], "nodes before the abort ran");
    assert_eq!(ctx.read_f32(c).unwrap(), vec![0.0; 4], "the node after it did not");
    (set.0)(backend.as_ref(), None).unwrap();
    assert!(compute(backend.as_ref(), &ctx, c).is_success());
    assert_eq!(ctx.read_f32(c).unwrap(), vec![8.0; 4]);
}

/// One product of `a_dtype` weights `[k, m]` by f32 `[k, n]`, its result
/// filled with NaN first; the callback says stop from its `stop_at`-th poll
/// on. Returns the status, the result and how many polls there were.
fn product_with_callback(
    threads: usize,
    a_dtype: DType,
    [k, m, n]: [usize; 3],
    stop_at: usize,
) -> (ComputeStatus, Vec<f32>, usize) {
    let platform = CpuPlatform::new();
    let set = platform_extension::<SetAbortCallback>(&platform).unwrap();
    let backend = platform.device().init_backend(Some(&format!("threads={threads}"))).unwrap();
    let mut ctx = Context::new();
    let a = ctx.tensor(a_dtype, [k, m]).unwrap();
    let b = ctx.tensor(DType::F32, [k, n]).unwrap();
    let c = ctx.mul_mat(a, b).unwrap();
    alloc(&mut ctx, &[a, b, c]);
    // 0x3c3c..: f32 ~0.0115 in B; f16 1.05 scales and small quants in A.
    let (a_bytes, b_bytes) = (ctx.get(a).unwrap().nbytes(), ctx.get(b).unwrap().nbytes());
    ctx.fill_tensor_bytes(a, 0, a_bytes, 0x3c).unwrap();
    ctx.fill_tensor_bytes(b, 0, b_bytes, 0x3c).unwrap();
    ctx.set_f32(c, &vec![f32::NAN; m * n]).unwrap();
    let polls = Arc::new(AtomicUsize::new(0));
    let p = polls.clone();
    (set.0)(backend.as_ref(), Some(Arc::new(move || p.fetch_add(1, Ordering::SeqCst) + 1 >= stop_at))).unwrap();
    let status = compute(backend.as_ref(), &ctx, c);
    (set.0)(backend.as_ref(), None).unwrap();
    (status, ctx.read_f32(c).unwrap(), polls.load(Ordering::SeqCst))
}

/// A single long node is stopped part way: its kernel polls the callback
/// between its parts (a server's compute deadline must end a client's huge
/// product, not wait for it). The first poll, before the node, says go on;
/// the node is then cut short and the compute answers `Aborted`, its result
/// part written.
#[test]
fn abort_callback_stops_inside_a_long_node() {
    // F32 (the blocked sgemm, cut into parts while a callback is armed) and
    // Q8_0 (the quantized product's task loop).
    for (dtype, shape) in [(DType::F32, [256, 2048, 1024]), (DType::Q8_0, [256, 4096, 64])] {
        // One thread: the parts run in turn, so exactly the first ones run.
        let (status, out, polls) = product_with_callback(1, dtype, shape, 5);
        assert!(matches!(status, ComputeStatus::Aborted), "{dtype:?}: {status:?}");
        let done = out.iter().filter(|v| v.is_finite()).count();
        assert!(done > 0 && done < out.len(), "{dtype:?}: {done} of {} results written before the stop", out.len());
        assert!(polls >= 5, "{dtype:?}: {polls} polls");
        // Two threads: stopped from the first poll inside the node.
        let (status, out, _) = product_with_callback(2, dtype, shape, 2);
        assert!(matches!(status, ComputeStatus::Aborted), "{dtype:?}: {status:?}");
        assert!(out.iter().any(|v| v.is_nan()), "{dtype:?}: every result was written");
        // No stop: every result.
        let (status, out, _) = product_with_callback(2, dtype, shape, usize::MAX);
        assert!(status.is_success() && out.iter().all(|v| v.is_finite()), "{dtype:?}: {status:?}");
    }
}

#[test]
fn the_device_offers_its_platform_extensions() {
    // Code that holds a backend and not its platform (a model session) finds
    // the same extensions through the backend's device.
    let backend = CpuPlatform::new().device().init_backend(Some("threads=2")).unwrap();
    let set_abort = device_extension::<SetAbortCallback>(backend.device()).expect("the CPU device offers it");
    let set_threads = device_extension::<SetThreadCount>(backend.device()).expect("the CPU device offers it");
    (set_threads.0)(backend.as_ref(), 1).unwrap();
    assert_eq!(backend.as_any().downcast_ref::<CpuBackend>().unwrap().n_threads(), 1);
    let mut ctx = Context::new();
    let x = ctx.tensor(DType::F32, [4]).unwrap();
    let y = ctx.scale(x, 2.0, 0.0).unwrap();
    alloc(&mut ctx, &[x, y]);
    ctx.set_f32(x, &[1.0; 4]).unwrap();
    (set_abort.0)(backend.as_ref(), Some(Arc::new(|| true))).unwrap();
    assert!(matches!(compute(backend.as_ref(), &ctx, y), ComputeStatus::Aborted));
    (set_abort.0)(backend.as_ref(), None).unwrap();
    assert!(compute(backend.as_ref(), &ctx, y).is_success());
    assert!(CpuDevice::new().extension(std::any::TypeId::of::<String>()).is_none());
    // The repacked weight layout a loader asks the device for (ggml's extra buffer types).
    let repack = device_extension::<WeightRepack>(backend.device()).expect("the CPU repacks weights");
    assert_eq!((repack.buffer_type)().name(), "CPU_REPACK");
    let q8 = gantry_engine::TensorDesc::contiguous(DType::Q8_0, [64, 8, 1, 1]).unwrap().layout();
    let f32 = gantry_engine::TensorDesc::contiguous(DType::F32, [64, 8, 1, 1]).unwrap().layout();
    assert!((repack.repacks)(&q8) == cpu::repacks_layout(&q8) && !(repack.repacks)(&f32));
    // A backend the extension was not made for is refused, not touched.
    let mock = gantry_engine::testing::mock_devices::gpu("Mock0", gantry_engine::testing::mock_devices::all_ops);
    let err = (set_abort.0)(mock.as_ref(), None).unwrap_err().to_string();
    assert!(err.contains("not a CPU backend"), "{err}");
}

#[test]
fn events_have_state_and_stale_ids_are_errors() {
    let device = CpuDevice::new();
    let backend = device.backend(1).unwrap();
    let e = device.event_new().unwrap();
    device.event_synchronize(e).unwrap();
    backend.event_record(e).unwrap();
    backend.event_wait(e).unwrap();
    device.event_free(e).unwrap();
    for err in [
        backend.event_record(e).unwrap_err(),
        backend.event_wait(e).unwrap_err(),
        device.event_synchronize(e).unwrap_err(),
    ] {
        assert!(matches!(err, Error::StaleHandle { kind: "event", .. }), "{err}");
    }
    // Events belong to their device: another device's table does not know them.
    let other = CpuDevice::new();
    let e2 = device.event_new().unwrap();
    assert!(other.event_synchronize(e2).is_err());
}

#[test]
fn weights_in_caller_memory_are_read_in_place_and_never_written() {
    let device = CpuDevice::new();
    let backend = device.backend(2).unwrap();
    // "Mapped file": 3 rows of 4 floats.
    let weights: Vec<f32> = (0..12).map(|i| i as f32).collect();
    let owner = Arc::new(bytemuck_bytes(&weights));
    let buffer = device.buffer_from_host_memory(HostMemory::read_only(owner.clone()), 48).unwrap();
    let mut ctx = Context::new();
    let id = ctx.add_buffer(buffer, cpu::mapped_buffer_type(), BufferUsage::Weights);
    let w = ctx.tensor(DType::F32, [4, 3]).unwrap();
    ctx.set_name(w, "w").unwrap();
    ctx.place(w, id, 0).unwrap();
    let x = ctx.tensor(DType::F32, [4]).unwrap();
    let y = ctx.mul_mat(w, x).unwrap();
    alloc(&mut ctx, &[x, y]);
    ctx.set_f32(x, &[1.0, 0.0, 0.0, 1.0]).unwrap();
    assert!(compute(&backend, &ctx, y).is_success());
    assert_eq!(ctx.read_f32(y).unwrap(), vec![3.0, 11.0, 19.0]);
    // A result placed in the read-only memory is an error, not a write.
    let z = ctx.scale_inplace(w, 2.0, 0.0).unwrap();
    let err = failure(compute(&backend, &ctx, z));
    assert!(err.contains("read-only") && err.contains("'w'"), "{err}");
    assert_eq!(ctx.read_f32(w).unwrap(), weights);
}

fn bytemuck_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|f| f.to_le_bytes()).collect()
}

#[test]
fn bad_input_is_an_error_naming_the_op_or_tensor() {
    let backend = CpuBackend::with_threads(2).unwrap();
    let mut ctx = Context::new();

    // Unallocated source.
    let x = ctx.tensor(DType::F32, [8]).unwrap();
    ctx.set_name(x, "x").unwrap();
    let y = ctx.silu(x).unwrap();
    alloc(&mut ctx, &[y]);
    let err = failure(compute(&backend, &ctx, y));
    assert!(err.contains("'x'") && err.contains("not allocated"), "{err}");

    // An op the CPU does not support (Q8_1 is an activation format, never weights).
    let q = ctx.tensor(DType::Q8_1, [32, 2]).unwrap();
    let v = ctx.tensor(DType::F32, [32]).unwrap();
    let m = ctx.mul_mat(q, v).unwrap();
    alloc(&mut ctx, &[q, v, m]);
    assert!(!cpu::supports_op(&ctx, m) && cpu::supports_op(&ctx, y));
    let err = failure(compute(&backend, &ctx, m));
    assert!(err.contains("MUL_MAT") && err.contains("q8_1"), "{err}");

    // An index outside the table.
    let table = ctx.tensor(DType::F32, [4, 3]).unwrap();
    let idx = ctx.tensor(DType::I32, [2]).unwrap();
    ctx.set_name(idx, "token_ids").unwrap();
    let rows = ctx.get_rows(table, idx).unwrap();
    alloc(&mut ctx, &[table, idx, rows]);
    ctx.set_i32(idx, &[1, 3]).unwrap();
    let err = failure(compute(&backend, &ctx, rows));
    assert!(err.contains("token_ids") && err.contains("index 3"), "{err}");

    // A description mutated behind the builders' back: the kernel checks shapes.
    let a = ctx.tensor(DType::F32, [6]).unwrap();
    let b = ctx.neg(a).unwrap();
    alloc(&mut ctx, &[a, b]);
    ctx.desc_mut(b).unwrap().ne = [3, 1, 1, 1];
    let err = failure(compute(&backend, &ctx, b));
    assert!(err.starts_with("NEG"), "{err}");
    // ... and never reads past a buffer.
    ctx.desc_mut(a).unwrap().ne = [600, 1, 1, 1];
    ctx.desc_mut(b).unwrap().ne = [600, 1, 1, 1];
    let err = failure(compute(&backend, &ctx, b));
    assert!(err.contains("out of bounds") || err.contains("do not fit"), "{err}");
}

#[test]
fn empty_tensors_compute_nothing_and_succeed() {
    let backend = CpuBackend::with_threads(2).unwrap();
    let mut ctx = Context::new();
    let a = ctx.tensor(DType::F32, [0, 3]).unwrap();
    let b = ctx.exp(a).unwrap();
    alloc(&mut ctx, &[a, b]);
    assert!(compute(&backend, &ctx, b).is_success());
}

#[test]
fn threads_split_large_ops_with_the_same_result() {
    let mut ctx = Context::new();
    let a = ctx.tensor(DType::F16, [512, 300]).unwrap();
    let b = ctx.tensor(DType::F32, [512, 40]).unwrap();
    let c = ctx.mul_mat(a, b).unwrap();
    let d = ctx.soft_max(c).unwrap();
    alloc(&mut ctx, &[a, b, c, d]);
    let va: Vec<f32> = (0..512 * 300).map(|i| ((i * 7919) % 1000) as f32 / 1000.0 - 0.5).collect();
    let vb: Vec<f32> = (0..512 * 40).map(|i| ((i * 104_729) % 997) as f32 / 997.0 - 0.5).collect();
    ctx.set_f32(a, &va).unwrap();
    ctx.set_f32(b, &vb).unwrap();
    let mut results = Vec::new();
    for threads in [1, 2, 4] {
        let backend = CpuBackend::with_threads(threads).unwrap();
        assert!(compute(&backend, &ctx, d).is_success());
        results.push(ctx.read_f32(d).unwrap());
    }
    for r in &results[1..] {
        let max_diff = r.iter().zip(&results[0]).map(|(x, y)| (x - y).abs()).fold(0f32, f32::max);
        assert!(max_diff < 1e-6, "{max_diff}");
    }
}

/// A graph of several nodes on several threads runs on a pool thread: a node
/// failing there still ends the compute with an error naming it, and the
/// backend computes the next graph normally.
#[test]
fn a_failing_node_in_a_graph_on_the_pool_is_an_error() {
    let backend = CpuBackend::with_threads(2).unwrap();
    let mut ctx = Context::new();
    let table = ctx.tensor(DType::F32, [4, 3]).unwrap();
    let scaled = ctx.scale(table, 2.0, 0.0).unwrap();
    let idx = ctx.tensor(DType::I32, [2]).unwrap();
    ctx.set_name(idx, "token_ids").unwrap();
    let rows = ctx.get_rows(scaled, idx).unwrap();
    let out = ctx.neg(rows).unwrap();
    alloc(&mut ctx, &[table, scaled, idx, rows, out]);
    ctx.set_f32(table, &(0..12).map(|i| i as f32).collect::<Vec<_>>()).unwrap();
    ctx.set_i32(idx, &[1, 3]).unwrap();
    let err = failure(compute(&backend, &ctx, out));
    assert!(err.contains("token_ids") && err.contains("index 3"), "{err}");
    ctx.set_i32(idx, &[2, 0]).unwrap();
    assert!(compute(&backend, &ctx, out).is_success());
    assert_eq!(ctx.read_f32(out).unwrap(), vec![-16.0, -18.0, -20.0, -22.0, -0.0, -2.0, -4.0, -6.0]);
}

/// Chains of quantized products (one token and a 64-token batch) give the
/// same result on 1, 2 and 4 threads, where the graph runs on a pool thread
/// that joins every kernel and reuses the per-thread scratch.
#[test]
fn quantized_graphs_on_the_pool_match_one_thread() {
    for n in [1, 64] {
        let mut ctx = Context::new();
        let x = ctx.tensor(DType::F32, [576, n]).unwrap();
        let mut all = vec![x];
        let mut cur = x;
        for (i, (k, m, dtype)) in
            [(576, 1536, DType::Q4_1), (1536, 576, DType::Q4_K), (576, 576, DType::Q8_0)].into_iter().enumerate()
        {
            let w = ctx.tensor(dtype, [k, m]).unwrap();
            let y = ctx.mul_mat(w, cur).unwrap();
            cur = ctx.scale(y, 1.0 / (k as f32).sqrt(), 0.0).unwrap();
            alloc(&mut ctx, &[w]);
            let v: Vec<f32> = (0..k * m).map(|j| ((j * 7919 + i) % 1000) as f32 / 1000.0 - 0.5).collect();
            ctx.set_f32(w, &v).unwrap();
            all.extend([y, cur]);
        }
        alloc(&mut ctx, &all);
        let vx: Vec<f32> = (0..576 * n).map(|j| ((j * 104_729) % 997) as f32 / 997.0 - 0.5).collect();
        ctx.set_f32(x, &vx).unwrap();
        let mut results = Vec::new();
        for threads in [1, 2, 4] {
            let backend = CpuBackend::with_threads(threads).unwrap();
            for _ in 0..2 {
                assert!(compute(&backend, &ctx, cur).is_success());
                results.push(ctx.read_f32(cur).unwrap());
            }
        }
        let scale = results[0].iter().fold(0f32, |a, v| a.max(v.abs()));
        assert!(scale > 0.0);
        for r in &results[1..] {
            let max_diff = r.iter().zip(&results[0]).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
            assert!(max_diff <= 1e-5 * scale, "n = {n}: {max_diff} (scale {scale})");
        }
    }
}

#[test]
fn mul_mat_takes_activations_already_in_the_dot_partner() {
    let backend = CpuBackend::with_threads(2).unwrap();
    for (weights, partner, k) in
        [(DType::Q4_0, DType::Q8_0, 64), (DType::Q4_1, DType::Q8_1, 64), (DType::Q4_K, DType::Q8_K, 256)]
    {
        let mut ctx = Context::new();
        let w = ctx.tensor(weights, [k, 8]).unwrap();
        let x = ctx.tensor(DType::F32, [k, 3]).unwrap();
        let xq = ctx.tensor(partner, [k, 3]).unwrap();
        alloc(&mut ctx, &[w, x, xq]);
        let ws = gantry_engine::SplitMix64::new(3).values(k * 8, -1.0, 1.0);
        let wrow = weights.row_size(k).unwrap();
        let mut wbytes = vec![0u8; 8 * wrow];
        for (r, out) in ws.chunks(k).zip(wbytes.chunks_mut(wrow)) {
            gantry_engine::quant::quantize_row(weights, r, out).unwrap();
        }
        ctx.set_bytes(w, &wbytes).unwrap();
        let xs = gantry_engine::SplitMix64::new(4).values(k * 3, -1.0, 1.0);
        // The activations quantized on the host, column by column; the F32
        // product gets the same (dequantized) values.
        let row = partner.row_size(k).unwrap();
        let mut bytes = vec![0u8; 3 * row];
        let mut same = vec![0f32; k * 3];
        for ((col, out), back) in xs.chunks(k).zip(bytes.chunks_mut(row)).zip(same.chunks_mut(k)) {
            gantry_engine::quant::quantize_row(partner, col, out).unwrap();
            gantry_engine::quant::dequantize_row(partner, out, back).unwrap();
        }
        ctx.set_bytes(xq, &bytes).unwrap();
        ctx.set_f32(x, &same).unwrap();
        let wq = w;
        let from_f32 = ctx.mul_mat(wq, x).unwrap();
        let from_partner = ctx.mul_mat(wq, xq).unwrap();
        let other = ctx.tensor(DType::Q8_0, [k, 3]).unwrap();
        let wrong = ctx.mul_mat(wq, other).unwrap();
        let outs = [from_f32, from_partner];
        alloc(&mut ctx, &outs);
        assert!(cpu::supports_op(&ctx, from_partner), "{weights} x {partner}");
        assert_eq!(cpu::supports_op(&ctx, wrong), partner == DType::Q8_0, "{weights} x Q8_0");
        let arena = GraphArena::new();
        let graph = ctx.build_graph(&arena, &outs).unwrap();
        backend.graph_compute(&ctx, graph).into_result().unwrap();
        let (a, b) = (ctx.read_f32(from_f32).unwrap(), ctx.read_f32(from_partner).unwrap());
        for (i, (a, b)) in a.iter().zip(&b).enumerate() {
            assert!((a - b).abs() <= 1e-3 * (1.0 + a.abs()), "{weights} x {partner}, element {i}: {a} vs {b}");
        }
    }
}

#[test]
fn a_buffer_type_names_its_device_by_handle() {
    let device = cpu::buffer_type().device().expect("the CPU buffer type has a device");
    assert_eq!((device.name(), device.device_type()), ("CPU", DeviceType::Cpu));
    assert!(device.supports_buft(cpu::buffer_type().as_ref()));
    assert_eq!(cpu::mapped_buffer_type().device().unwrap().name(), "CPU");
}

/// A thread count from a typo or an unchecked input is an error naming it,
/// before any pool or scratch is sized by it (2^40 threads once aborted the
/// process on the pool's allocation); a failed change keeps the old pool.
#[test]
fn thread_counts_beyond_the_machine_are_refused() {
    for n in [0, cpu::max_threads() + 1, 1 << 40, usize::MAX] {
        let Err(err) = CpuBackend::with_threads(n).map(|_| ()) else { panic!("{n} threads accepted") };
        let err = err.to_string();
        assert!(err.contains(&format!("{n} threads")), "{err}");
        if n > 0 {
            assert!(gantry_cpu::SpinPool::new(n).is_err(), "a spin pool of {n} threads");
        }
    }
    let backend = CpuBackend::with_threads(2).unwrap();
    assert!(backend.set_n_threads(1 << 40).is_err());
    assert_eq!(backend.n_threads(), 2, "the old pool stays");
    assert!(CpuBackend::with_threads(cpu::max_threads().min(4)).is_ok());
}

#[test]
fn empty_nodes_compute_nothing_and_an_empty_concat_part_adds_nothing() {
    let backend = CpuBackend::with_threads(2).unwrap();
    let mut ctx = Context::new();
    // An empty tensor whose other dimension is huge: skipped, not looped over.
    let empty = ctx.tensor(DType::F32, [0, 1 << 40]).unwrap();
    let scaled = ctx.scale(empty, 2.0, 0.0).unwrap();
    let a = ctx.tensor(DType::F32, [3, 2]).unwrap();
    let none = ctx.tensor(DType::F32, [3, 0]).unwrap();
    let joined = ctx.concat(a, none, 1).unwrap();
    let joined_first = ctx.concat(none, a, 1).unwrap();
    alloc(&mut ctx, &[empty, scaled, a, none, joined, joined_first]);
    ctx.set_f32(a, &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
    assert!(compute(&backend, &ctx, scaled).is_success());
    assert!(compute(&backend, &ctx, joined).is_success());
    assert!(compute(&backend, &ctx, joined_first).is_success());
    assert_eq!(ctx.read_f32(joined).unwrap(), vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    assert_eq!(ctx.read_f32(joined_first).unwrap(), vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
}

/// `w · x` through a graph with the `[k, 37]` weights of `dtype` (quantized
/// from fixed values) in `weights_buft` and `n` activation columns.
fn weight_product(weights_buft: &Arc<dyn gantry_engine::BufferType>, dtype: DType, k: usize, n: usize) -> Vec<f32> {
    let m = 37;
    let mut ctx = Context::new();
    let w = ctx.tensor(dtype, [k, m]).unwrap();
    let x = ctx.tensor(DType::F32, [k, n]).unwrap();
    let y = ctx.mul_mat(w, x).unwrap();
    let arena = GraphArena::new();
    let graph = ctx.build_graph(&arena, &[y]).unwrap();
    ctx.alloc_tensors(&[w], weights_buft, BufferUsage::Weights).unwrap();
    let cpu_buft = cpu::buffer_type();
    ctx.alloc_tensors(&[x], &cpu_buft, BufferUsage::Weights).unwrap();
    ctx.alloc_tensors(graph.nodes(), &cpu_buft, BufferUsage::Compute).unwrap();
    ctx.set_f32(w, &gantry_engine::SplitMix64::new(5).values(k * m, -1.0, 1.0)).unwrap();
    ctx.set_f32(x, &gantry_engine::SplitMix64::new(6).values(k * n, -1.0, 1.0)).unwrap();
    let backend = CpuBackend::with_threads(2).unwrap();
    backend.graph_compute(&ctx, graph).into_result().unwrap();
    ctx.read_f32(y).unwrap()
}

/// MUL_MAT over every repacked type in a `CPU_REPACK` buffer gives the
/// plain buffer's product (one column and a batch; the same integer sums in
/// another order).
#[test]
fn repacked_weights_in_a_graph_give_the_plain_product() {
    for dtype in gantry_cpu::quant::repack::REPACKED_DTYPES {
        let k = 512;
        for n in [1, 9] {
            let plain = weight_product(&cpu::buffer_type(), dtype, k, n);
            let repacked = weight_product(&cpu::repack_buffer_type(), dtype, k, n);
            assert!(plain.iter().any(|&v| v != 0.0), "{dtype}");
            for (i, (p, r)) in plain.iter().zip(&repacked).enumerate() {
                assert!((p - r).abs() <= 1e-4 * p.abs().max(1.0), "{dtype} n={n} [{i}]: plain {p}, repacked {r}");
            }
        }
    }
}
