//! The wgpu platform, buffer type, buffers and backend as the engine sees
//! them: device facts, alignment and size limits, transfers at ragged
//! offsets, and a graph computed again reusing every kernel and bind group.

use super::support::{Harness, assert_close, values};
use gantry_engine::{Buffer, BufferType, BufferUsage, Context, DType, Device, DeviceType, Platform};
use gantry_wgpu::device_type_of;
use gantry_wgpu::gpu::AdapterKind;

#[test]
fn wgpu_platform_reports_devices() {
    let platform = gantry_wgpu::WgpuPlatform::new();
    assert_eq!(platform.name(), "wgpu");
    let devices = platform.devices();
    assert_eq!(devices.len(), platform.wgpu_devices().len());
    for (i, d) in devices.iter().enumerate() {
        assert_eq!(d.name(), format!("wgpu{i}"));
        assert!(!d.description().is_empty());
        assert_ne!(d.device_type(), DeviceType::Cpu, "a wgpu device is never the host CPU");
        assert!(d.supports_buft(d.buffer_type().as_ref()));
    }
    let Some(dev) = super::support::device() else {
        eprintln!("skipped: no wgpu adapter on this machine");
        return;
    };
    let facts = dev.facts();
    assert!(facts.limits.can_run_kernels());
    assert_eq!(dev.device_type(), device_type_of(facts.kind));
    if facts.kind == AdapterKind::Cpu {
        assert_eq!(dev.device_type(), DeviceType::IGpu, "software adapters rank as integrated GPUs");
        assert!(dev.description().contains("software"));
    }
    let buft = dev.buffer_type();
    assert!(!buft.is_host());
    assert!(buft.alignment() >= facts.limits.min_storage_buffer_offset_alignment as usize);
    assert!(buft.alignment().is_power_of_two());
    assert!(buft.max_size() as u64 <= facts.limits.max_storage_buffer_binding_size);
    assert!(buft.max_size() as u64 <= u64::from(u32::MAX));
    let too_big = buft.max_size() + 1;
    match buft.alloc_buffer(too_big) {
        Err(gantry_engine::Error::OutOfMemory { size, .. }) => assert_eq!(size, too_big),
        Err(e) => panic!("wrong error for an oversized buffer: {e}"),
        Ok(_) => panic!("a buffer larger than the largest storage binding was allocated"),
    }
    assert!(dev.memory().total > 0);
}

#[test]
fn wgpu_buffer_transfers_at_ragged_offsets() {
    let dev = device_or_skip!();
    let buft = dev.buffer_type();
    let buf = buft.alloc_buffer(103).unwrap();
    assert_eq!(buf.size(), 103);
    assert!(buf.host_ptr().is_none());
    let pattern: Vec<u8> = (0..103u32).map(|i| (i * 7 + 3) as u8).collect();
    buf.write(0, &pattern).unwrap();
    // Unaligned writes keep their neighbours.
    buf.write(5, &[0xAA, 0xBB, 0xCC]).unwrap();
    buf.write(101, &[0x11, 0x22]).unwrap();
    let mut want = pattern.clone();
    want[5..8].copy_from_slice(&[0xAA, 0xBB, 0xCC]);
    want[101..103].copy_from_slice(&[0x11, 0x22]);
    let mut got = vec![0u8; 103];
    buf.read(0, &mut got).unwrap();
    assert_eq!(got, want);
    // Unaligned reads.
    let mut part = vec![0u8; 9];
    buf.read(3, &mut part).unwrap();
    assert_eq!(part, want[3..12]);
    // Fills: zero on aligned ranges (cleared on the GPU) and any byte anywhere.
    buf.fill(8, 16, 0).unwrap();
    buf.fill(30, 7, 0x5A).unwrap();
    want[8..24].fill(0);
    want[30..37].fill(0x5A);
    buf.read(0, &mut got).unwrap();
    assert_eq!(got, want);
    // Out-of-range access is an error, not a clipped write.
    assert!(buf.write(100, &[0; 4]).is_err());
    assert!(buf.read(usize::MAX, &mut [0; 2]).is_err());
    // Copies between device buffers: on the GPU when aligned, refused otherwise.
    let other = buft.alloc_buffer(64).unwrap();
    assert!(other.copy_from(0, buf.as_ref(), 4, 32).unwrap());
    let mut copied = vec![0u8; 32];
    other.read(0, &mut copied).unwrap();
    assert_eq!(copied, want[4..36]);
    assert!(!other.copy_from(1, buf.as_ref(), 4, 8).unwrap(), "unaligned copies are staged by the caller");
    // A zero-size buffer is valid.
    assert_eq!(buft.alloc_buffer(0).unwrap().size(), 0);
}

#[test]
fn wgpu_large_read_back_in_chunks() {
    let dev = device_or_skip!();
    // Larger than one read-back chunk (32 MiB) and ragged at the end.
    let n = (33 << 20) + 6;
    if dev.buffer_type().max_size() < n {
        eprintln!("skipped: largest buffer {} is below {n}", dev.buffer_type().max_size());
        return;
    }
    let buf = dev.buffer_type().alloc_buffer(n).unwrap();
    let data: Vec<u8> = (0..n).map(|i| (i % 251) as u8).collect();
    buf.write(0, &data).unwrap();
    let mut back = vec![0u8; n - 3];
    buf.read(3, &mut back).unwrap();
    assert!(back == data[3..], "read-back differs");
}

#[test]
fn wgpu_copy_tensor_between_host_and_device() {
    let dev = device_or_skip!();
    let mut ctx = Context::new();
    let a = ctx.tensor(DType::F32, [10]).unwrap();
    let b = ctx.tensor(DType::F32, [10]).unwrap();
    let buft = dev.buffer_type();
    let buf = ctx.alloc_buffer(&buft, 2 * buft.alignment().max(64), BufferUsage::Any).unwrap();
    ctx.place(a, buf, 0).unwrap();
    ctx.place(b, buf, buft.alignment().max(64)).unwrap();
    let v = values(10, 1, -1.0, 1.0);
    ctx.set_f32(a, &v).unwrap();
    // Same buffer: wgpu cannot copy within one buffer, the context stages it.
    ctx.copy_tensor(a, b).unwrap();
    assert_eq!(ctx.read_f32(b).unwrap(), v);
}

#[test]
fn wgpu_graph_recompute_reuses_kernels_and_bindings() {
    device_or_skip!();
    // A device of its own: other tests compile kernels and make buffers concurrently.
    let platform = gantry_wgpu::WgpuPlatform::new();
    let dev = &platform.wgpu_devices()[0];
    let mut h = Harness::new(dev);
    let x = values(64 * 8, 5, -1.0, 1.0);
    let w = values(64 * 32, 6, -1.0, 1.0);
    let a = h.input(DType::F32, &[64, 8], &x);
    let wt = h.input(DType::F32, &[64, 32], &w);
    let n = h.ctx.rms_norm(a, 1e-5).unwrap();
    let m = h.ctx.mul_mat(wt, n).unwrap();
    let s = h.ctx.silu(m).unwrap();
    h.compute(&[s]);
    let first = h.read(s);
    let (kernels, groups) = (dev.compiled_kernels(), dev.cached_bind_groups());
    for _ in 0..3 {
        h.try_compute(&[s]).unwrap();
    }
    assert_eq!(h.read(s), first, "same inputs, same result");
    assert_eq!(dev.compiled_kernels(), kernels, "no kernel compiled twice");
    assert_eq!(dev.cached_bind_groups(), groups, "no new bind groups for the same buffers");
    // Asynchronous compute finishes at synchronize.
    let arena = gantry_engine::GraphArena::new();
    let graph = h.ctx.build_graph(&arena, &[s]).unwrap();
    h.backend.graph_compute_async(&h.ctx, graph).into_result().unwrap();
    h.backend.synchronize().unwrap();
    assert_close("async", &h.read(s), &first, 0.0, 0.0);
}

#[test]
fn wgpu_reads_only_its_own_buffers() {
    let dev = device_or_skip!();
    // A tensor in host memory is an error for this backend (the scheduler copies it in).
    struct HostBuft;
    impl BufferType for HostBuft {
        fn name(&self) -> &str {
            "host"
        }
        fn alloc_buffer(&self, size: usize) -> gantry_engine::Result<Box<dyn Buffer>> {
            Ok(Box::new(HostBuf(std::sync::Mutex::new(vec![0; size]))))
        }
        fn alignment(&self) -> usize {
            16
        }
        fn is_host(&self) -> bool {
            true
        }
        fn device(&self) -> Option<std::sync::Arc<dyn Device>> {
            None
        }
        fn as_any(&self) -> &dyn std::any::Any {
            self
        }
    }
    struct HostBuf(std::sync::Mutex<Vec<u8>>);
    impl Buffer for HostBuf {
        fn size(&self) -> usize {
            self.0.lock().unwrap().len()
        }
        fn host_ptr(&self) -> Option<*mut u8> {
            None
        }
        fn write(&self, offset: usize, data: &[u8]) -> gantry_engine::Result<()> {
            self.0.lock().unwrap()[offset..offset + data.len()].copy_from_slice(data);
            Ok(())
        }
        fn read(&self, offset: usize, out: &mut [u8]) -> gantry_engine::Result<()> {
            out.copy_from_slice(&self.0.lock().unwrap()[offset..offset + out.len()]);
            Ok(())
        }
        fn fill(&self, _: usize, _: usize, _: u8) -> gantry_engine::Result<()> {
            Ok(())
        }
        fn copy_from(&self, _: usize, _: &dyn Buffer, _: usize, _: usize) -> gantry_engine::Result<bool> {
            Ok(false)
        }
        fn as_any(&self) -> &dyn std::any::Any {
            self
        }
    }
    let mut ctx = Context::new();
    let a = ctx.tensor(DType::F32, [8]).unwrap();
    let y = ctx.neg(a).unwrap();
    let host: std::sync::Arc<dyn BufferType> = std::sync::Arc::new(HostBuft);
    assert!(!dev.supports_buft(host.as_ref()));
    let hb = ctx.alloc_buffer(&host, 64, BufferUsage::Any).unwrap();
    ctx.place(a, hb, 0).unwrap();
    let db = ctx.alloc_buffer(&dev.buffer_type(), 64, BufferUsage::Any).unwrap();
    ctx.place(y, db, 0).unwrap();
    let backend = dev.init_backend(None).unwrap();
    let arena = gantry_engine::GraphArena::new();
    let graph = ctx.build_graph(&arena, &[y]).unwrap();
    let err = backend.graph_compute(&ctx, graph).into_result().unwrap_err();
    assert!(err.to_string().contains("host"), "{err}");
}

#[test]
fn wgpu_memory_and_offload() {
    let dev = device_or_skip!();
    let mem = dev.memory();
    assert!(mem.total > 0 && mem.free <= mem.total);
    if dev.facts().api == "vulkan" {
        assert!(dev.facts().device_memory.is_some(), "Vulkan reports its memory heaps");
    }
    let mut ctx = Context::new();
    let w = ctx.tensor(DType::F32, [64, 64]).unwrap();
    let x = ctx.tensor(DType::F32, [64, 40]).unwrap();
    let y = ctx.mul_mat(w, x).unwrap();
    let software = dev.facts().kind == AdapterKind::Cpu;
    assert_eq!(dev.offload_op(&ctx, y), !software, "large batches offload to real GPUs only");
    let x1 = ctx.tensor(DType::F32, [64, 1]).unwrap();
    let y1 = ctx.mul_mat(w, x1).unwrap();
    assert!(!dev.offload_op(&ctx, y1), "one token is not worth the transfer");
}

#[test]
fn wgpu_events_mark_queue_points() {
    let dev = device_or_skip!();
    assert!(dev.caps().events);
    let mut h = Harness::new(dev);
    let x = values(4096, 9, -1.0, 1.0);
    let a = h.input(DType::F32, &[4096], &x);
    let y = h.ctx.exp(a).unwrap();
    h.allocate();
    let ev = dev.event_new().unwrap();
    dev.event_synchronize(ev).unwrap(); // never recorded: returns at once
    let arena = gantry_engine::GraphArena::new();
    let graph = h.ctx.build_graph(&arena, &[y]).unwrap();
    h.backend.graph_compute_async(&h.ctx, graph).into_result().unwrap();
    h.backend.event_record(ev).unwrap();
    h.backend.event_wait(ev).unwrap();
    dev.event_synchronize(ev).unwrap();
    let want: Vec<f32> = x.iter().map(|v| v.exp()).collect();
    assert_close("after the event", &h.read(y), &want, 1e-6, 1e-6);
    dev.event_free(ev).unwrap();
    assert!(dev.event_synchronize(ev).is_err(), "a freed event is stale");
    assert!(h.backend.event_record(ev).is_err());
}
