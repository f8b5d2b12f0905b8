//! The wgpu backend (feature `wgpu`): every GPU wgpu reaches (Vulkan, Metal,
//! DX12, GL) as a Gantry device, with WGSL compute kernels.
//!
//! - [`platform()`] finds one device per physical GPU ([`WgpuPlatform`]).
//! - [`WgpuBufferType`] / [`WgpuBuffer`]: tensors in storage buffers.
//! - [`WgpuBackend`]: computes a graph as one submission of one command
//!   encoder; `supports_op` is false for anything without a kernel, so the
//!   scheduler leaves it to another backend. Its graph plans (`plan`)
//!   record the pipelines, bind groups, parameters and dispatch list once.
//!
//! Only the `gpu` module calls wgpu (its API changes every major version).
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
//! a time with atomics); MUL_MAT and GET_ROWS from Q4_0, Q4_1, Q5_0, Q5_1,
//! Q8_0, Q2_K, Q3_K, Q4_K, Q5_K and Q6_K, dequantized in the shader; CPY and
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

pub use backend::WgpuBackend;
pub use buffer::{WgpuBuffer, WgpuBufferType};
pub use device::{WgpuDevice, device_type_of};
pub use platform::{WgpuPlatform, platform};
