//! The backend layer: ggml's buffer types, buffers, backends (streams),
//! devices, platforms and registry, as traits and handles.
//!
//! The engine knows backends only through these traits; `gantry-backends`
//! implements them for the CPU and for GPUs. Beside them: `plan` (graph
//! plans and the table backends keep them in), `multi_buffer` (one handle
//! over several chunks), `copy` (`tensor_copy_async`), `tensor_read`
//! (reads into host memory that do not block, staged by the backend).

mod alignment;
mod buffer;
mod buffer_type;
mod copy;
mod device;
mod events;
mod extension;
mod host_memory;
mod multi_buffer;
mod plan;
mod platform;
mod registry;
mod stream;
mod tensor_read;

pub use alignment::{HOST_ALIGNMENT, MAPPED_ALIGNMENT};
pub use buffer::{Buffer, BufferUsage, check_range};
pub use buffer_type::{BufferType, same_buffer_type};
pub use copy::{copy_or_fallback, tensor_copy_async, tensor_copy_async_with};
pub use device::{Device, DeviceCaps, DeviceProps, DeviceType, MemoryInfo};
pub use events::{EventState, EventTable};
pub use extension::{AbortCallback, SetAbortCallback, SetThreadCount, WeightRepack};
pub use host_memory::HostMemory;
pub use multi_buffer::MultiBuffer;
pub use plan::{GraphPlan, PlanTable, PlannedNodes};
pub use platform::{Platform, device_extension, platform_extension};
pub use registry::Registry;
pub use stream::{Backend, ComputeStatus};
pub use tensor_read::{ReadStaging, StagedRead, TensorRead};
