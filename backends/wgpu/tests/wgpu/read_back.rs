//! `TensorReadBack`: a tensor read into host memory without blocking —
//! queued behind the compute that writes it, polled, taken — gives the
//! bytes a blocking read gives, at aligned and ragged offsets, and refuses
//! what it cannot read (a CPU tensor, a read still in flight, a take
//! before the read is done or into the wrong length) with an error.

use gantry_engine::{BufferUsage, Context, DType, Device};
use gantry_wgpu::{TensorReadBack, WgpuPlatform};

use super::support::{Harness, values};

/// Polls `read` until it is done (a frame loop would do its own work between polls).
fn poll_until_done(read: &mut TensorReadBack) -> usize {
    let mut polls = 1;
    while !read.poll().unwrap() {
        polls += 1;
        std::thread::yield_now();
    }
    polls
}

#[test]
fn a_read_back_gives_the_bytes_a_blocking_read_gives() {
    let dev = device_or_skip!();
    let mut h = Harness::new(dev);
    let n = 1000;
    let a = h.input(DType::F32, &[n], &values(n, 1, -2.0, 2.0));
    let b = h.input(DType::F32, &[n], &values(n, 2, -2.0, 2.0));
    let y = h.ctx.mul(a, b).unwrap();
    let y = h.ctx.scale(y, 0.5, 0.25).unwrap();
    h.compute(&[y]);
    let want = h.read(y);

    let mut read = TensorReadBack::new();
    read.start(&h.ctx, y).unwrap();
    assert_eq!((read.tensor(), read.len()), (Some(y), n * 4));
    poll_until_done(&mut read);
    let mut got = vec![0f32; n];
    read.take_f32(&mut got).unwrap();
    assert_eq!(got, want);

    // Again, into the kept staging buffer, at a ragged start and length (an F16 view
    // starting 2 bytes in, 7 values long).
    let halves = h.ctx.tensor(DType::F16, [16]).unwrap();
    let buft = dev.buffer_type();
    let buf = h.ctx.alloc_buffer(&buft, buft.alignment(), BufferUsage::Compute).unwrap();
    h.ctx.place(halves, buf, 0).unwrap();
    let bytes: Vec<u8> = (0..32u8).map(|i| i.wrapping_mul(37).wrapping_add(5)).collect();
    h.ctx.write_tensor_bytes(halves, 0, &bytes).unwrap();
    let ragged = h.ctx.view_1d(halves, 7, 2).unwrap();
    // Prepared now, submitted later (without the context).
    read.prepare(&h.ctx, ragged).unwrap();
    assert!(read.is_prepared());
    let err = read.poll().unwrap_err().to_string();
    assert!(err.contains("prepared but not submitted"), "{err}");
    read.submit().unwrap();
    assert!(!read.is_prepared());
    read.wait().unwrap();
    let mut out = vec![0u8; 14];
    read.take(&mut out).unwrap();
    assert_eq!(out, bytes[2..16]);
}

#[test]
fn a_read_back_refuses_what_it_cannot_read() {
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

    let mut read = TensorReadBack::new();
    let err = read.poll().unwrap_err().to_string();
    assert!(err.contains("no async read-back was started"), "{err}");
    let err = read.start(&ctx, on_cpu).unwrap_err().to_string();
    assert!(err.contains("async read-back of") && err.contains("not a wgpu device's"), "{err}");

    read.start(&ctx, t).unwrap();
    let err = read.take(&mut [0u8; 256]).unwrap_err().to_string();
    assert!(err.contains("has not finished"), "{err}");
    let err = read.start(&ctx, t).unwrap_err().to_string();
    assert!(err.contains("in flight"), "{err}");
    read.wait().unwrap();
    let err = read.take(&mut [0u8; 8]).unwrap_err().to_string();
    assert!(err.contains("holds 256 bytes, not 8"), "{err}");
    let mut got = vec![0f32; 64];
    read.take_f32(&mut got).unwrap();
    assert_eq!(got, ctx.read_f32(t).unwrap());
    let err = read.take_f32(&mut got).unwrap_err().to_string();
    assert!(err.contains("has not finished"), "a read is taken once: {err}");
    // A read in flight can be dropped, and the next one starts.
    read.start(&ctx, t).unwrap();
    read.discard().unwrap();
    read.start(&ctx, t).unwrap();
    read.wait().unwrap();
    read.take_f32(&mut got).unwrap();
    assert_eq!(got, ctx.read_f32(t).unwrap());
}
