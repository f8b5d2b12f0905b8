//! The optimize system on the CPU backend: a decoder-like block (RMS_NORM,
//! MUL by a weight, three quantized products of the normed activation, each
//! followed by its own work) gives the same results with fusion on and off,
//! over several computes (the first direct, the next from graph plans); the
//! fused groups are the expected ones and show in `GANTRY_SCHED_DEBUG`'s
//! text and the dot picture; an intermediate that something else reads, or
//! that is an output, is not fused; prompt-sized activations are not grouped;
//! `GANTRY_NO_FUSION=1` turns it off.

use std::sync::Arc;

use gantry_cpu::{self as cpu, CpuBackend};
use gantry_engine::sched::{FusionKind, Scheduler, SchedulerParams};
use gantry_engine::{Backend, BufferUsage, Context, DType, GraphArena, SplitMix64, TensorId};

const K: usize = 128;

/// What a test reads back.
struct Block {
    x: TensorId,
    outputs: Vec<TensorId>,
    norm: TensorId,
}

/// A quantized `[K, m]` weight filled from `seed`.
fn weight(ctx: &mut Context, dtype: DType, m: usize, seed: u64) -> TensorId {
    let w = ctx.tensor(dtype, [K, m]).unwrap();
    ctx.alloc_tensors(&[w], &cpu::buffer_type(), BufferUsage::Weights).unwrap();
    let values = SplitMix64::new(seed).values(K * m, -1.0, 1.0);
    let row = dtype.row_size(K).unwrap();
    let mut bytes = vec![0u8; row * m];
    for (src, dst) in values.chunks(K).zip(bytes.chunks_mut(row)) {
        gantry_engine::quant::quantize_row(dtype, src, dst).unwrap();
    }
    ctx.write_tensor_bytes(w, 0, &bytes).unwrap();
    w
}

/// `h = rms_norm(x) * g`; `q, k, v = Wq·h, Wk·h, Wv·h`, each followed by an
/// op of its own (so the products are apart in the graph's order); with
/// `norm_read_twice` the norm's result is also added to the outputs' sum.
fn block(ctx: &mut Context, tokens: usize, dtype: DType, norm_read_twice: bool) -> Block {
    let x = ctx.tensor(DType::F32, [K, tokens]).unwrap();
    ctx.set_input(x).unwrap();
    let g = ctx.tensor(DType::F32, [K]).unwrap();
    ctx.alloc_tensors(&[g], &cpu::buffer_type(), BufferUsage::Weights).unwrap();
    ctx.set_f32(g, &SplitMix64::new(7).values(K, 0.5, 1.5)).unwrap();
    let (wq, wk, wv) = (weight(ctx, dtype, 64, 1), weight(ctx, dtype, 32, 2), weight(ctx, dtype, 32, 3));
    let norm = ctx.rms_norm(x, 1e-5).unwrap();
    let h = ctx.mul(norm, g).unwrap();
    let q = ctx.mul_mat(wq, h).unwrap();
    let q = ctx.silu(q).unwrap();
    let k = ctx.mul_mat(wk, h).unwrap();
    let k = ctx.scale(k, 0.5, 0.0).unwrap();
    let v = ctx.mul_mat(wv, h).unwrap();
    let kv = ctx.add(k, v).unwrap();
    let mut outputs = vec![q, kv];
    if norm_read_twice {
        let twice = ctx.add(norm, x).unwrap();
        outputs.push(twice);
    }
    Block { x, outputs, norm }
}

/// Runs `b` three times with fusion on or off; returns every output of
/// every run and the scheduler's fused groups and debug texts.
fn run(
    build: impl Fn(&mut Context) -> Block,
    fusion: bool,
    tokens: usize,
) -> (Vec<Vec<f32>>, Vec<FusionKind>, String, String) {
    run_with(build, SchedulerParams { graph_optimize: fusion, ..SchedulerParams::default() }, tokens)
}

/// [`run`] with the scheduler's parameters given.
fn run_with(
    build: impl Fn(&mut Context) -> Block,
    params: SchedulerParams,
    tokens: usize,
) -> (Vec<Vec<f32>>, Vec<FusionKind>, String, String) {
    let mut ctx = Context::new();
    let b = build(&mut ctx);
    let cpu: Arc<dyn Backend> = Arc::new(CpuBackend::with_threads(2).unwrap());
    let mut sched = Scheduler::new(&[cpu], params).unwrap();
    let arena = GraphArena::new();
    let graph = ctx.build_graph(&arena, &b.outputs).unwrap();
    let mut results = Vec::new();
    for round in 0..3 {
        sched.alloc_graph(&mut ctx, graph).unwrap();
        ctx.set_f32(b.x, &SplitMix64::new(100 + round).values(K * tokens, -2.0, 2.0)).unwrap();
        sched.graph_compute(&mut ctx, graph).unwrap();
        for &o in &b.outputs {
            results.push(ctx.read_f32(o).unwrap());
        }
    }
    let kinds = (0..sched.n_splits()).flat_map(|s| sched.split_fused(s).iter().map(|g| g.kind)).collect();
    let text = sched.describe(&ctx, graph, 2);
    let dot = sched.to_dot(&ctx, graph);
    let _ = b.norm;
    (results, kinds, text, dot)
}

fn assert_close(fused: &[Vec<f32>], unfused: &[Vec<f32>]) {
    assert_eq!(fused.len(), unfused.len());
    for (a, b) in fused.iter().zip(unfused) {
        for (i, (x, y)) in a.iter().zip(b).enumerate() {
            assert!((x - y).abs() <= 1e-5 * (1.0 + y.abs()), "element {i}: fused {x}, unfused {y}");
        }
    }
}

#[test]
fn a_decoder_block_fuses_and_agrees_with_the_unfused_graph() {
    for dtype in [DType::Q4_0, DType::Q4_1, DType::Q8_0] {
        let build = |ctx: &mut Context| block(ctx, 1, dtype, false);
        let (fused, kinds, text, dot) = run(build, true, 1);
        let (unfused, none, plain_text, _) = run(build, false, 1);
        assert_eq!(kinds, [FusionKind::RmsNormMul, FusionKind::SharedActivation], "{dtype}: {text}");
        assert!(none.is_empty(), "fusion off: no groups");
        assert_close(&fused, &unfused);
        // The kernels are the unfused ones' arithmetic: the results are the same bits.
        assert_eq!(fused, unfused, "{dtype}");
        assert!(text.contains("## FUSED RMS_NORM+MUL"), "{text}");
        assert!(text.contains("## FUSED MUL_MAT×shared-src1"), "{text}");
        assert!(text.contains("2 fused groups"), "{text}");
        assert!(!plain_text.contains("FUSED"), "{plain_text}");
        assert!(dot.contains("label=\"fused RMS_NORM+MUL\""), "{dot}");
        assert!(dot.contains("label=\"fused MUL_MAT×shared-src1\""), "{dot}");
        // The three products were brought together, in the graph's order otherwise.
        let lines: Vec<&str> = text.lines().filter(|l| l.starts_with("node #")).collect();
        let products: Vec<usize> =
            lines.iter().enumerate().filter(|(_, l)| l.contains("MUL_MAT)")).map(|(i, _)| i).collect();
        assert_eq!(products.len(), 3, "{text}");
        assert_eq!(products[2] - products[0], 2, "adjacent products: {text}");
    }
}

#[test]
fn an_intermediate_read_elsewhere_is_not_fused_and_results_agree() {
    let build = |ctx: &mut Context| block(ctx, 1, DType::Q4_0, true);
    let (fused, kinds, text, _) = run(build, true, 1);
    let (unfused, _, _, _) = run(build, false, 1);
    assert_eq!(kinds, [FusionKind::SharedActivation], "the norm has two readers: {text}");
    assert_eq!(fused, unfused);
}

#[test]
fn an_intermediate_that_is_an_output_is_not_fused() {
    let build = |ctx: &mut Context| {
        let mut b = block(ctx, 1, DType::Q4_1, false);
        ctx.set_output(b.norm).unwrap();
        b.outputs.push(b.norm);
        b
    };
    let (fused, kinds, text, _) = run(build, true, 1);
    let (unfused, _, _, _) = run(build, false, 1);
    assert!(!kinds.contains(&FusionKind::RmsNormMul), "{text}");
    assert_eq!(fused, unfused);
    // The norm's own result was written.
    assert!(fused[2].iter().any(|&v| v != 0.0));
}

#[test]
fn prompt_sized_activations_are_not_grouped_and_still_agree() {
    let tokens = 9;
    let build = |ctx: &mut Context| block(ctx, tokens, DType::Q4_0, false);
    let (fused, kinds, text, _) = run(build, true, tokens);
    let (unfused, _, _, _) = run(build, false, tokens);
    assert_eq!(kinds, [FusionKind::RmsNormMul], "{text}");
    assert_eq!(fused, unfused);
}

#[test]
fn products_of_different_weight_types_are_not_grouped() {
    let build = |ctx: &mut Context| {
        let x = ctx.tensor(DType::F32, [K, 1]).unwrap();
        ctx.set_input(x).unwrap();
        let (a, b) = (weight(ctx, DType::Q4_0, 32, 1), weight(ctx, DType::Q8_0, 32, 2));
        let ya = ctx.mul_mat(a, x).unwrap();
        let yb = ctx.mul_mat(b, x).unwrap();
        let y = ctx.add(ya, yb).unwrap();
        Block { x, outputs: vec![y], norm: y }
    };
    let (fused, kinds, _, _) = run(build, true, 1);
    let (unfused, _, _, _) = run(build, false, 1);
    assert!(kinds.is_empty());
    assert_eq!(fused, unfused);
}

/// `GANTRY_NO_FUSION` read by `SchedulerParams::from_env()`, and only
/// there (`SchedulerParams::default()` ignores it): this test runs itself
/// again as a child process with the variable set (a process's environment
/// is not something to change under other test threads).
#[test]
fn the_environment_switch_turns_fusion_off() {
    if let Ok(value) = std::env::var("GANTRY_FUSION_TEST_CHILD") {
        let on = value == "on";
        assert!(SchedulerParams::default().graph_optimize, "the default does not read the environment");
        assert_eq!(SchedulerParams::from_env().graph_optimize, on);
        let build = |ctx: &mut Context| block(ctx, 1, DType::Q4_0, false);
        let (_, kinds, text, _) = run_with(build, SchedulerParams::from_env(), 1);
        assert_eq!(!kinds.is_empty(), on, "{text}");
        return;
    }
    let exe = std::env::current_exe().unwrap();
    // The test's name as the harness knows it: its path without the crate's name.
    let path = concat!(module_path!(), "::the_environment_switch_turns_fusion_off");
    let name = path.split_once("::").map_or(path, |(_, rest)| rest);
    for (no_fusion, child) in [("1", "off"), ("0", "on"), ("", "on")] {
        let output = std::process::Command::new(&exe)
            .args(["--exact", name, "--test-threads=1"])
            .env("GANTRY_FUSION_TEST_CHILD", child)
            .env("GANTRY_NO_FUSION", no_fusion)
            .output()
            .unwrap();
        let out = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "GANTRY_NO_FUSION={no_fusion:?}: the child failed:\n{out}");
        assert!(out.contains("1 passed"), "the child ran the test ({name}):\n{out}");
    }
}

/// A product whose weights are computed between it and the first product
/// (a CPY quantizing them) cannot move up next to it: no group, same result.
#[test]
fn a_product_is_not_moved_past_what_it_reads() {
    let build = |ctx: &mut Context| {
        let x = ctx.tensor(DType::F32, [K, 1]).unwrap();
        ctx.set_input(x).unwrap();
        let a = weight(ctx, DType::Q4_0, 32, 1);
        let wf = ctx.tensor(DType::F32, [K, 32]).unwrap();
        let wq = ctx.tensor(DType::Q4_0, [K, 32]).unwrap();
        ctx.alloc_tensors(&[wf, wq], &cpu::buffer_type(), BufferUsage::Weights).unwrap();
        ctx.set_f32(wf, &SplitMix64::new(9).values(K * 32, -1.0, 1.0)).unwrap();
        let ya = ctx.mul_mat(a, x).unwrap();
        let ya = ctx.silu(ya).unwrap();
        let b = ctx.cpy(wf, wq).unwrap();
        let yb = ctx.mul_mat(b, x).unwrap();
        let y = ctx.add(ya, yb).unwrap();
        Block { x, outputs: vec![y], norm: y }
    };
    let (fused, kinds, text, _) = run(build, true, 1);
    let (unfused, _, _, _) = run(build, false, 1);
    assert!(kinds.is_empty(), "{text}");
    assert_eq!(fused, unfused);
}

/// Keys rotated into a KV cache: `k = rope(reshape(x))` over 4 heads of 32,
/// reshaped into rows and stored by SET_ROWS into an F16, F32 or Q8_0
/// cache at the given slots (one given twice: the later token wins), then
/// read through the stored cache by a product. Fused, the three nodes are
/// one `ROPE+SET_ROWS` group, and the cache holds the same bytes as unfused.
#[test]
fn keys_rotated_into_a_cache_fuse_and_store_the_same_bytes() {
    const HEAD: usize = 32;
    for (cache_type, tokens) in [(DType::F16, 1), (DType::F16, 5), (DType::F32, 3), (DType::Q8_0, 5)] {
        let compute = |fusion: bool| {
            let mut ctx = Context::new();
            let x = ctx.tensor(DType::F32, [K, tokens]).unwrap();
            let pos = ctx.tensor(DType::I32, [tokens]).unwrap();
            let slots = ctx.tensor(DType::I32, [tokens]).unwrap();
            let cache = ctx.tensor(cache_type, [K, 8]).unwrap();
            let w = ctx.tensor(DType::F32, [K, 4]).unwrap();
            for t in [x, pos, slots] {
                ctx.set_input(t).unwrap();
            }
            ctx.alloc_tensors(&[cache, w], &cpu::buffer_type(), BufferUsage::Weights).unwrap();
            ctx.set_f32(w, &SplitMix64::new(5).values(K * 4, -1.0, 1.0)).unwrap();
            let heads = ctx.reshape(x, [HEAD, K / HEAD, tokens]).unwrap();
            let params = gantry_engine::RopeParams::new(HEAD, gantry_engine::RopeMode::Neox, 10000.0);
            let k = ctx.rope(heads, pos, None, params).unwrap();
            let rows = ctx.reshape(k, [K, tokens]).unwrap();
            let stored = ctx.set_rows(cache, rows, slots).unwrap();
            let read = ctx.mul_mat(stored, w).unwrap();
            ctx.set_output(read).unwrap();
            let cpu: Arc<dyn Backend> = Arc::new(CpuBackend::with_threads(2).unwrap());
            let params = SchedulerParams { graph_optimize: fusion, ..SchedulerParams::default() };
            let mut sched = Scheduler::new(&[cpu], params).unwrap();
            let arena = GraphArena::new();
            let graph = ctx.build_graph(&arena, &[read]).unwrap();
            let mut bytes = Vec::new();
            for round in 0..3 {
                sched.alloc_graph(&mut ctx, graph).unwrap();
                ctx.set_f32(x, &SplitMix64::new(40 + round).values(K * tokens, -2.0, 2.0)).unwrap();
                let positions: Vec<i32> = (0..tokens as i32).map(|p| 3 + p + 7 * round as i32).collect();
                ctx.set_i32(pos, &positions).unwrap();
                // Slot 6 twice when there are several tokens.
                let mut at: Vec<i32> = (0..tokens as i32).map(|t| (2 * t + round as i32) % 8).collect();
                if tokens > 1 {
                    at[tokens - 1] = at[0];
                }
                ctx.set_i32(slots, &at).unwrap();
                sched.graph_compute(&mut ctx, graph).unwrap();
                let mut cached = vec![0u8; ctx.desc(cache).unwrap().nbytes()];
                ctx.read_tensor_bytes(cache, 0, &mut cached).unwrap();
                bytes.push((cached, ctx.read_f32(read).unwrap()));
            }
            let kinds: Vec<FusionKind> =
                (0..sched.n_splits()).flat_map(|s| sched.split_fused(s).iter().map(|g| g.kind)).collect();
            (bytes, kinds, sched.describe(&ctx, graph, 2))
        };
        let (fused, kinds, text) = compute(true);
        let (unfused, none, _) = compute(false);
        assert_eq!(kinds, [FusionKind::RopeSetRows], "{cache_type} × {tokens}: {text}");
        assert!(none.is_empty());
        assert!(text.contains("## FUSED ROPE+SET_ROWS"), "{text}");
        assert_eq!(fused, unfused, "{cache_type} × {tokens}: the same cache bytes and products");
        assert!(fused[2].0.iter().any(|&b| b != 0), "the cache was written");
    }
}
