//! The engine's read that does not block (`TensorRead`) of a wgpu tensor,
//! staged by the backend: begun, submitted behind the compute that writes
//! it, polled, taken — gives the bytes a blocking read gives, at aligned
//! and ragged offsets, reuses its staging buffer from read to read, and
//! refuses what it cannot do (a read still in flight, a take before the
//! read is done or longer than it, a poll before the submit) with an error.
//! A CPU tensor in the same slot takes the default path (read from host
//! memory once the compute has finished).

use gantry_engine::{BufferUsage, Context, DType, Device, StagedRead, TensorRead};
use gantry_wgpu::WgpuPlatform;
use gantry_wgpu::gpu::GpuReadBack;

use super::support::{Harness, values};

/// Polls `read` until it is done (a frame loop would do its own work between polls).
fn poll_until_done(read: &mut TensorRead) -> usize {
    let mut polls = 1;
    while !read.poll().unwrap() {
        polls += 1;
        std::thread::yield_now();
    }
    polls
}

/// The wgpu staging kept in `read`, and its address (the same object from read to read).
fn staging(read: &TensorRead) -> (&GpuReadBack, *const ()) {
    let staged: &dyn StagedRead = read.staged().expect("a staged read keeps its staging");
    let any: &dyn std::any::Any = staged;
    (any.downcast_ref::<GpuReadBack>().expect("a wgpu buffer stages with GpuReadBack"), std::ptr::from_ref(any).cast())
}

#[test]
fn a_staged_read_gives_the_bytes_a_blocking_read_gives() {
    let dev = device_or_skip!();
    let mut h = Harness::new(dev);
    let n = 1000;
    let a = h.input(DType::F32, &[n], &values(n, 1, -2.0, 2.0));
    let b = h.input(DType::F32, &[n], &values(n, 2, -2.0, 2.0));
    let y = h.ctx.mul(a, b).unwrap();
    let y = h.ctx.scale(y, 0.5, 0.25).unwrap();
    h.compute(&[y]);
    let want = h.read(y);

    let mut read = TensorRead::new();
    assert!(read.staged().is_none(), "no staging before the first read");
    assert!(read.begin(&h.ctx, y).unwrap(), "a wgpu tensor's read is staged");
    assert!(read.is_staged() && read.is_prepared());
    assert_eq!((read.tensor(), read.len()), (Some(y), n * 4));
    read.submit().unwrap();
    assert!(!read.is_prepared());
    poll_until_done(&mut read);
    let mut got = vec![0f32; n];
    read.take_f32(&h.ctx, &mut got).unwrap();
    assert_eq!(got, want);
    assert_eq!(read.tensor(), None, "a read is taken once");

    // Again, into the kept staging buffer, at a ragged start and length (an F16 view
    // starting 2 bytes in, 7 values long), taking only its first 5 values.
    let (kept, first) = staging(&read);
    assert_eq!(kept.staging_buffers_made(), 1);
    let halves = h.ctx.tensor(DType::F16, [16]).unwrap();
    let buft = dev.buffer_type();
    let buf = h.ctx.alloc_buffer(&buft, buft.alignment(), BufferUsage::Compute).unwrap();
    h.ctx.place(halves, buf, 0).unwrap();
    let bytes: Vec<u8> = (0..32u8).map(|i| i.wrapping_mul(37).wrapping_add(5)).collect();
    h.ctx.write_tensor_bytes(halves, 0, &bytes).unwrap();
    let ragged = h.ctx.view_1d(halves, 7, 2).unwrap();
    // Begun now, submitted later (polling before the submit is refused; a
    // read not submitted yet is replaced by the next begin).
    assert!(read.begin(&h.ctx, y).unwrap());
    assert!(read.begin(&h.ctx, ragged).unwrap());
    let err = read.poll().unwrap_err().to_string();
    assert!(err.contains("prepared but not submitted"), "{err}");
    read.submit().unwrap();
    read.submit().unwrap(); // nothing more once submitted
    read.wait().unwrap();
    let mut out = vec![0u8; 10];
    read.take(&h.ctx, &mut out).unwrap();
    assert_eq!(out, bytes[2..12]);
    let (kept, again) = staging(&read);
    assert_eq!(again, first, "the same staging object is reused");
    assert_eq!(kept.staging_buffers_made(), 1, "and its staging buffer: steady state makes none");
}

#[test]
fn a_staged_read_refuses_what_it_cannot_do() {
    let Some(dev) = WgpuPlatform::new().wgpu_devices().first().cloned() else {
        eprintln!("skipped: no wgpu adapter on this machine");
        return;
    };
    // A device of this test's own: nothing else polls it, so a read stays in flight
    // until this test polls.
    let mut ctx = Context::new();
    let t = ctx.tensor(DType::F32, [64]).unwrap();
    ctx.alloc_tensors(&[t], &dev.buffer_type(), BufferUsage::Compute).unwrap();
    ctx.set_f32(t, &values(64, 3, 0.0, 1.0)).unwrap();
    let on_cpu = ctx.tensor(DType::F32, [4]).unwrap();
    ctx.alloc_tensors(&[on_cpu], &gantry_cpu::CpuDevice::new().buffer_type(), BufferUsage::Compute).unwrap();
    ctx.set_f32(on_cpu, &[1.0, 2.0, 3.0, 4.0]).unwrap();
    let strided = ctx.view_2d(t, 2, 4, 64, 0).unwrap();

    let mut read = TensorRead::new();
    let err = read.poll().unwrap_err().to_string();
    assert!(err.contains("no async read was begun"), "{err}");
    let err = read.begin(&ctx, strided).unwrap_err().to_string();
    assert!(err.contains("not contiguous"), "{err}");

    read.begin(&ctx, t).unwrap();
    read.submit().unwrap();
    let err = read.take(&ctx, &mut [0u8; 256]).unwrap_err().to_string();
    assert!(err.contains("has not finished"), "{err}");
    let err = read.begin(&ctx, t).unwrap_err().to_string();
    assert!(err.contains("async read of") && err.contains("in flight"), "{err}");
    let err = read.begin(&ctx, on_cpu).unwrap_err().to_string();
    assert!(err.contains("in flight"), "not even for a tensor read from host memory: {err}");
    read.wait().unwrap();
    let err = read.take(&ctx, &mut [0u8; 260]).unwrap_err().to_string();
    assert!(err.contains("holds 256 bytes"), "{err}");
    let mut got = vec![0f32; 64];
    read.take_f32(&ctx, &mut got).unwrap();
    assert_eq!(got, ctx.read_f32(t).unwrap());
    let err = read.take_f32(&ctx, &mut got).unwrap_err().to_string();
    assert!(err.contains("no async read was begun"), "a read is taken once: {err}");
    // A read in flight can be dropped, and the next one begins.
    read.begin(&ctx, t).unwrap();
    read.submit().unwrap();
    read.discard().unwrap();
    read.begin(&ctx, t).unwrap();
    read.submit().unwrap();
    read.wait().unwrap();
    read.take_f32(&ctx, &mut got).unwrap();
    assert_eq!(got, ctx.read_f32(t).unwrap());

    // The same slot reads a CPU tensor by the default path, keeping the wgpu staging.
    let (_, before) = staging(&read);
    assert!(!read.begin(&ctx, on_cpu).unwrap(), "host memory is not staged");
    read.submit().unwrap();
    assert!(read.poll().unwrap());
    let mut four = [0f32; 4];
    read.take_f32(&ctx, &mut four).unwrap();
    assert_eq!(four, [1.0, 2.0, 3.0, 4.0]);
    let (kept, after) = staging(&read);
    assert_eq!((after, kept.staging_buffers_made()), (before, 1));
}
