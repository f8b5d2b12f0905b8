//! Devices: what a platform found on the machine.

use std::any::{Any, TypeId};
use std::sync::Arc;

use gantry_arenas::{EventId, TensorId};

use crate::{Backend, Buffer, BufferType, Context, Error, HostMemory, Result};

/// The kind of a device (ggml's `ggml_backend_dev_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeviceType {
    /// The host CPU.
    Cpu,
    /// A discrete GPU with its own memory.
    Gpu,
    /// An integrated GPU sharing host memory.
    IGpu,
    /// An accelerator used alongside the CPU (BLAS, NPU).
    Accel,
}

impl DeviceType {
    /// A short name (`"CPU"`, `"GPU"`, `"IGPU"`, `"ACCEL"`).
    pub const fn name(self) -> &'static str {
        match self {
            DeviceType::Cpu => "CPU",
            DeviceType::Gpu => "GPU",
            DeviceType::IGpu => "IGPU",
            DeviceType::Accel => "ACCEL",
        }
    }
}

/// Memory of a device, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MemoryInfo {
    /// Free now.
    pub free: usize,
    /// In total.
    pub total: usize,
}

/// What a device can do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DeviceCaps {
    /// Asynchronous compute and copies.
    pub async_compute: bool,
    /// A pinned host buffer type for faster transfers.
    pub host_buffer: bool,
    /// Buffers over caller memory.
    pub buffer_from_host_ptr: bool,
    /// Events for synchronization between streams.
    pub events: bool,
}

/// Everything a user may want to print about a device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceProps {
    /// Name.
    pub name: String,
    /// Description (model name).
    pub description: String,
    /// Memory.
    pub memory: MemoryInfo,
    /// Kind.
    pub device_type: DeviceType,
    /// Capabilities.
    pub caps: DeviceCaps,
}

/// A device (ggml's `ggml_backend_device`).
pub trait Device: Send + Sync + 'static {
    /// A short name, unique in a registry (`"CPU"`, `"Vulkan0"`).
    fn name(&self) -> &str;

    /// A longer description (the CPU or GPU model).
    fn description(&self) -> &str;

    /// Free and total memory.
    fn memory(&self) -> MemoryInfo;

    /// The kind of device.
    fn device_type(&self) -> DeviceType;

    /// Capabilities.
    fn caps(&self) -> DeviceCaps;

    /// Whether the device is a software implementation of a GPU (lavapipe,
    /// WARP): usable when named, but slower than the CPU backend, so never
    /// chosen by default ([`crate::Registry::backends_by_priority`],
    /// [`crate::Registry::init_best`]).
    fn is_software(&self) -> bool {
        false
    }

    /// Name, description, memory, type and capabilities together.
    fn props(&self) -> DeviceProps {
        DeviceProps {
            name: self.name().to_owned(),
            description: self.description().to_owned(),
            memory: self.memory(),
            device_type: self.device_type(),
            caps: self.caps(),
        }
    }

    /// Starts a backend (stream) on this device. `params` is backend-specific.
    fn init_backend(&self, params: Option<&str>) -> Result<Arc<dyn Backend>>;

    /// The device's own buffer type.
    fn buffer_type(&self) -> Arc<dyn BufferType>;

    /// A host buffer type for faster transfers to this device, if it has one.
    fn host_buffer_type(&self) -> Option<Arc<dyn BufferType>> {
        None
    }

    /// A buffer over caller memory (which it does not own), where supported.
    /// Tensors in it should be at most `max_tensor_size` bytes.
    fn buffer_from_host_memory(&self, memory: HostMemory, max_tensor_size: usize) -> Result<Box<dyn Buffer>> {
        let _ = (memory, max_tensor_size);
        Err(Error::Unsupported(format!("device {} cannot make buffers from host memory", self.name())))
    }

    /// The buffer type that buffers made by [`Device::buffer_from_host_memory`]
    /// are registered under in a [`Context`] (ggml's host-pointer buffer type,
    /// e.g. the CPU's mapped-memory type, whose alignment fits the tensors of
    /// a mapped GGUF file). Defaults to [`Device::buffer_type`].
    fn host_memory_buffer_type(&self) -> Arc<dyn BufferType> {
        self.buffer_type()
    }

    /// Whether a backend on this device can compute `tensor`'s op with its
    /// dtypes and layouts.
    fn supports_op(&self, ctx: &Context, tensor: TensorId) -> bool;

    /// Whether this device can read and write buffers of `buft`.
    fn supports_buft(&self, buft: &dyn BufferType) -> bool;

    /// Whether the device wants to compute `tensor` even though its weights
    /// are in host memory (worth the transfer, e.g. large batches).
    fn offload_op(&self, ctx: &Context, tensor: TensorId) -> bool {
        let _ = (ctx, tensor);
        false
    }

    /// A new event, to be recorded on this device's backends.
    fn event_new(&self) -> Result<EventId> {
        Err(Error::Unsupported(format!("device {} has no events", self.name())))
    }

    /// Frees an event.
    fn event_free(&self, event: EventId) -> Result<()> {
        let _ = event;
        Ok(())
    }

    /// Waits on the host until `event` has completed.
    fn event_synchronize(&self, event: EventId) -> Result<()> {
        let _ = event;
        Err(Error::Unsupported(format!("device {} has no events", self.name())))
    }

    /// An optional feature of this device's platform, looked up by its type
    /// (see [`crate::device_extension`]): what [`crate::Platform::extension`]
    /// gives, reached from a device or a backend's device where the platform
    /// is not at hand (ggml reaches `get_proc_address` through a device's
    /// `ggml_backend_dev_backend_reg`). The default has none.
    fn extension(&self, type_id: TypeId) -> Option<&(dyn Any + Send + Sync)> {
        let _ = type_id;
        None
    }

    /// For downcasting to the concrete type.
    fn as_any(&self) -> &dyn Any;
}
