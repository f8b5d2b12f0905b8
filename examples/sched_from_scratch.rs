//! The scheduler placing SmolLM2's 934-node prompt graph from scratch, over
//! and over: what `benches/sched.rs` times as `reset_split_alloc/gpu_cpu`,
//! as a plain program timed the way `scripts/sched_vs_ggml`'s driver times
//! ggml's scheduler (best and median of `rounds` rounds of `iters`
//! placements), and to count instructions with (criterion's own work would
//! be counted too):
//!
//! ```text
//! cargo build --release --example sched_from_scratch
//! target/release/examples/sched_from_scratch 7 1000
//! valgrind --tool=callgrind --collect-atstart=no \
//!     --toggle-collect='*Scheduler*alloc_graph*' \
//!     target/release/examples/sched_from_scratch 1 20
//! ```
//!
//! Callgrind counts the placements plus one made before the rounds; the
//! difference between two counts (say 1 × 20 and 1 × 10), divided by the
//! difference in placements, is the instructions one placement takes.

use std::sync::Arc;
use std::time::Instant;

use gantry::model::decoder::DecoderHparams;
use gantry::sched::{Scheduler, SchedulerParams};
use gantry::testing::PlannedLlama;
use gantry::testing::engine::TestBufferType;
use gantry::testing::engine::mock_devices::{all_ops, cpu, gpu_with};
use gantry::{BufferType, Context, DType, GraphArena};

fn main() -> gantry::Result<()> {
    let arg = |i: usize, default: usize| std::env::args().nth(i).and_then(|a| a.parse().ok()).unwrap_or(default);
    let (rounds, iters) = (arg(1, 7).max(1), arg(2, 1000).max(1));
    let mut ctx = Context::new();
    let vram: Arc<dyn BufferType> = TestBufferType::virtual_memory("TestGPU", 256).shared();
    let model = PlannedLlama::new(&mut ctx, DecoderHparams::SMOLLM2_135M, DType::Q4_0, 256, &vram)?;
    let g = model.build(&mut ctx, 64, 256)?;
    let arena = GraphArena::new();
    let graph = ctx.build_graph(&arena, &[g.logits])?;
    let backends = [gpu_with("TestGPU", all_ops, vram.clone()), cpu()];
    let mut sched = Scheduler::new(&backends, SchedulerParams::default())?;
    sched.reserve(&mut ctx, graph)?;
    sched.alloc_graph(&mut ctx, graph)?;
    // A rename bumps the context's revision: every call places from scratch.
    let first = graph.nodes()[0];
    let name = ctx.name(first).to_owned();
    let mut per_round = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let start = Instant::now();
        for _ in 0..iters {
            ctx.set_name(first, &name)?;
            sched.reset(&mut ctx);
            sched.alloc_graph(&mut ctx, graph)?;
        }
        per_round.push(start.elapsed().as_secs_f64() * 1e9 / iters as f64);
    }
    per_round.sort_by(f64::total_cmp);
    let n = graph.n_nodes() as f64;
    let (best, median) = (per_round[0], per_round[rounds / 2]);
    println!(
        "gantry {} nodes, {} splits, {} placements from scratch",
        graph.n_nodes(),
        sched.n_splits(),
        sched.placements_computed()
    );
    println!(
        "gantry reset+alloc_graph from scratch: best {:.1} us ({:.1} ns/node), median {:.1} us ({:.1} ns/node), {rounds} rounds x {iters}",
        best / 1e3,
        best / n,
        median / 1e3,
        median / n
    );
    sched.release(&mut ctx)?;
    Ok(())
}
