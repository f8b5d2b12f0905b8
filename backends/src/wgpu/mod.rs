//! The wgpu backend (feature `wgpu`): every GPU wgpu reaches (Vulkan, Metal,
//! DX12, GL) as a Gantry device, with WGSL compute kernels.
//!
//! - [`platform()`] finds one device per physical GPU ([`WgpuPlatform`]).
//! - [`WgpuBufferType`] / [`WgpuBuffer`]: tensors in storage buffers.
//! - [`WgpuBackend`]: computes a graph as one submission of one command
//!   encoder; `supports_op` is false for anything without a kernel, so the
//!   scheduler leaves it to another backend.
//!
//! Only the `gpu` module calls wgpu (its API changes every major version).

mod backend;
mod buffer;
mod device;
pub mod gpu;
pub mod kernels;
mod platform;

pub use backend::WgpuBackend;
pub use buffer::{WgpuBuffer, WgpuBufferType};
pub use device::{WgpuDevice, device_type_of};
pub use platform::{WgpuPlatform, platform};
