//! The wgpu backend over a host program's own device: the test opens its
//! own instance, adapter, device and queue (as a game engine would), hands
//! them to `WgpuPlatform::from_host`, computes a Gantry graph there, and
//! reads Gantry's output tensor in its own compute pass through the
//! storage Gantry hands over, with host work submitted before and after
//! Gantry's on the same queue.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use gantry_arenas::GraphArena;
use gantry_cpu::CpuBackend;
use gantry_engine::sched::{Scheduler, SchedulerParams};
use gantry_engine::{Backend, BufferUsage, Context, DType, Device, Error, Graph, TensorId};
use gantry_wgpu::{TensorStorage, WgpuDevice, WgpuPlatform, wgpu};

use super::support::assert_close;

/// The host's side: its adapter, device and queue, and the errors its own
/// uncaptured-error handler received.
struct Host {
    adapter: wgpu::Adapter,
    device: wgpu::Device,
    queue: wgpu::Queue,
    errors: Arc<Mutex<Vec<String>>>,
}

/// Opens a host device with `limits` (`None`: all the adapter offers), or
/// says why not.
fn open_host(limits: Option<wgpu::Limits>) -> Result<Host, String> {
    let desc = wgpu::InstanceDescriptor {
        backends: wgpu::Backends::all().with_env(),
        flags: wgpu::InstanceFlags::empty().with_env(),
        ..wgpu::InstanceDescriptor::new_without_display_handle()
    };
    let instance = wgpu::Instance::new(desc);
    let adapter = pollster::block_on(instance.request_adapter(&wgpu::RequestAdapterOptions::default()))
        .map_err(|e| format!("no wgpu adapter ({e}); install mesa-vulkan-drivers for lavapipe"))?;
    if !adapter.get_downlevel_capabilities().flags.contains(wgpu::DownlevelFlags::COMPUTE_SHADERS) {
        return Err(format!("adapter {} cannot run compute shaders", adapter.get_info().name));
    }
    let desc = wgpu::DeviceDescriptor {
        label: Some("the host's device"),
        required_limits: limits.unwrap_or_else(|| adapter.limits()),
        ..Default::default()
    };
    let (device, queue) =
        pollster::block_on(adapter.request_device(&desc)).map_err(|e| format!("cannot open the host's device: {e}"))?;
    let errors: Arc<Mutex<Vec<String>>> = Arc::default();
    let sink = errors.clone();
    device
        .on_uncaptured_error(Arc::new(move |e: wgpu::Error| sink.lock().expect("host error log").push(e.to_string())));
    Ok(Host { adapter, device, queue, errors })
}

/// The host with all the adapter's limits, or return from the test after
/// saying why it is skipped.
macro_rules! host_or_skip {
    () => {
        match open_host(None) {
            Ok(h) => h,
            Err(why) => {
                eprintln!("skipped: {why}");
                return;
            }
        }
    };
}

const K: usize = 8; // inputs
const N: usize = 6; // outputs
const M: usize = 3; // columns

fn w_values() -> Vec<f32> {
    (0..K * N).map(|i| ((i % 7) as f32 - 3.0) * 0.125).collect()
}

fn x_values() -> Vec<f32> {
    (0..K * M).map(|i| (i as f32) * 0.1 - 1.0).collect()
}

fn b_values() -> Vec<f32> {
    (0..N).map(|i| i as f32 * 0.5 - 1.0).collect()
}

/// y = silu(W x) + b on the CPU, in f64: `w` is [K inputs][N outputs]
/// (ggml's `mul_mat(w, x)` layout), `x` [M][K], `y` [M][N].
fn reference(w: &[f32], x: &[f32], b: &[f32]) -> Vec<f32> {
    let mut y = vec![0f32; N * M];
    for m in 0..M {
        for n in 0..N {
            let dot: f64 = (0..K).map(|k| f64::from(w[n * K + k]) * f64::from(x[m * K + k])).sum();
            let silu = dot / (1.0 + (-dot).exp());
            y[m * N + n] = (silu + f64::from(b[n])) as f32;
        }
    }
    y
}

/// The graph y = silu(W x) + b with W and b in `gpu`'s memory and x a
/// graph input.
struct Model {
    ctx: Context,
    w: TensorId,
    b: TensorId,
    x: TensorId,
    y: TensorId,
}

fn model(gpu: &WgpuDevice) -> Model {
    let mut ctx = Context::new();
    let w = ctx.tensor(DType::F32, [K, N]).unwrap();
    let b = ctx.tensor(DType::F32, [N]).unwrap();
    ctx.set_name(w, "W").unwrap();
    ctx.set_name(b, "b").unwrap();
    ctx.alloc_tensors(&[w, b], &gpu.buffer_type(), BufferUsage::Weights).unwrap();
    ctx.set_f32(w, &w_values()).unwrap();
    ctx.set_f32(b, &b_values()).unwrap();
    let x = ctx.tensor(DType::F32, [K, M]).unwrap();
    ctx.set_input(x).unwrap();
    let h = ctx.mul_mat(w, x).unwrap();
    let h = ctx.silu(h).unwrap();
    let y = ctx.add(h, b).unwrap();
    ctx.set_name(y, "y").unwrap();
    ctx.set_output(y).unwrap();
    Model { ctx, w, b, x, y }
}

/// The host's own compute pipeline: `out[i] = scale * src[i] + shift` over
/// `arrayLength(&out)` words, `src` bound read-only.
struct HostPass {
    pipeline: wgpu::ComputePipeline,
}

impl HostPass {
    fn new(device: &wgpu::Device, scale: f32, shift: f32) -> Self {
        let source = format!(
            "@group(0) @binding(0) var<storage, read> src: array<f32>;
             @group(0) @binding(1) var<storage, read_write> out: array<f32>;
             @compute @workgroup_size(64)
             fn main(@builtin(global_invocation_id) id: vec3<u32>) {{
                 if (id.x < arrayLength(&out)) {{ out[id.x] = {scale:?} * src[id.x] + {shift:?}; }}
             }}"
        );
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("host pass"),
            source: wgpu::ShaderSource::Wgsl(source.into()),
        });
        let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some("host pass"),
            layout: None,
            module: &module,
            entry_point: Some("main"),
            compilation_options: Default::default(),
            cache: None,
        });
        Self { pipeline }
    }

    /// Records the pass reading `src` into `encoder`, writing `out` (its
    /// whole size, `words` floats).
    fn record(
        &self,
        device: &wgpu::Device,
        encoder: &mut wgpu::CommandEncoder,
        src: wgpu::BufferBinding<'_>,
        out: &wgpu::Buffer,
        words: u32,
    ) {
        let group = device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("host pass"),
            layout: &self.pipeline.get_bind_group_layout(0),
            entries: &[
                wgpu::BindGroupEntry { binding: 0, resource: wgpu::BindingResource::Buffer(src) },
                wgpu::BindGroupEntry { binding: 1, resource: out.as_entire_binding() },
            ],
        });
        let mut pass = encoder
            .begin_compute_pass(&wgpu::ComputePassDescriptor { label: Some("host pass"), timestamp_writes: None });
        pass.set_pipeline(&self.pipeline);
        pass.set_bind_group(0, &group, &[]);
        pass.dispatch_workgroups(words.div_ceil(64), 1, 1);
    }
}

fn host_buffer(device: &wgpu::Device, words: usize, usage: wgpu::BufferUsages) -> wgpu::Buffer {
    device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("host buffer"),
        size: (words * 4) as u64,
        usage,
        mapped_at_creation: false,
    })
}

fn storage_usage() -> wgpu::BufferUsages {
    wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST
}

/// Copies `src` to a mappable buffer, submits, waits for that submission
/// and reads it: the host's own read-back.
fn host_read(host: &Host, src: &wgpu::Buffer) -> Vec<f32> {
    let size = src.size();
    let staging =
        host_buffer(&host.device, size as usize / 4, wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST);
    let mut encoder = host.device.create_command_encoder(&Default::default());
    encoder.copy_buffer_to_buffer(src, 0, &staging, 0, size);
    let index = host.queue.submit([encoder.finish()]);
    let (tx, rx) = std::sync::mpsc::channel();
    staging.map_async(wgpu::MapMode::Read, .., move |r| tx.send(r).expect("map result"));
    host.device.poll(wgpu::PollType::Wait { submission_index: Some(index), timeout: None }).expect("host wait");
    rx.recv().expect("map callback").expect("mapping");
    let bytes = staging.get_mapped_range(..).expect("mapped range").to_vec();
    staging.unmap();
    bytemuck::cast_slice(&bytes).to_vec()
}

fn backends(gpu: &WgpuDevice) -> Vec<Arc<dyn Backend>> {
    let cpu: Arc<dyn Backend> = Arc::new(CpuBackend::with_threads(2).unwrap());
    vec![gpu.init_backend(None).unwrap(), cpu]
}

/// The model on `gpu` (and the CPU), its graph in `arena`, allocated and
/// computed once by a scheduler, `y` checked against the reference (`what`
/// names the check).
fn computed_model<'a>(gpu: &WgpuDevice, arena: &'a GraphArena, what: &str) -> (Model, Scheduler, Graph<'a>) {
    let mut m = model(gpu);
    let mut sched = Scheduler::new(&backends(gpu), SchedulerParams::default()).unwrap();
    let graph = m.ctx.build_graph(arena, &[m.y]).unwrap();
    sched.alloc_graph(&mut m.ctx, graph).unwrap();
    m.ctx.set_f32(m.x, &x_values()).unwrap();
    sched.graph_compute(&mut m.ctx, graph).unwrap();
    let want = reference(&w_values(), &x_values(), &b_values());
    assert_close(what, &m.ctx.read_f32(m.y).unwrap(), &want, 1e-5, 1e-5);
    (m, sched, graph)
}

#[test]
fn host_reads_gantrys_output_in_its_own_pass() {
    let host = host_or_skip!();
    let platform = WgpuPlatform::from_host(&host.adapter, &host.device, &host.queue).unwrap();
    let gpu = platform.wgpu_devices()[0].clone();
    assert_eq!(gpu.name(), "wgpu0");
    assert!(gpu.is_host_device());
    assert!(gpu.description().contains("the host's device"), "{}", gpu.description());

    let arena = GraphArena::new();
    let (mut m, mut sched, graph) = computed_model(&gpu, &arena, "Gantry's read of y");
    let want = reference(&w_values(), &x_values(), &b_values());

    // y is on the host's device: the host binds it in its own pass.
    let storage: TensorStorage = gpu.tensor_storage(&m.ctx, m.y).unwrap();
    assert_eq!(storage.size, (N * M * 4) as u64);
    let align = u64::from(host.device.limits().min_storage_buffer_offset_alignment);
    assert_eq!(storage.offset % align, 0, "offset {} binds as it is", storage.offset);
    let pass = HostPass::new(&host.device, 2.0, 1.0);
    let out = host_buffer(&host.device, N * M, storage_usage());
    let mut encoder = host.device.create_command_encoder(&Default::default());
    pass.record(&host.device, &mut encoder, storage.binding(), &out, (N * M) as u32);
    host.queue.submit([encoder.finish()]);
    let got = host_read(&host, &out);
    let doubled: Vec<f32> = want.iter().map(|v| 2.0 * v + 1.0).collect();
    assert_close("the host's pass over y", &got, &doubled, 1e-5, 1e-5);

    // Computing again (new input) and reading again through the same
    // storage: the range is still y's, and queue order makes the host's
    // pass see the new values with no wait in between.
    let x2: Vec<f32> = x_values().iter().map(|v| -v).collect();
    m.ctx.set_f32(m.x, &x2).unwrap();
    sched.graph_compute_async(&mut m.ctx, graph).unwrap();
    let mut encoder = host.device.create_command_encoder(&Default::default());
    pass.record(&host.device, &mut encoder, storage.binding(), &out, (N * M) as u32);
    host.queue.submit([encoder.finish()]);
    sched.synchronize().unwrap();
    let want2: Vec<f32> = reference(&w_values(), &x2, &b_values()).iter().map(|v| 2.0 * v + 1.0).collect();
    assert_close("the host's pass after an async compute", &host_read(&host, &out), &want2, 1e-5, 1e-5);

    // Gantry raised no error to the host's handler, and the handler is
    // still the host's: an error the host makes itself reaches it.
    assert!(host.errors.lock().unwrap().is_empty(), "host saw {:?}", host.errors.lock().unwrap());
    let _bad = host.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("deliberately invalid"),
        size: 4,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::MAP_WRITE,
        mapped_at_creation: false,
    });
    assert_eq!(host.errors.lock().unwrap().len(), 1, "the host's handler got its own error");
    sched.release(&mut m.ctx).unwrap();
}

/// A host job that keeps lavapipe busy for a while: each invocation runs a
/// dependent float recurrence for as many rounds as `rounds[0]` says (read
/// at run time, so the compiler cannot fold the loop), `out[i] = acc + i`.
struct Busy {
    pipeline: wgpu::ComputePipeline,
    rounds: wgpu::Buffer,
    out: wgpu::Buffer,
}

/// Invocations of the busy job (64 workgroups of 64).
const BUSY_WORDS: usize = 64 * 64;

impl Busy {
    fn new(host: &Host, rounds: u32) -> Self {
        let source = "@group(0) @binding(0) var<storage, read_write> out: array<f32>;
             @group(0) @binding(1) var<storage, read> rounds: array<u32>;
             @compute @workgroup_size(64)
             fn main(@builtin(global_invocation_id) id: vec3<u32>) {
                 var acc = 0.0;
                 for (var i = 0u; i < rounds[0]; i++) { acc = fma(acc, 0.5, 1.0); }
                 if (id.x < arrayLength(&out)) { out[id.x] = acc + f32(id.x); }
             }";
        let module = host.device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("busy"),
            source: wgpu::ShaderSource::Wgsl(source.into()),
        });
        let pipeline = host.device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some("busy"),
            layout: None,
            module: &module,
            entry_point: Some("main"),
            compilation_options: Default::default(),
            cache: None,
        });
        let rounds_buffer = host_buffer(&host.device, 1, storage_usage());
        host.queue.write_buffer(&rounds_buffer, 0, bytemuck::bytes_of(&rounds));
        Self { pipeline, rounds: rounds_buffer, out: host_buffer(&host.device, BUSY_WORDS, storage_usage()) }
    }

    /// The job's commands, recorded (submitted by the caller).
    fn encode(&self, host: &Host) -> wgpu::CommandBuffer {
        let group = host.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("busy"),
            layout: &self.pipeline.get_bind_group_layout(0),
            entries: &[
                wgpu::BindGroupEntry { binding: 0, resource: self.out.as_entire_binding() },
                wgpu::BindGroupEntry { binding: 1, resource: self.rounds.as_entire_binding() },
            ],
        });
        let mut encoder = host.device.create_command_encoder(&Default::default());
        {
            let mut pass = encoder.begin_compute_pass(&Default::default());
            pass.set_pipeline(&self.pipeline);
            pass.set_bind_group(0, &group, &[]);
            pass.dispatch_workgroups((BUSY_WORDS / 64) as u32, 1, 1);
        }
        encoder.finish()
    }
}

#[test]
fn host_work_before_and_after_gantrys_interleaves() {
    let host = host_or_skip!();
    let platform = WgpuPlatform::from_host(&host.adapter, &host.device, &host.queue).unwrap();
    let gpu = platform.wgpu_devices()[0].clone();
    let mut m = model(&gpu);
    let mut sched = Scheduler::new(&backends(&gpu), SchedulerParams::default()).unwrap();
    let arena = GraphArena::new();
    let graph = m.ctx.build_graph(&arena, &[m.y]).unwrap();
    sched.alloc_graph(&mut m.ctx, graph).unwrap();
    m.ctx.set_f32(m.x, &x_values()).unwrap();

    // Before: the host writes Gantry's bias b on the GPU, in its own pass
    // (b' = 3 b - 0.5 from a host buffer holding b), submitted before
    // Gantry's compute: queue order makes Gantry read it.
    let b_src = host_buffer(&host.device, N, storage_usage());
    host.queue.write_buffer(&b_src, 0, bytemuck::cast_slice(&b_values()));
    let b_storage = gpu.tensor_storage(&m.ctx, m.b).unwrap();
    let pass = HostPass::new(&host.device, 3.0, -0.5);
    let mut encoder = host.device.create_command_encoder(&Default::default());
    let b_words = host_buffer(&host.device, N, storage_usage());
    pass.record(&host.device, &mut encoder, b_src.as_entire_buffer_binding(), &b_words, N as u32);
    encoder.copy_buffer_to_buffer(&b_words, 0, &b_storage.buffer, b_storage.offset, (N * 4) as u64);
    host.queue.submit([encoder.finish()]);

    sched.graph_compute_async(&mut m.ctx, graph).unwrap();

    // After: the host's pass over y, then a long host job (about half a
    // second on lavapipe), both made and recorded beforehand and submitted
    // back to back. The long job goes last: lavapipe may hold a submission
    // back until the one before it has run, so only the last one is sure to
    // be running when the calls return. Gantry's synchronize waits for its
    // compute, not for the host's later work: that still runs when it
    // returns.
    let y_storage = gpu.tensor_storage(&m.ctx, m.y).unwrap();
    let after = HostPass::new(&host.device, -1.0, 0.0);
    let y_out = host_buffer(&host.device, N * M, storage_usage());
    let mut encoder = host.device.create_command_encoder(&Default::default());
    after.record(&host.device, &mut encoder, y_storage.binding(), &y_out, (N * M) as u32);
    let y_pass = encoder.finish();
    let busy = Busy::new(&host, 1 << 20);
    let busy_pass = busy.encode(&host);
    host.queue.submit([y_pass]);
    host.queue.submit([busy_pass]);
    let host_done = Arc::new(AtomicBool::new(false));
    let flag = host_done.clone();
    host.queue.on_submitted_work_done(move || flag.store(true, Ordering::SeqCst));
    // Some lavapipe builds run a submission inside `submit` when the queue
    // is idle (on the 2-core AMD EPYC development machine `submit` of the
    // busy job returned after the job's 0.46 s): then the host's later work
    // is over before Gantry is asked anything, and there is nothing to
    // observe here (the results below are still checked).
    let finished_in_submit = host.device.poll(wgpu::PollType::Poll).unwrap().is_queue_empty();
    let started = Instant::now();
    sched.synchronize().unwrap();
    let waited = started.elapsed();
    let status = host.device.poll(wgpu::PollType::Poll).unwrap();
    if finished_in_submit {
        eprintln!(
            "NOTE: this driver ran the host's busy job inside queue.submit; synchronize's not waiting for it is not observable here"
        );
    } else {
        assert!(
            !status.is_queue_empty() && !host_done.load(Ordering::SeqCst),
            "synchronize ({waited:?}) waited for the host's later work"
        );
    }

    // Gantry's result used the host's b; the host's later passes ran after
    // Gantry's compute and saw its y.
    let b_host: Vec<f32> = b_values().iter().map(|v| 3.0 * v - 0.5).collect();
    let want = reference(&w_values(), &x_values(), &b_host);
    assert_close("y with the host's b", &m.ctx.read_f32(m.y).unwrap(), &want, 1e-5, 1e-5);
    let negated: Vec<f32> = want.iter().map(|v| -v).collect();
    assert_close("the host's pass over y after Gantry's", &host_read(&host, &y_out), &negated, 1e-5, 1e-5);
    let busy_want: Vec<f32> = (0..BUSY_WORDS).map(|i| 2.0 + i as f32).collect();
    assert_close("the host's busy job", &host_read(&host, &busy.out), &busy_want, 1e-3, 0.0);
    assert!(host.errors.lock().unwrap().is_empty(), "host saw {:?}", host.errors.lock().unwrap());
    sched.release(&mut m.ctx).unwrap();
}

#[test]
fn host_thread_submits_while_gantry_computes() {
    let host = Arc::new(host_or_skip!());
    let platform = WgpuPlatform::from_host(&host.adapter, &host.device, &host.queue).unwrap();
    let gpu = platform.wgpu_devices()[0].clone();
    let mut m = model(&gpu);
    let mut sched = Scheduler::new(&backends(&gpu), SchedulerParams::default()).unwrap();
    let arena = GraphArena::new();
    let graph = m.ctx.build_graph(&arena, &[m.y]).unwrap();
    sched.alloc_graph(&mut m.ctx, graph).unwrap();

    // The host's frame loop on its own thread: a pass over its own buffer,
    // submitted and waited for (its own point), again and again.
    let stop = Arc::new(AtomicBool::new(false));
    let frames = {
        let (host, stop) = (host.clone(), stop.clone());
        std::thread::spawn(move || {
            let src = host_buffer(&host.device, 256, storage_usage());
            host.queue.write_buffer(&src, 0, bytemuck::cast_slice(&vec![1.5f32; 256]));
            let out = host_buffer(&host.device, 256, storage_usage());
            let pass = HostPass::new(&host.device, 2.0, 0.0);
            let mut frames = 0usize;
            while !stop.load(Ordering::SeqCst) || frames < 3 {
                let mut encoder = host.device.create_command_encoder(&Default::default());
                pass.record(&host.device, &mut encoder, src.as_entire_buffer_binding(), &out, 256);
                let index = host.queue.submit([encoder.finish()]);
                host.device.poll(wgpu::PollType::Wait { submission_index: Some(index), timeout: None }).unwrap();
                frames += 1;
            }
            assert_close("the host's frames", &host_read(&host, &out), &[3.0; 256], 0.0, 0.0);
            frames
        })
    };
    for step in 0..8 {
        let x: Vec<f32> = x_values().iter().map(|v| v * (1.0 + step as f32 * 0.25)).collect();
        m.ctx.set_f32(m.x, &x).unwrap();
        sched.graph_compute(&mut m.ctx, graph).unwrap();
        let want = reference(&w_values(), &x, &b_values());
        assert_close(&format!("y at step {step}"), &m.ctx.read_f32(m.y).unwrap(), &want, 1e-5, 1e-5);
    }
    stop.store(true, Ordering::SeqCst);
    let frames = frames.join().expect("the host's thread");
    assert!(frames >= 3, "{frames} host frames");
    assert!(host.errors.lock().unwrap().is_empty(), "host saw {:?}", host.errors.lock().unwrap());
    sched.release(&mut m.ctx).unwrap();
}

#[test]
fn a_device_with_low_limits_is_refused_naming_them() {
    let host = match open_host(Some(wgpu::Limits::downlevel_defaults())) {
        Ok(h) => h,
        Err(why) => {
            eprintln!("skipped: {why}");
            return;
        }
    };
    let err = match WgpuPlatform::from_host(&host.adapter, &host.device, &host.queue) {
        Ok(_) => panic!("a device with downlevel limits was accepted"),
        Err(e) => e.to_string(),
    };
    // downlevel_defaults: 4 storage buffers per stage, 16352 bytes of workgroup memory.
    assert!(err.contains("wgpu0"), "{err}");
    assert!(err.contains("max_storage_buffers_per_shader_stage is 4, the kernels need at least 8"), "{err}");
    assert!(err.contains("max_compute_workgroup_storage_size is 16352, the kernels need at least 16384"), "{err}");
    assert!(err.contains("required_limits"), "says what to do: {err}");
    let offered = gantry_wgpu::gpu::GpuLimits::from_limits(&host.adapter.limits());
    if offered.can_run_kernels() {
        assert!(err.contains("the adapter offers enough"), "{err}");
    }
    assert!(host.errors.lock().unwrap().is_empty(), "host saw {:?}", host.errors.lock().unwrap());
}

#[test]
fn webgpu_default_limits_are_enough() {
    let host = match open_host(Some(wgpu::Limits::default())) {
        Ok(h) => h,
        Err(why) => {
            eprintln!("skipped: {why}");
            return;
        }
    };
    let platform = WgpuPlatform::from_host_named("game-gpu", &host.adapter, &host.device, &host.queue).unwrap();
    let gpu = platform.wgpu_devices()[0].clone();
    assert_eq!(gpu.name(), "game-gpu");
    assert_eq!(
        gpu.facts().limits.max_storage_buffer_binding_size,
        wgpu::Limits::default().max_storage_buffer_binding_size
    );
    let arena = GraphArena::new();
    let (mut m, mut sched, _) = computed_model(&gpu, &arena, "y on a device with WebGPU's limits");
    sched.release(&mut m.ctx).unwrap();
}

fn storage_err(gpu: &WgpuDevice, ctx: &Context, t: TensorId) -> String {
    match gpu.tensor_storage(ctx, t) {
        Ok(s) => panic!("storage handed over for {}: {s:?}", ctx.describe(t)),
        Err(e) => e.to_string(),
    }
}

#[test]
fn storage_export_errors_name_the_tensor() {
    let host = host_or_skip!();
    let platform = WgpuPlatform::from_host(&host.adapter, &host.device, &host.queue).unwrap();
    let gpu = platform.wgpu_devices()[0].clone();
    let mut m = model(&gpu);
    let ctx = &mut m.ctx;

    // A CPU tensor.
    let cpu = gantry_cpu::CpuDevice::new();
    let on_cpu = ctx.tensor(DType::F32, [16]).unwrap();
    ctx.set_name(on_cpu, "on_cpu").unwrap();
    ctx.alloc_tensors(&[on_cpu], &cpu.buffer_type(), BufferUsage::Any).unwrap();
    let err = storage_err(&gpu, ctx, on_cpu);
    assert!(err.contains("on_cpu") && err.contains("not in a wgpu storage buffer"), "{err}");

    // A tensor with no memory.
    let nowhere = ctx.tensor(DType::F32, [16]).unwrap();
    ctx.set_name(nowhere, "nowhere").unwrap();
    let err = storage_err(&gpu, ctx, nowhere);
    assert!(err.contains("nowhere") && err.contains("not allocated"), "{err}");

    // A transposed view of W: not contiguous.
    let wt = ctx.transpose(m.w).unwrap();
    ctx.set_name(wt, "W^T").unwrap();
    let err = storage_err(&gpu, ctx, wt);
    assert!(err.contains("W^T") && err.contains("not contiguous"), "{err}");

    // A view starting one element into W: an offset no binding takes.
    let inner = ctx.view_1d(m.w, 4, 4).unwrap();
    ctx.set_name(inner, "W[1..5]").unwrap();
    let err = storage_err(&gpu, ctx, inner);
    assert!(err.contains("W[1..5]") && err.contains("alignment"), "{err}");
    // A contiguous view at the start is fine: W's own range, shorter.
    let head = ctx.view_1d(m.w, 4, 0).unwrap();
    let whole = gpu.tensor_storage(ctx, m.w).unwrap();
    let part = gpu.tensor_storage(ctx, head).unwrap();
    assert_eq!((part.offset, part.size), (whole.offset, 16));
    assert_eq!(whole.size, (K * N * 4) as u64);

    // Another device's tensor (a second Gantry device over the same host
    // handles is another device).
    let other = WgpuPlatform::from_host_named("wgpu1", &host.adapter, &host.device, &host.queue).unwrap();
    let err = storage_err(&other.wgpu_devices()[0], ctx, m.w);
    assert!(err.contains("wgpu1") && err.contains("W") && err.contains("it is on wgpu0"), "{err}");

    // A handle the context does not hold (another context's).
    let mut other_ctx = Context::new();
    let stale = other_ctx.tensor(DType::F32, [1]).unwrap();
    drop(other_ctx);
    let fresh = Context::new();
    let err = storage_err(&gpu, &fresh, stale);
    assert!(err.contains("tensor"), "{err}");
    assert!(matches!(gpu.tensor_storage(&fresh, stale), Err(Error::StaleHandle { .. })));
}
