//! The wgpu backend (feature `wgpu`): every GPU wgpu reaches (Vulkan, Metal,
//! DX12, GL) as a Gantry device, with WGSL compute kernels.
//!
//! - [`platform()`] finds one device per physical GPU ([`WgpuPlatform`]);
//!   [`WgpuPlatform::from_host`] makes the one device of a host program's
//!   own adapter, device and queue instead (below).
//! - [`WgpuBufferType`] / [`WgpuBuffer`]: tensors in storage buffers;
//!   [`WgpuDevice::tensor_storage`] hands a tensor's buffer, offset and
//!   size ([`TensorStorage`]) to the host for its own bind groups; a
//!   buffer stages the engine's reads that do not block
//!   ([`gantry_engine::TensorRead`]: begun, submitted, polled, taken)
//!   through a mappable buffer the read's slot keeps ([`gpu::GpuReadBack`]).
//! - [`WgpuBackend`]: computes a graph as one submission of one command
//!   encoder; `supports_op` is false for anything without a kernel, so the
//!   scheduler leaves it to another backend. Its graph plans (`plan`)
//!   record the pipelines, bind groups, parameters and dispatch list once.
//!
//! Only the `gpu` module calls wgpu (its API changes every major version).
//! [`wgpu`] is the wgpu crate the backend is built with (re-exported, so a
//! host uses the same version: its handles are the backend's types).
//!
//! **The host's device.** A host (a game engine) that opened its own wgpu
//! device hands Gantry the adapter, device and queue
//! ([`WgpuPlatform::from_host`]); Gantry checks the device's limits
//! against what its kernels need (an `Err` names each limit short), then
//! submits to the host's queue beside the host's work. The rules:
//! submissions interleave in the order they are made, and queue order is
//! the only ordering between Gantry's work and the host's (a host pass
//! submitted after Gantry's compute reads its results); Gantry's waits
//! (`synchronize`, events, reads) are for points of its own submissions,
//! so work the host submits later never holds Gantry up, and Gantry never
//! waits for the whole queue; Gantry's wgpu errors are caught with
//! per-thread error scopes, and the host's uncaptured-error handler is
//! left alone. Any thread may submit on either side.
//!
//! Kernels: [`kernels`] plans each node (which kernel, its bindings and
//! grid; one file per op family) and composes its WGSL (`kernels::shader`):
//! a prelude, the constants the kernel shares with its plan (spelled once,
//! in Rust: `kernels::shared_constants`), helper libraries such as a
//! dequantizer (`shaders/deq_*.wgsl`, the K-quants' `scale_min_k4.wgsl`),
//! then the kernel's body (`shaders/<kernel>.wgsl`).
//!
//! Coverage: every op of the core set in F32, F16 and BF16 (F16 and BF16
//! results need no `shader-f16`: without it they are written half a word at
//! a time with atomics); MUL_MAT, MUL_MAT_ID and GET_ROWS from Q4_0, Q4_1,
//! Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K and the lookup types
//! IQ4_NL, IQ4_XS and MXFP4, dequantized in the shader; the vision, Mamba
//! and small ops `docs/ops.md` lists for wgpu; CPY and
//! SET_ROWS from F32 into Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0 with ggml's
//! reference quantizers. Not covered (so `supports_op` is false): copies
//! between quantized dtypes, the activation formats Q8_1 and Q8_K, heads
//! longer than 512 in FLASH_ATTN_EXT, tensors over 2^32 elements or with
//! strides that are not whole elements.
//!
//! Environment: `WGPU_BACKEND=vulkan` (or `gl`, `metal`, `dx12`) restricts
//! the APIs searched. Tests run on Mesa's lavapipe (`mesa-vulkan-drivers`)
//! where there is no GPU, and skip with a message where there is no adapter.

mod backend;
mod buffer;
mod device;
pub mod gpu;
pub mod kernels;
mod plan;
mod platform;
mod read_back;

/// The wgpu crate the backend is built with: a host builds its adapter,
/// device and queue with it (`gantry::wgpu` in the facade).
pub use ::wgpu;
pub use backend::WgpuBackend;
pub use buffer::{WgpuBuffer, WgpuBufferType};
pub use device::{WgpuDevice, device_type_of};
pub use gpu::TensorStorage;
pub use platform::{WgpuPlatform, platform};
