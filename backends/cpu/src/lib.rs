//! The CPU backend: aligned host buffers, buffers over caller memory
//! (mapped model files), a thread pool with a settable thread count (its own
//! spinning pool, a rayon pool, or the host's job system), an abort
//! callback, and kernels for every op of the engine's op set in F32, F16 and
//! BF16, with quantized weights (ggml's block types) in the products and
//! row lookups.
//!
//! - The backend: `platform` (with the thread-count and abort-callback
//!   extensions), `device`, `backend` (graphs node by node, or a graph plan's
//!   steps), `buffer` over `aligned` memory, `plan` (graph plans: nodes
//!   checked, task split and work buffer sized once), `compute_state` (pool,
//!   scratch and [`KernelMemory`] — what kernels keep between nodes, ROPE's
//!   angle tables among it — behind one lock), `jobs` ([`JobSystem`]: the
//!   threads kernels run on), `spin_pool` (the pool whose workers stay awake
//!   while a graph computes), `parallel` / `tasks` / `home_ranges` /
//!   `first_error` (splitting a kernel's work), `abort`, `profiled` (timing
//!   nodes and tasks for a profiler), `sysinfo`, `optimize` (the backend's
//!   `graph_optimize`: RMS_NORM + MUL, ROPE + SET_ROWS, products of one
//!   activation), `fused` (computing a fused group) and `repack_buffer`
//!   (`CPU_REPACK`: weights kept in the layout the quantized kernels read).
//! - `ops/`: the kernels, one file per op family (`binary`, `unary`, `glu`,
//!   `copy`, `concat_repeat`, `rows`, `reduce`, `norm`, `softmax`, `rope`
//!   with `rope_angles`, `mul_mat`, `mul_mat_quant`, `repacked`,
//!   `flash_attn`; fused groups: `rms_norm_mul`, `rope_set_rows`,
//!   `mul_mat_shared`), `bound` (a node's tensors bound to their memory),
//!   and the dispatch from an op to its kernel.
//! - `simd/`: the vector primitives the op kernels are built from (`dot`,
//!   `axpy`, `reduce`, `exp`, `convert`), multiversioned by CPU feature;
//!   `prefetch`: software prefetch into L2 for the streaming kernels.
//! - [`float_matvec`]: the streaming F16/F32 mat-vec of one-token products.
//! - `sgemm`: the F32 GEMM of F32/F16/BF16 products with more columns
//!   (packed operands, AVX-512 / AVX2 / portable micro-kernels, blocks from
//!   the caches, C split over the job system's tasks).
//! - [`quant`]: the quantized kernels (activation quantizers, integer dots,
//!   the quantized mat-mul driver, repacked weights, row conversions).
//! - [`read_speed`]: the memory floor's read loop; `mapped_file`: read-only
//!   file mappings ([`map_read_only`]) for weights read in place.
//! - `isa`: [`Isa`], the instruction-set paths of `float_matvec`, `quant`
//!   and `sgemm` chosen at run time (and capped by `GANTRY_CPU_ISA`), and one
//!   macro per path that compiles a function with its target features (each
//!   feature set spelled once).
//!
//! ```
//! use gantry_cpu::CpuBackend;
//! use gantry_engine::{Backend, BufferUsage, Context, DType, GraphArena};
//!
//! let backend = CpuBackend::with_threads(2)?;
//! let mut ctx = Context::new();
//! let a = ctx.tensor(DType::F32, [3, 2])?;
//! let b = ctx.tensor(DType::F32, [3])?;
//! let y = ctx.add(a, b)?;
//! let arena = GraphArena::new();
//! let graph = ctx.build_graph(&arena, &[y])?;
//! ctx.alloc_tensors(&[a, b, y], &gantry_cpu::buffer_type(), BufferUsage::Any)?;
//! ctx.set_f32(a, &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0])?;
//! ctx.set_f32(b, &[10.0, 20.0, 30.0])?;
//! backend.graph_compute(&ctx, graph).into_result()?;
//! assert_eq!(ctx.read_f32(y)?, vec![11.0, 22.0, 33.0, 14.0, 25.0, 36.0]);
//! # Ok::<(), gantry_engine::Error>(())
//! ```

mod abort;
mod aligned;
mod backend;
mod buffer;
mod compute_state;
mod device;
mod first_error;
pub mod float_matvec;
mod fused;
mod home_ranges;
pub(crate) mod isa;
mod jobs;
mod mapped_file;
pub(crate) mod ops;
mod optimize;
pub(crate) mod parallel;
mod plan;
mod platform;
mod prefetch;
mod profiled;
pub mod quant;
pub mod read_speed;
mod repack_buffer;
pub(crate) mod sgemm;
pub(crate) mod simd;
mod spin_pool;
mod sysinfo;
mod tasks;

use gantry_engine::{Context, TensorId};

pub use abort::{AbortSlot, Stop, run_nodes};
pub use aligned::{AlignedBytes, CPU_ALIGNMENT};
pub use backend::CpuBackend;
pub use buffer::{CpuBuffer, CpuBufferType, HostMemoryBuffer, MAPPED_ALIGNMENT, buffer_type, mapped_buffer_type};
pub use compute_state::{ComputeState, KernelMemory, SharedComputeState, WorkerPool};
pub use device::CpuDevice;
pub use first_error::FirstError;
pub use gantry_engine::{EventState, EventTable};
pub use home_ranges::{HomeRanges, MAX_HOMES};
pub use isa::{ISA_CAP_ENV, Isa, IsaCap, cpu_features, isa_cap, parse_isa_cap};
pub use jobs::JobSystem;
pub use mapped_file::map_read_only;
pub use platform::CpuPlatform;
/// The rayon crate the CPU backend is built with, so a host hands
/// [`CpuBackend::with_pool`] a pool of the same version.
pub use rayon;
pub use repack_buffer::{RepackBuffer, RepackBufferType, RepackedStack, repack_buffer_type, repacks_layout};
pub use spin_pool::{HOT_SPIN, IDLE_SPIN, SpinPool, Team};
pub use sysinfo::max_threads;
pub use tasks::TaskCounter;

/// Whether the CPU kernels can compute `tensor`: its op with its source
/// dtypes. Exactly what [`CpuBackend::compute_graph`] accepts, so other
/// devices that reuse the CPU kernels over host-addressable memory can
/// answer `supports_op` with it.
pub fn supports_op(ctx: &Context, tensor: TensorId) -> bool {
    ops::supports_op(ctx, tensor)
}
