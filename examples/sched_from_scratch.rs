//! The scheduler placing SmolLM2's 934-node prompt graph from scratch, over
//! and over: what `benches/sched.rs` times as `reset_split_alloc/gpu_cpu`,
//! as a plain program to count instructions with (criterion's own work
//! would be counted too):
//!
//! ```text
//! cargo build --release --example sched_from_scratch
//! valgrind --tool=callgrind --collect-atstart=no \
//!     --toggle-collect='*Scheduler*alloc_graph*' \
//!     target/release/examples/sched_from_scratch 20
//! ```
//!
//! prints the calls; callgrind's total over them, divided by their number,
//! is the instructions one from-scratch placement takes. The ggml side of
//! the comparison is `scripts/sched_vs_ggml`.

use std::sync::Arc;

use gantry::model::decoder::DecoderHparams;
use gantry::sched::{Scheduler, SchedulerParams};
use gantry::testing::PlannedLlama;
use gantry::testing::engine::TestBufferType;
use gantry::testing::engine::mock_devices::{all_ops, cpu, gpu_with};
use gantry::{BufferType, Context, DType, GraphArena};

fn main() -> gantry::Result<()> {
    let placements: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(20);
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
    for _ in 0..placements {
        ctx.set_name(first, &name)?;
        sched.reset(&mut ctx);
        sched.alloc_graph(&mut ctx, graph)?;
    }
    println!(
        "{} nodes, {} splits: {} placements from scratch after the first ({} in all)",
        graph.n_nodes(),
        sched.n_splits(),
        placements,
        sched.placements_computed()
    );
    sched.release(&mut ctx)?;
    Ok(())
}
