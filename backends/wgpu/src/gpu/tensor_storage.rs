//! A tensor's bytes in a storage buffer, as a host binds them in its own
//! passes.

use std::num::NonZeroU64;

use ::wgpu;

use super::memory::GpuBuffer;

/// Where a tensor's bytes are on the GPU: a range of one of Gantry's
/// storage buffers ([`WgpuDevice::tensor_storage`](crate::WgpuDevice::tensor_storage)).
///
/// The buffer was made with `STORAGE | COPY_SRC | COPY_DST`, so a host may
/// bind the range as a storage buffer (read-only or read-write) in a compute
/// or render pass, or copy from and to it; it cannot be mapped, nor bound as
/// a vertex, index or uniform buffer. `offset` is a multiple of the
/// device's `min_storage_buffer_offset_alignment`, so the range can be
/// bound as it is ([`TensorStorage::binding`]).
///
/// The handle keeps the buffer's memory alive, not the tensor: once the
/// tensor's placement changes (the scheduler allocates another graph in its
/// compute memory, `release`, or the weights' buffer is freed) the range
/// holds other data.
#[derive(Debug, Clone)]
pub struct TensorStorage {
    /// The storage buffer holding the tensor (a clone of Gantry's handle).
    pub buffer: wgpu::Buffer,
    /// The tensor's first byte in `buffer`.
    pub offset: u64,
    /// The tensor's bytes.
    pub size: u64,
}

impl TensorStorage {
    /// The range as a binding: `size` rounded up to 4 bytes, as storage
    /// bindings require (the bytes past the tensor in its last word belong
    /// to whatever follows it; a shader reading whole words sees them).
    ///
    /// ```no_run
    /// # fn f(storage: &gantry_wgpu::TensorStorage, layout: &gantry_wgpu::wgpu::BindGroupLayout, device: &gantry_wgpu::wgpu::Device) {
    /// use gantry_wgpu::wgpu;
    /// let group = device.create_bind_group(&wgpu::BindGroupDescriptor {
    ///     label: Some("the model's output"),
    ///     layout,
    ///     entries: &[wgpu::BindGroupEntry { binding: 0, resource: wgpu::BindingResource::Buffer(storage.binding()) }],
    /// });
    /// # }
    /// ```
    pub fn binding(&self) -> wgpu::BufferBinding<'_> {
        wgpu::BufferBinding {
            buffer: &self.buffer,
            offset: self.offset,
            size: NonZeroU64::new(self.size.div_ceil(wgpu::COPY_BUFFER_ALIGNMENT) * wgpu::COPY_BUFFER_ALIGNMENT),
        }
    }
}

impl GpuBuffer {
    /// `size` bytes at `offset` of this buffer, for a host to bind.
    pub fn storage(&self, offset: u64, size: u64) -> TensorStorage {
        TensorStorage { buffer: self.raw().clone(), offset, size }
    }
}
