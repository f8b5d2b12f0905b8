//! The decode worker (`DecodeWorker`) and the session's abort callback: a
//! small random llama computed off the caller's thread gives the logits the
//! session gives on the caller's; its misuse is an `Err`, never a hang; an
//! abort stops a batch on the CPU (between nodes) and on wgpu (between
//! splits), leaving the cache as it was; a host-driven worker starts no thread.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

#[cfg(feature = "wgpu")]
use gantry::Device;
use gantry::backends::cpu::{CpuBackend, CpuDevice};
use gantry::model::decoder::{
    Batch, DecodeWorker, DecoderHparams, DecoderWeights, LayerCounts, Session, SessionParams, layer_devices,
};
use gantry::testing::max_abs_diff;
use gantry::{Backend, BufferUsage, Context, DType};

const HP: DecoderHparams = gantry::testing::TINY_LLAMA;

const PROMPT: [u32; 5] = [1, 17, 250, 3, 99];
const STEPS: [u32; 3] = [42, 7, 299];

/// Held by each test: the thread counts of one are not disturbed by another's threads.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn cpu() -> Arc<dyn Backend> {
    Arc::new(CpuBackend::with_threads(2).unwrap())
}

/// A seeded random model over `backends`, its layers spread evenly over
/// their memories (on two backends, each computes one layer: two splits at least).
fn model(backends: &[Arc<dyn Backend>]) -> (Context, Session) {
    model_over(backends, backends.len())
}

/// The same with the layers spread over the first `spread` backends only.
fn model_over(backends: &[Arc<dyn Backend>], spread: usize) -> (Context, Session) {
    let mut ctx = Context::new();
    let w = DecoderWeights::create(&mut ctx, &HP, DType::Q8_0, DType::F32).unwrap();
    let placed = layer_devices(&w, &LayerCounts::even(HP.n_layer, spread));
    for (d, backend) in backends.iter().enumerate().take(spread) {
        let mine: Vec<_> = placed.iter().filter(|p| p.1 == d).map(|p| p.0).collect();
        ctx.alloc_tensors(&mine, &backend.device().buffer_type(), BufferUsage::Weights).unwrap();
    }
    w.fill_random(&mut ctx, 11).unwrap();
    let params = SessionParams { n_ctx: 64, ..SessionParams::default() };
    let session = Session::new(&mut ctx, HP, w, backends, params).unwrap();
    (ctx, session)
}

fn prompt() -> Batch {
    let mut b = Batch::new();
    b.push_prompt(&PROMPT, 0);
    b
}

fn step(token: u32) -> Batch {
    let mut b = Batch::new();
    b.push(token, 0, true);
    b
}

/// The prompt's and each step's logits, through the session on this thread.
fn direct(backends: &[Arc<dyn Backend>]) -> Vec<Vec<f32>> {
    direct_over(backends, backends.len())
}

/// The same with the layers over the first `spread` backends.
fn direct_over(backends: &[Arc<dyn Backend>], spread: usize) -> Vec<Vec<f32>> {
    let (mut ctx, mut s) = model_over(backends, spread);
    let mut all = vec![s.decode(&mut ctx, &prompt()).unwrap().to_vec()];
    for t in STEPS {
        all.push(s.decode(&mut ctx, &step(t)).unwrap().to_vec());
    }
    all
}

/// The same through `worker`, polling until each batch is done.
fn through(worker: &mut DecodeWorker) -> Vec<Vec<f32>> {
    let mut all = Vec::new();
    for batch in std::iter::once(prompt()).chain(STEPS.map(step)) {
        worker.submit(&batch).unwrap();
        let logits = loop {
            if let Some(logits) = worker.poll() {
                break logits.unwrap().to_vec();
            }
            std::thread::yield_now();
        };
        all.push(logits);
    }
    all
}

#[test]
fn a_worker_gives_the_sessions_logits_on_its_own_thread_and_on_the_hosts() {
    let _alone = serial();
    let want = direct(&[cpu()]);

    let (ctx, session) = model(&[cpu()]);
    let mut worker = DecodeWorker::spawn(ctx, session).unwrap();
    assert!(worker.is_done() && worker.poll().is_none(), "nothing submitted yet");
    assert_eq!(through(&mut worker), want);
    let (_ctx, session) = worker.into_parts().unwrap();
    assert_eq!(session.n_past(), PROMPT.len() + STEPS.len());

    // Driven by a thread of the host's: the same logits, and `wait` as well as `poll`.
    let (ctx, session) = model(&[cpu()]);
    let (mut worker, driver) = DecodeWorker::new(ctx, session);
    let host = std::thread::spawn(move || driver.run());
    assert_eq!(through(&mut worker), want);
    worker.with_session(|ctx, s| s.clear(ctx)).unwrap().unwrap();
    worker.submit(&prompt()).unwrap();
    assert_eq!(worker.wait().unwrap(), want[0].as_slice(), "after clear, the prompt again");
    drop(worker);
    host.join().unwrap();
}

#[test]
fn misuse_is_an_error_and_never_a_hang() {
    let _alone = serial();
    let (ctx, session) = model(&[cpu()]);
    let (mut worker, driver) = DecodeWorker::new(ctx, session);
    let err = worker.wait().unwrap_err().to_string();
    assert!(err.contains("no batch was submitted"), "{err}");
    // No driver runs yet: the batch waits, and the worker refuses a second one.
    worker.submit(&prompt()).unwrap();
    assert!(!worker.is_done() && worker.poll().is_none());
    let err = worker.submit(&prompt()).unwrap_err().to_string();
    assert!(err.contains("has not been taken"), "{err}");
    let err = worker.with_session(|_, s| s.n_past()).unwrap_err().to_string();
    assert!(err.contains("a batch is running"), "{err}");
    let host = std::thread::spawn(move || driver.run());
    assert_eq!(worker.wait().unwrap().len(), HP.n_vocab);

    // A bad batch fails on the driver and leaves the session as it was.
    worker.submit(&step(HP.n_vocab as u32 + 5)).unwrap();
    let err = worker.wait().unwrap_err().to_string();
    assert!(err.contains("outside the vocabulary"), "{err}");
    assert_eq!(worker.with_session(|_, s| s.n_past()).unwrap(), PROMPT.len());
    drop(worker);
    host.join().unwrap();

    // A driver that is dropped without running: the worker says so instead of waiting.
    let (ctx, session) = model(&[cpu()]);
    let (mut worker, driver) = DecodeWorker::new(ctx, session);
    worker.submit(&prompt()).unwrap();
    drop(driver);
    assert!(worker.is_done());
    let err = worker.wait().unwrap_err().to_string();
    assert!(err.contains("driver has stopped"), "{err}");
    assert!(worker.submit(&prompt()).is_err());

    // Dropping a worker whose batch runs returns (the batch is aborted or finishes).
    let (ctx, session) = model(&[cpu()]);
    let mut worker = DecodeWorker::spawn(ctx, session).unwrap();
    worker.submit(&prompt()).unwrap();
    drop(worker);
}

#[test]
fn an_aborted_batch_leaves_the_cache_as_it_was() {
    let _alone = serial();
    let want = direct(&[cpu()]);
    let (ctx, session) = model(&[cpu()]);
    let (mut worker, driver) = DecodeWorker::new(ctx, session);
    worker.submit(&prompt()).unwrap();
    // Raised before the driver takes the batch: it stops before its first node.
    worker.abort();
    let host = std::thread::spawn(move || driver.run());
    let err = worker.wait().unwrap_err();
    assert!(matches!(err, gantry::Error::Engine(gantry::engine::Error::Aborted)), "{err}");
    assert_eq!(worker.with_session(|_, s| s.n_past()).unwrap(), 0, "the aborted prompt is not in the cache");
    // The next batch is not aborted (submit lowers the flag), and the model continues as if nothing happened.
    assert_eq!(through(&mut worker), want);
    drop(worker);
    host.join().unwrap();
}

/// A callback that asks to stop at its `at`-th poll, counting every poll.
fn stop_at(at: usize) -> (Arc<AtomicUsize>, gantry::AbortCallback) {
    let polls = Arc::new(AtomicUsize::new(0));
    let seen = polls.clone();
    (polls, Arc::new(move || seen.fetch_add(1, Ordering::Relaxed) + 1 >= at))
}

/// Aborts a step part-way through (the `at`-th poll), then checks that the
/// session carries on as if the step had never been asked for.
fn abort_part_way(backends: &[Arc<dyn Backend>], at: usize) -> usize {
    let want = direct(backends);
    let (mut ctx, mut s) = model(backends);
    assert_eq!(s.decode(&mut ctx, &prompt()).unwrap(), want[0].as_slice());
    let (polls, callback) = stop_at(at);
    s.set_abort_callback(Some(callback));
    let err = s.decode(&mut ctx, &step(STEPS[0])).unwrap_err();
    assert!(matches!(err, gantry::Error::Engine(gantry::engine::Error::Aborted)), "{err}");
    assert_eq!(polls.load(Ordering::Relaxed), at, "stopped at the poll that asked");
    assert_eq!(s.n_past(), PROMPT.len(), "the aborted token is not in the cache");
    s.set_abort_callback(None);
    for (t, want) in STEPS.iter().zip(&want[1..]) {
        let got = s.decode(&mut ctx, &step(*t)).unwrap();
        let diff = max_abs_diff(got, want);
        assert!(diff < 1e-3, "after the abort, logits differ by {diff}");
    }
    s.scheduler().n_splits()
}

#[test]
fn an_abort_stops_a_cpu_batch_between_its_nodes() {
    let _alone = serial();
    // One split on the CPU: the scheduler polls once, then the CPU backend before each node;
    // the tenth poll falls inside the split.
    assert_eq!(abort_part_way(&[cpu()], 10), 1);
}

/// The first wgpu device's backend and the CPU's, or `None` after saying
/// the test is skipped.
#[cfg(feature = "wgpu")]
fn wgpu_and_cpu() -> Option<[Arc<dyn Backend>; 2]> {
    let platform = gantry::backends::wgpu::WgpuPlatform::new();
    let Some(dev) = platform.wgpu_devices().first() else {
        eprintln!("skipped: no wgpu adapter on this machine");
        return None;
    };
    Some([dev.init_backend(None).unwrap(), cpu()])
}

/// `decode_start`, `is_done` until it says so, `decode_finish`: the logits
/// `decode` gives, batch after batch (on wgpu they come back by a read-back
/// the polls submit and bring in); and the memory the logits were in.
fn started_and_polled(backends: &[Arc<dyn Backend>], spread: usize) -> (Vec<Vec<f32>>, String) {
    let (mut ctx, mut s) = model_over(backends, spread);
    let mut all = Vec::new();
    for batch in std::iter::once(prompt()).chain(STEPS.map(step)) {
        s.decode_start(&mut ctx, &batch).unwrap();
        while !s.is_done().unwrap() {
            std::thread::yield_now();
        }
        all.push(s.decode_finish(&mut ctx).unwrap().to_vec());
    }
    let logits = s.graph().unwrap().logits;
    let memory = ctx.tensor_buffer(logits).unwrap().0.buffer_type.name().to_owned();
    // Finished without a poll: decode_finish brings the logits in itself.
    s.decode_start(&mut ctx, &step(5)).unwrap();
    assert_eq!(s.decode_finish(&mut ctx).unwrap().len(), HP.n_vocab);
    (all, memory)
}

#[test]
fn a_started_batch_polled_home_gives_the_logits_decode_gives() {
    let _alone = serial();
    assert_eq!(started_and_polled(&[cpu()], 1).0, direct(&[cpu()]));
}

#[cfg(feature = "wgpu")]
#[test]
fn a_started_wgpu_batch_polled_home_gives_the_logits_decode_gives() {
    let _alone = serial();
    let Some(backends) = wgpu_and_cpu() else { return };
    // The whole model on wgpu (the logits in its memory), and spread over wgpu and the CPU.
    for spread in [1, 2] {
        let want = direct_over(&backends, spread);
        let (got, memory) = started_and_polled(&backends, spread);
        // On wgpu alone the logits come through the read-back; with the last layer on the CPU, not.
        assert_eq!(memory == "CPU", spread == 2, "logits in {memory} memory");
        for (g, w) in got.iter().zip(&want) {
            let diff = max_abs_diff(g, w);
            assert!(diff < 1e-4, "polled logits differ from decode's by {diff}");
        }
    }
}

#[cfg(feature = "wgpu")]
#[test]
fn an_abort_stops_a_wgpu_batch_between_its_splits() {
    let _alone = serial();
    let Some(backends) = wgpu_and_cpu() else { return };
    // The second poll: before the second split (wgpu and the CPU take turns).
    let splits = abort_part_way(&backends, 2);
    assert!(splits >= 2, "the graph has {splits} split(s); the test needs two");
}

/// This process's threads whose names start with `prefix` (Gantry's are all
/// named `gantry-…`), read from `/proc/self/task`.
#[cfg(target_os = "linux")]
fn threads_named(prefix: &str) -> usize {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else { return 0 };
    tasks
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|name| name.starts_with(prefix))
        .count()
}

#[cfg(target_os = "linux")]
#[test]
fn a_worker_on_the_hosts_threads_starts_none() {
    let _alone = serial();
    let pool =
        Arc::new(rayon::ThreadPoolBuilder::new().num_threads(2).thread_name(|i| format!("host-{i}")).build().unwrap());
    let on_pool: Arc<dyn Backend> = Arc::new(CpuBackend::with_pool(CpuDevice::new(), pool.clone()));
    let (ctx, session) = model(&[on_pool]);
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    // Threads of earlier tests' backends may still be ending: the count can only fall.
    let before = threads_named("gantry");
    let (mut worker, driver) = DecodeWorker::new(ctx, session);
    pool.spawn(move || {
        driver.run();
        done_tx.send(()).unwrap();
    });
    worker.submit(&prompt()).unwrap();
    assert_eq!(worker.wait().unwrap().len(), HP.n_vocab);
    let during = threads_named("gantry");
    drop(worker);
    done_rx.recv().unwrap();
    assert!(during <= before, "a host-driven worker started {} thread(s)", during - before);

    // `spawn` starts one, and it ends with the worker.
    let (ctx, session) = model(&[cpu()]);
    let before = threads_named("gantry-decode");
    let mut worker = DecodeWorker::spawn(ctx, session).unwrap();
    // The thread names itself once it runs: after a batch it surely has.
    worker.submit(&prompt()).unwrap();
    worker.wait().unwrap();
    assert_eq!(threads_named("gantry-decode"), before + 1);
    worker.into_parts().unwrap();
    assert_eq!(threads_named("gantry-decode"), before, "joined by into_parts");
}
