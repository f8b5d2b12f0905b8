//! Remote devices over loopback only (127.0.0.1): `gantry rpc-server`
//! processes serving their CPU, certificates made at test time (rcgen), and
//! this process as the client. A graph split over two servers and the local
//! CPU equals the CPU alone, also with pipeline copies; SmolLM2 split across
//! both servers meets llama.cpp's reference with its weights bound from the
//! servers' cache; clients without a certificate of the servers' authority
//! are refused; a server killed mid-compute gives an `Err` within the
//! timeout, and once restarted computes the graph again.

#![cfg(feature = "remote")]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use gantry::backends::cpu::CpuBackend;
use gantry::backends::remote::certs::{Pki, files, write_pki};
use gantry::backends::remote::testing::loopback;
use gantry::backends::remote::tls::TlsIdentity;
use gantry::backends::remote::{RemoteConfig, RemotePlatform};
use gantry::model::decoder::{DecoderModel, LogitsFor, Session, SessionParams};
use gantry::sched::{Scheduler, SchedulerParams};
use gantry::testing::smollm2::{N_VOCAB, check_logits, model_path, reference};
use gantry::testing::{fill, max_abs_diff};
use gantry::{Backend, BufferType, BufferUsage, Context, DType, Device, GraphArena, Platform, TensorId};

/// A `gantry rpc-server` child process serving its CPU on 127.0.0.1.
struct Server {
    child: Child,
    address: String,
    /// Kept open: the server's stdout stays a pipe someone reads.
    _stdout: BufReader<ChildStdout>,
}

impl Server {
    /// Starts a server on `port` (0: any) with the certificates in `dir`.
    fn start(dir: &Path, port: u16, weights: Option<&Path>) -> Self {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_gantry"));
        cmd.arg("rpc-server")
            .args(["--listen", &format!("127.0.0.1:{port}"), "--devices", "cpu", "--threads", "1"])
            .arg("--cert")
            .arg(dir.join(files::SERVER))
            .arg("--key")
            .arg(dir.join(files::SERVER_KEY))
            .arg("--client-ca")
            .arg(dir.join(files::AUTHORITY))
            .args(["--idle-timeout-ms", "3000"])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        if let Some(w) = weights {
            cmd.arg("--weights").arg(w);
        }
        let mut child = cmd.spawn().expect("the gantry binary runs");
        let mut stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
        let mut line = String::new();
        stdout.read_line(&mut line).expect("the server prints where it listens");
        let address = line
            .split_whitespace()
            .skip_while(|w| *w != "on")
            .nth(1)
            .unwrap_or_else(|| panic!("no address in the server's first line {line:?}"))
            .to_owned();
        Self { child, address, _stdout: stdout }
    }

    fn port(&self) -> u16 {
        self.address.rsplit(':').next().and_then(|p| p.parse().ok()).expect("a port")
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Certificates made now, written to a fresh directory for the servers
/// (removed when the guard drops).
fn certificates(name: &str) -> (Pki, tempfile::TempDir) {
    let pki = loopback::test_pki().unwrap();
    let dir = tempfile::Builder::new().prefix(&format!("gantry-remote-{name}-")).tempdir().unwrap();
    write_pki(&pki, dir.path()).unwrap();
    (pki, dir)
}

fn connect(pki: &Pki, servers: &[&Server], timeout: Duration) -> RemotePlatform {
    let addresses: Vec<String> = servers.iter().map(|s| s.address.clone()).collect();
    loopback::connect(pki, &addresses, timeout).unwrap()
}

fn backend(platform: &RemotePlatform, i: usize) -> Arc<dyn Backend> {
    platform.remote_devices()[i].init_backend(None).unwrap()
}

/// A small network whose three weights are in the given buffer types: the
/// product with `w0`, then `w1`, then `w2` (an RMS norm and a SiLU between,
/// the input added at the end). Returns the input and the output.
fn network(ctx: &mut Context, bufts: [&Arc<dyn BufferType>; 3]) -> (TensorId, TensorId) {
    let mut w = Vec::new();
    for (i, buft) in bufts.iter().enumerate() {
        let t = ctx.tensor(DType::F32, [64, 64]).unwrap();
        ctx.alloc_tensors(&[t], buft, BufferUsage::Weights).unwrap();
        fill(ctx, t, 10 + i as u64, 0.2).unwrap();
        w.push(t);
    }
    let x = ctx.tensor(DType::F32, [64, 8]).unwrap();
    ctx.set_input(x).unwrap();
    let h = ctx.mul_mat(w[0], x).unwrap();
    let h = ctx.silu(h).unwrap();
    let h = ctx.mul_mat(w[1], h).unwrap();
    let h = ctx.rms_norm(h, 1e-5).unwrap();
    let h = ctx.mul_mat(w[2], h).unwrap();
    let y = ctx.add(h, x).unwrap();
    ctx.set_output(y).unwrap();
    (x, y)
}

/// Runs the network on `backends` (weights in `bufts`) for each input seed.
fn outputs(
    backends: &[Arc<dyn Backend>],
    bufts: [&Arc<dyn BufferType>; 3],
    n_copies: usize,
    seeds: &[u64],
) -> (Vec<Vec<f32>>, Vec<String>) {
    let mut ctx = Context::new();
    let (x, y) = network(&mut ctx, bufts);
    let arena = GraphArena::new();
    let graph = ctx.build_graph(&arena, &[y]).unwrap();
    let mut sched = Scheduler::new(backends, SchedulerParams { n_copies, ..SchedulerParams::default() }).unwrap();
    let mut out = Vec::new();
    for &seed in seeds {
        // With pipeline copies the input moves to the next copy's memory every run: allocate, then write it.
        sched.alloc_graph(&mut ctx, graph).unwrap();
        fill(&mut ctx, x, seed, 1.0).unwrap();
        sched.graph_compute_async(&mut ctx, graph).unwrap();
        sched.synchronize().unwrap();
        out.push(ctx.read_f32(y).unwrap());
    }
    let used: Vec<String> =
        sched.splits().iter().map(|s| sched.backends()[s.backend.get()].name().to_owned()).collect();
    sched.release(&mut ctx).unwrap();
    (out, used)
}

#[test]
fn a_graph_split_over_two_servers_and_the_cpu_equals_the_cpu_with_and_without_pipeline_copies() {
    let (pki, dir) = certificates("split");
    let (a, b) = (Server::start(dir.path(), 0, None), Server::start(dir.path(), 0, None));
    let platform = connect(&pki, &[&a, &b], Duration::from_secs(20));
    let cpu: Arc<dyn Backend> = Arc::new(CpuBackend::with_threads(1).unwrap());
    let (r0, r1) = (backend(&platform, 0), backend(&platform, 1));
    let (b0, b1, bc) = (r0.device().buffer_type(), r1.device().buffer_type(), cpu.device().buffer_type());
    let seeds = [1, 2, 3];
    let (want, _) = outputs(std::slice::from_ref(&cpu), [&bc, &bc, &bc], 1, &seeds);
    for n_copies in [1, 2] {
        let (got, used) = outputs(&[r0.clone(), r1.clone(), cpu.clone()], [&b0, &b1, &bc], n_copies, &seeds);
        for name in ["remote0", "remote1", "CPU"] {
            assert!(used.iter().any(|u| u == name), "no split on {name}: {used:?}");
        }
        for (g, w) in got.iter().zip(&want) {
            let diff = max_abs_diff(g, w);
            assert!(diff < 1e-4, "n_copies {n_copies}: outputs differ from the CPU's by {diff}");
        }
    }
    let wire = platform.wire_bytes();
    assert!(wire.sent > 0 && wire.received > 0);
}

#[test]
fn smollm2_split_across_two_servers_meets_the_reference() {
    let Some(path) = model_path() else { return };
    let r = reference().unwrap();
    let (pki, dir) = certificates("smollm2");
    // The servers hold the same file: its tensors are bound there, not sent.
    let (a, b) = (Server::start(dir.path(), 0, Some(&path)), Server::start(dir.path(), 0, Some(&path)));
    let platform = connect(&pki, &[&a, &b], Duration::from_secs(60));
    let cpu: Arc<dyn Backend> = Arc::new(CpuBackend::with_threads(1).unwrap());
    let backends = [backend(&platform, 0), backend(&platform, 1), cpu];
    let mut ctx = Context::new();
    let before = platform.wire_bytes();
    let started = Instant::now();
    let devices: Vec<&dyn Device> = backends[..2].iter().map(|b| b.device()).collect();
    let model = DecoderModel::load_across(&path, &mut ctx, &devices, None).unwrap();
    let load = started.elapsed();
    let after = platform.wire_bytes();
    let load_wire = (after.sent - before.sent) + (after.received - before.received);
    eprintln!(
        "loaded {} bytes of weights in {:.0} ms, {load_wire} bytes on the wire",
        model.loaded.bytes(),
        load.as_secs_f64() * 1e3
    );
    assert!(
        load_wire < (model.loaded.bytes() / 20) as u64,
        "{load_wire} bytes sent: the weights were not bound from the cache"
    );
    let ids = model.tokenizer.encode(&r.prompt, false, true).unwrap();
    assert_eq!(ids, r.ids, "token ids");
    let params = SessionParams { n_ctx: 256, kv_dtype: DType::F32, ..SessionParams::default() };
    let mut session = Session::new(&mut ctx, model.hp, model.weights.clone(), &backends, params).unwrap();
    let logits = session.eval(&mut ctx, &ids, LogitsFor::All).unwrap().to_vec();
    let used: Vec<&str> = session.scheduler().splits().iter().map(|s| backends[s.backend.get()].name()).collect();
    assert!(used.contains(&"remote0") && used.contains(&"remote1"), "splits on {used:?}");
    match check_logits(&logits, &r.logits, N_VOCAB) {
        Ok(s) => eprintln!("SmolLM2 over two loopback servers: {s}"),
        Err(s) => panic!("logits over two servers outside the tolerances: {s}"),
    }
    let argmax = |v: &[f32]| v.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).map_or(0, |m| m.0 as u32);
    let mut next = argmax(&logits[(ids.len() - 1) * N_VOCAB..]);
    let mut generated = vec![next];
    for _ in 0..2 {
        next = argmax(session.eval(&mut ctx, &[next], LogitsFor::Last).unwrap());
        generated.push(next);
    }
    let text = model.tokenizer.decode_string(&generated, false, false).unwrap();
    assert!(text.starts_with(" Paris"), "greedy continuation {text:?} (llama.cpp: {:?})", r.continuation);
}

#[test]
fn clients_without_a_certificate_of_the_authority_are_refused() {
    let (pki, dir) = certificates("auth");
    let server = Server::start(dir.path(), 0, None);
    let servers = vec![server.address.clone()];
    let good = loopback::client_identity(&pki).unwrap();
    let other = loopback::test_pki().unwrap();
    let identities = [
        // No certificate at all.
        TlsIdentity { authority: good.authority.clone(), chain: Vec::new(), key: None },
        // A certificate of another authority.
        TlsIdentity { authority: good.authority.clone(), ..loopback::client_identity(&other).unwrap() },
    ];
    for identity in identities {
        let mut config = RemoteConfig::new(servers.clone(), Arc::new(identity));
        config.call_timeout = Duration::from_secs(10);
        let platform = RemotePlatform::connect(&config).unwrap();
        assert!(platform.devices().is_empty(), "an unauthenticated client got devices");
        assert_eq!(platform.skipped().len(), 1, "{:?}", platform.skipped());
    }
    // A client that does not trust the server's authority refuses the server.
    let distrust = loopback::client_identity(&other).unwrap();
    let platform = RemotePlatform::connect(&RemoteConfig::new(servers.clone(), Arc::new(distrust))).unwrap();
    assert!(platform.devices().is_empty());
    // The server keeps serving clients that are who they should be.
    let platform = connect(&pki, &[&server], Duration::from_secs(10));
    let buffer = platform.remote_devices()[0].buffer_type().alloc_buffer(64).unwrap();
    buffer.write(8, &[1, 2, 3]).unwrap();
    let mut back = [0u8; 3];
    buffer.read(8, &mut back).unwrap();
    assert_eq!(back, [1, 2, 3]);
}

/// A chain of products by a matrix that halves: `x · (a/2)^k` is exactly
/// `x / 2^k` (every product sums one non-zero term), however long it takes.
fn halving_chain(ctx: &mut Context, n: usize, k: usize, buft: &Arc<dyn BufferType>) -> (TensorId, TensorId) {
    let a = ctx.tensor(DType::F32, [n, n]).unwrap();
    let x = ctx.tensor(DType::F32, [n, n]).unwrap();
    let mut y = x;
    for _ in 0..k {
        y = ctx.mul_mat(a, y).unwrap();
    }
    ctx.alloc_tensors(&[a, x], buft, BufferUsage::Weights).unwrap();
    let mut half = vec![0.0f32; n * n];
    for i in 0..n {
        half[i * n + i] = 0.5;
    }
    ctx.set_f32(a, &half).unwrap();
    let values: Vec<f32> = (0..n * n).map(|i| (i % 7) as f32 - 3.0).collect();
    ctx.set_f32(x, &values).unwrap();
    (x, y)
}

#[test]
fn a_server_killed_mid_compute_gives_an_err_within_the_timeout_and_a_restarted_one_computes_again() {
    let (pki, dir) = certificates("kill");
    let mut server = Server::start(dir.path(), 0, None);
    let port = server.port();
    let timeout = Duration::from_secs(3);
    let platform = connect(&pki, &[&server], timeout);
    let remote = backend(&platform, 0);
    let buft = remote.device().buffer_type();
    let (n, k) = (1024, 24);
    let mut ctx = Context::new();
    let (x, y) = halving_chain(&mut ctx, n, k, &buft);
    let arena = GraphArena::new();
    let graph = ctx.build_graph(&arena, &[y]).unwrap();
    let nodes = ctx.alloc_tensors(graph.nodes(), &buft, BufferUsage::Compute).unwrap();
    // A CPU tensor of the same context, to show the context survives.
    let local = ctx.tensor(DType::F32, [4]).unwrap();
    ctx.alloc_tensors(&[local], &gantry::backends::cpu::buffer_type(), BufferUsage::Any).unwrap();
    ctx.set_f32(local, &[1.0, 2.0, 3.0, 4.0]).unwrap();
    // How long the chain takes on this machine (a fixed wait was outrun by
    // a fast one: 24 products of 1024³ took under 400 ms on a 2-core Xeon),
    // so that the kill below lands a quarter of the way into the compute.
    let t0 = Instant::now();
    remote.graph_compute(&ctx, graph).into_result().unwrap();
    let run = t0.elapsed();

    let (result, elapsed) = std::thread::scope(|s| {
        let computing = s.spawn(|| {
            let started = Instant::now();
            (remote.graph_compute(&ctx, graph).into_result(), started)
        });
        std::thread::sleep(run / 4);
        let killed = Instant::now();
        server.kill();
        let (result, started) = computing.join().unwrap();
        assert!(killed > started, "the compute started before the kill");
        (result, killed.elapsed())
    });
    let err = result.expect_err("a compute on a killed server must fail");
    eprintln!("compute on the killed server: {err} ({:.1} s after the kill)", elapsed.as_secs_f64());
    assert!(elapsed < timeout + Duration::from_secs(3), "the Err took {elapsed:?}");
    // Buffers of the lost connection say so; the rest of the context is intact.
    assert!(ctx.read_f32(y).is_err());
    assert_eq!(ctx.read_f32(local).unwrap(), vec![1.0, 2.0, 3.0, 4.0]);

    let _restarted = Server::start(dir.path(), port, None);
    // The same device dials the new server; the graph's memory is made again there.
    for b in nodes.buffers() {
        ctx.free_buffer(*b).unwrap();
    }
    let (xb, _) = ctx.tensor_buffer(x).map(|(e, p)| (p.buffer, e.buffer.size())).unwrap();
    ctx.free_buffer(xb).unwrap();
    let a = ctx.desc(graph.nodes()[0]).unwrap().srcs[0].unwrap();
    ctx.alloc_tensors(&[a, x], &buft, BufferUsage::Weights).unwrap();
    ctx.alloc_tensors(graph.nodes(), &buft, BufferUsage::Compute).unwrap();
    let mut half = vec![0.0f32; n * n];
    for i in 0..n {
        half[i * n + i] = 0.5;
    }
    ctx.set_f32(a, &half).unwrap();
    let values: Vec<f32> = (0..n * n).map(|i| (i % 7) as f32 - 3.0).collect();
    ctx.set_f32(x, &values).unwrap();
    remote.graph_compute(&ctx, graph).into_result().unwrap();
    let scale = 0.5f32.powi(k as i32);
    let want: Vec<f32> = values.iter().map(|v| v * scale).collect();
    assert_eq!(ctx.read_f32(y).unwrap(), want);
}
