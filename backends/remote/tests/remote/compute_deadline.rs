//! A compute that runs past the server's deadline (`--compute-timeout`) is
//! stopped through the backend's abort callback and answered with an error
//! — a long graph between its nodes, a single long node between the parts
//! of its kernel; the device's turn is given back, so the same client and
//! the others go on being served.

use std::time::{Duration, Instant};

use gantry_engine::{Backend, BufferId, BufferUsage, Context, DType, Device, Graph, TensorId};
use gantry_remote::certs::Pki;
use gantry_remote::client::RemotePlatform;
use gantry_remote::server::{RunningServer, WeightCache};
use gantry_remote::testing::loopback::{self, ServerOptions};
use gantry_remote::wire::Limits;

/// Side of the square matrices of the long chain: one product is 2^25
/// flops, a millisecond or more on one thread, so the chain's 20000 take
/// far longer than the deadline.
const SIDE: usize = 256;
const STEPS: usize = 20_000;

/// `x <- a * x`, `STEPS` times, ping-ponging between two places of one
/// buffer: minutes of work in a graph of a few MiB.
fn long_chain(ctx: &mut Context, buffer: BufferId) -> Vec<TensorId> {
    let bytes = SIDE * SIDE * 4;
    let a = ctx.tensor(DType::F32, [SIDE, SIDE]).unwrap();
    let x = ctx.tensor(DType::F32, [SIDE, SIDE]).unwrap();
    ctx.place(a, buffer, 0).unwrap();
    ctx.place(x, buffer, bytes).unwrap();
    ctx.set_f32(a, &vec![0.5 / SIDE as f32; SIDE * SIDE]).unwrap();
    ctx.set_f32(x, &vec![1.0; SIDE * SIDE]).unwrap();
    let mut nodes = Vec::with_capacity(STEPS);
    let mut last = x;
    for k in 0..STEPS {
        let y = ctx.mul_mat(a, last).unwrap();
        ctx.place(y, buffer, if k % 2 == 0 { 2 * bytes } else { bytes }).unwrap();
        nodes.push(y);
        last = y;
    }
    nodes
}

/// Negates four values on `backend` and returns them: a compute that must
/// still be answered.
fn small_compute(device: &dyn Device, backend: &dyn Backend) -> Vec<f32> {
    let mut ctx = Context::new();
    let buffer = ctx.alloc_buffer(&device.buffer_type(), 256, BufferUsage::Any).unwrap();
    let x = ctx.tensor(DType::F32, [4]).unwrap();
    ctx.place(x, buffer, 0).unwrap();
    ctx.set_f32(x, &[1.0, -2.0, 3.0, -4.0]).unwrap();
    let y = ctx.neg(x).unwrap();
    ctx.place(y, buffer, 128).unwrap();
    backend.graph_compute(&ctx, Graph::from_parts(&[y], &[], &[])).into_result().unwrap();
    ctx.read_f32(y).unwrap()
}

/// A CPU server with a compute deadline of `deadline`, its address and a
/// client connected to it.
fn server_with_deadline(deadline: Duration) -> (Pki, RunningServer, [String; 1], RemotePlatform) {
    let pki = loopback::test_pki().unwrap();
    let limits = Limits { compute_timeout: deadline, ..Limits::default() };
    let server =
        loopback::cpu_server_with(&pki, WeightCache::new(), ServerOptions { limits, ..Default::default() }).unwrap();
    let address = [server.local_addr().to_string()];
    let platform = loopback::connect(&pki, &address, Duration::from_secs(10)).unwrap();
    (pki, server, address, platform)
}

#[test]
fn a_compute_past_the_deadline_is_stopped_and_the_server_goes_on() {
    let (pki, _server, address, platform) = server_with_deadline(Duration::from_millis(500));
    let device = &platform.remote_devices()[0];
    let backend = device.init_backend(None).unwrap();

    let mut ctx = Context::new();
    let buffer = ctx.alloc_buffer(&device.buffer_type(), 3 * SIDE * SIDE * 4, BufferUsage::Any).unwrap();
    let nodes = long_chain(&mut ctx, buffer);

    // Another client asks for a small compute while the long one runs: it
    // waits for the device's turn, which the deadline gives back.
    let other = std::thread::spawn({
        let (pki, address) = (pki.clone(), address.clone());
        move || {
            let platform = loopback::connect(&pki, &address, Duration::from_secs(10)).unwrap();
            let device = &platform.remote_devices()[0];
            let backend = device.init_backend(None).unwrap();
            std::thread::sleep(Duration::from_millis(200));
            let started = Instant::now();
            let y = small_compute(device, backend.as_ref());
            (y, started.elapsed())
        }
    });

    let started = Instant::now();
    let err = backend.graph_compute(&ctx, Graph::from_parts(&nodes, &[], &[])).into_result().unwrap_err();
    let took = started.elapsed();
    let message = err.to_string();
    assert!(message.contains("deadline of 0.500 s") && message.contains("--compute-timeout"), "{message}");
    // Sending and rebuilding 20000 nodes takes a moment; computing them would take minutes.
    assert!(took < Duration::from_secs(10), "stopped after {took:?}");
    eprintln!("the long chain was stopped after {took:?}: {message}");

    // The same client, on the same connection, is served again.
    assert_eq!(small_compute(device, backend.as_ref()), vec![-1.0, 2.0, -3.0, 4.0]);
    let (y, waited) = other.join().unwrap();
    assert_eq!(y, vec![-1.0, 2.0, -3.0, 4.0]);
    assert!(waited < Duration::from_secs(20), "the other client waited {waited:?}");

    // A client that connects now is served too.
    let late = loopback::connect(&pki, &address, Duration::from_secs(10)).unwrap();
    let late_device = &late.remote_devices()[0];
    let late_backend = late_device.init_backend(None).unwrap();
    assert_eq!(small_compute(late_device, late_backend.as_ref()), vec![-1.0, 2.0, -3.0, 4.0]);
}

/// One node of minutes: attention of 16384 queries over 16384 keys in four
/// heads (2^37 multiply-adds) over 48 MiB of tensors, filled on the server.
/// Polled only between nodes, the server would compute it to the end and
/// answer success; its kernel polls the deadline between its parts.
#[test]
fn a_single_long_node_is_stopped_at_the_deadline() {
    const TOKENS: usize = 16384;
    let (_pki, _server, _address, platform) = server_with_deadline(Duration::from_millis(100));
    let device = &platform.remote_devices()[0];
    let backend = device.init_backend(None).unwrap();

    let mut ctx = Context::new();
    let q = ctx.tensor(DType::F32, [64, TOKENS, 4]).unwrap();
    let k = ctx.tensor(DType::F16, [64, TOKENS, 4]).unwrap();
    let v = ctx.tensor(DType::F16, [64, TOKENS, 4]).unwrap();
    let out = ctx.flash_attn_ext(q, k, v, None, 0.125, 0.0, 0.0).unwrap();
    let tensors = [q, k, v, out];
    let bytes: usize = tensors.iter().map(|&t| ctx.get(t).unwrap().nbytes()).sum();
    let buffer = ctx.alloc_buffer(&device.buffer_type(), bytes + 4 * 256, BufferUsage::Any).unwrap();
    let mut at = 0;
    for &t in &tensors {
        ctx.place(t, buffer, at).unwrap();
        let n = ctx.get(t).unwrap().nbytes();
        // 0x30: small finite values in both f32 and f16.
        ctx.fill_tensor_bytes(t, 0, n, 0x30).unwrap();
        at += n.next_multiple_of(256);
    }
    let started = Instant::now();
    let err = backend.graph_compute(&ctx, Graph::from_parts(&[out], &[], &[])).into_result().unwrap_err();
    let message = err.to_string();
    assert!(message.contains("deadline of 0.100 s") && message.contains("--compute-timeout"), "{message}");
    eprintln!("the long node was stopped after {:?}: {message}", started.elapsed());
    assert_eq!(small_compute(device, backend.as_ref()), vec![-1.0, 2.0, -3.0, 4.0]);
}
