//! The one bind-group layout every kernel uses, and a cache of bind groups.
//!
//! Every kernel sees the same nine bindings: 0 is the parameter block (a
//! uniform with a dynamic offset, one block per dispatch), 1 to 8 are the
//! destination and up to seven sources (SSM_SCAN has seven; eight storage
//! buffers per stage is WebGPU's default limit), always whole storage buffers bound
//! read-write (one usage, so the same buffer may sit in several slots: the
//! graph allocator puts a node and its sources in one buffer). Tensor
//! offsets travel in the parameters, so a bind group depends only on which
//! buffers fill the slots, and a graph computed again reuses them all.

use std::num::NonZeroU64;

use ::wgpu;
use gantry_engine::Result;

use super::context::Gpu;

use super::memory::GpuBuffer;
use gantry_engine::device_state::LazyCache;

/// Bytes of one kernel's parameter block (`Params` in the WGSL prelude).
pub const PARAMS_SIZE: u64 = 352;
/// Storage slots: destination and seven sources.
pub const STORAGE_SLOTS: usize = 8;

/// Which buffers fill the bindings: parameters, then the storage slots.
type BindKey = [u64; 1 + STORAGE_SLOTS];

/// The shared layouts and the bind-group cache of one GPU.
pub struct Bindings {
    pub(super) group_layout: wgpu::BindGroupLayout,
    pub(super) pipeline_layout: wgpu::PipelineLayout,
    /// Bytes between parameter blocks: `PARAMS_SIZE` rounded up to the
    /// device's uniform offset alignment.
    pub params_stride: u64,
    cache: LazyCache<BindKey, wgpu::BindGroup>,
}

impl Bindings {
    pub(super) fn new(device: &wgpu::Device, uniform_align: u32) -> Self {
        let mut entries = vec![wgpu::BindGroupLayoutEntry {
            binding: 0,
            visibility: wgpu::ShaderStages::COMPUTE,
            ty: wgpu::BindingType::Buffer {
                ty: wgpu::BufferBindingType::Uniform,
                has_dynamic_offset: true,
                min_binding_size: NonZeroU64::new(PARAMS_SIZE),
            },
            count: None,
        }];
        for slot in 0..STORAGE_SLOTS {
            entries.push(wgpu::BindGroupLayoutEntry {
                binding: 1 + slot as u32,
                visibility: wgpu::ShaderStages::COMPUTE,
                ty: wgpu::BindingType::Buffer {
                    ty: wgpu::BufferBindingType::Storage { read_only: false },
                    has_dynamic_offset: false,
                    min_binding_size: None,
                },
                count: None,
            });
        }
        let group_layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some("gantry kernel bindings"),
            entries: &entries,
        });
        let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some("gantry kernel layout"),
            bind_group_layouts: &[Some(&group_layout)],
            immediate_size: 0,
        });
        let align = u64::from(uniform_align.max(1));
        Self {
            group_layout,
            pipeline_layout,
            params_stride: PARAMS_SIZE.div_ceil(align) * align,
            cache: LazyCache::default(),
        }
    }

    /// The bind group for `params` and `slots` on `gpu` (whose bindings
    /// these are), made on first use.
    pub(super) fn group(
        &self,
        gpu: &Gpu,
        params: &GpuBuffer,
        slots: [&GpuBuffer; STORAGE_SLOTS],
    ) -> Result<wgpu::BindGroup> {
        let mut key: BindKey = [params.id(); 1 + STORAGE_SLOTS];
        for (k, b) in key[1..].iter_mut().zip(slots) {
            *k = b.id();
        }
        self.cache.get_or_try_insert_with(&key, || {
            gpu.catch("making a bind group", || {
                let mut entries = Vec::with_capacity(1 + STORAGE_SLOTS);
                entries.push(wgpu::BindGroupEntry {
                    binding: 0,
                    resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                        buffer: params.raw(),
                        offset: 0,
                        size: NonZeroU64::new(PARAMS_SIZE),
                    }),
                });
                for (i, b) in slots.iter().enumerate() {
                    entries.push(wgpu::BindGroupEntry { binding: 1 + i as u32, resource: b.raw().as_entire_binding() });
                }
                gpu.device.create_bind_group(&wgpu::BindGroupDescriptor {
                    label: None,
                    layout: &self.group_layout,
                    entries: &entries,
                })
            })
        })
    }

    /// Drops every bind group that holds buffer `id` (the buffer is going away).
    pub(super) fn forget_buffer(&self, id: u64) {
        self.cache.retain(|k, _| !k.contains(&id));
    }

    /// Number of cached bind groups (for tests).
    pub fn cached_groups(&self) -> usize {
        self.cache.len()
    }
}
