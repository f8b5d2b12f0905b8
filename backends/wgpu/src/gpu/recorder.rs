//! Recording a graph's dispatches into one command encoder.

use std::sync::Arc;

use ::wgpu;
use gantry_engine::Result;

use super::bindings::{PARAMS_SIZE, STORAGE_SLOTS};
use super::context::Gpu;
use super::memory::GpuBuffer;
use super::pipeline::Pipeline;
use gantry_engine::device_state::CommandBatch;

struct Step {
    pipeline: wgpu::ComputePipeline,
    group: wgpu::BindGroup,
    params_offset: u32,
    groups: [u32; 3],
}

/// The dispatches of one graph compute: every step's parameters go into
/// one uniform buffer written once, and every step into one compute pass
/// of one command encoder, submitted once. Kept by a backend and reused, so
/// a graph computed again allocates no new GPU objects.
pub struct Recorder {
    gpu: Arc<Gpu>,
    params: Vec<u8>,
    params_buffer: Option<GpuBuffer>,
    capacity: usize,
    steps: Vec<Step>,
}

impl Recorder {
    /// An empty recorder for `gpu`.
    pub fn new(gpu: &Arc<Gpu>) -> Self {
        Self { gpu: gpu.clone(), params: Vec::new(), params_buffer: None, capacity: 0, steps: Vec::new() }
    }

    /// Number of dispatches recorded since `begin`.
    pub fn len(&self) -> usize {
        self.steps.len()
    }

    /// Whether nothing was recorded since `begin`.
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }

    /// Records one dispatch of `pipeline` over `groups` workgroups, with
    /// `params` (at most `PARAMS_SIZE` bytes) and the storage `slots`.
    pub fn push(
        &mut self,
        pipeline: &Pipeline,
        params: &[u8],
        slots: [&GpuBuffer; STORAGE_SLOTS],
        groups: [u32; 3],
    ) -> Result<()> {
        let Some(params_buffer) = self.params_buffer.as_ref() else {
            return Err(self.gpu.error("dispatch recorded before begin"));
        };
        if self.steps.len() >= self.capacity || params.len() as u64 > PARAMS_SIZE {
            return Err(self.gpu.error("more dispatches or parameters than the recorder was sized for"));
        }
        for s in slots {
            if !Arc::ptr_eq(s.gpu(), &self.gpu) {
                return Err(self.gpu.error(format!("a buffer of {} was bound on {}", s.gpu().name, self.gpu.name)));
            }
        }
        let limit = self.gpu.facts.limits.max_compute_workgroups_per_dimension;
        if groups.iter().any(|&g| g > limit) {
            return Err(self.gpu.error(format!("dispatch of {groups:?} workgroups exceeds {limit} per dimension")));
        }
        let stride = self.gpu.bindings.params_stride as usize;
        let offset = self.steps.len() * stride;
        self.params.resize(offset, 0);
        self.params.extend_from_slice(params);
        self.params.resize(offset + PARAMS_SIZE as usize, 0);
        let group = self.gpu.bindings.group(&self.gpu, params_buffer, slots)?;
        self.steps.push(Step { pipeline: pipeline.raw.clone(), group, params_offset: offset as u32, groups });
        Ok(())
    }
}

impl CommandBatch for Recorder {
    /// Starts a compute of at most `max_steps` dispatches.
    fn begin(&mut self, max_steps: usize) -> Result<()> {
        self.params.clear();
        self.steps.clear();
        let stride = self.gpu.bindings.params_stride;
        if self.params_buffer.is_none() || self.capacity < max_steps {
            let capacity = max_steps.max(16).next_power_of_two();
            let size = (capacity as u64 - 1) * stride + PARAMS_SIZE;
            self.params_buffer = None;
            self.params_buffer = Some(GpuBuffer::new_uniform(&self.gpu, size)?);
            self.capacity = capacity;
        }
        Ok(())
    }

    /// Writes the parameters, encodes every step into one compute pass and
    /// submits it; waits for the GPU when `wait`.
    fn submit(&mut self, wait: bool) -> Result<()> {
        self.write_params()?;
        let submitted = self.submit_steps(wait);
        self.steps.clear();
        submitted
    }
}

impl Recorder {
    /// Queues the write of every recorded step's parameters (before the
    /// next submission). A graph plan does this once, when it is recorded.
    pub fn write_params(&self) -> Result<()> {
        if self.steps.is_empty() {
            return Ok(());
        }
        let Some(params_buffer) = self.params_buffer.as_ref() else {
            return Err(self.gpu.error("submit before begin"));
        };
        self.gpu
            .catch("writing kernel parameters", || self.gpu.queue.write_buffer(params_buffer.raw(), 0, &self.params))
    }

    /// Encodes the recorded steps into one compute pass and submits it,
    /// keeping them (a graph plan submits the same steps again and again);
    /// waits for the GPU when `wait`.
    pub fn submit_steps(&self, wait: bool) -> Result<()> {
        if self.steps.is_empty() {
            return Ok(());
        }
        let submitted = self.gpu.submit_commands("gantry graph", |encoder| {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("gantry graph"),
                timestamp_writes: None,
            });
            for step in &self.steps {
                if step.groups.contains(&0) {
                    continue;
                }
                pass.set_pipeline(&step.pipeline);
                pass.set_bind_group(0, &step.group, &[step.params_offset]);
                pass.dispatch_workgroups(step.groups[0], step.groups[1], step.groups[2]);
            }
        })?;
        if wait { self.gpu.wait_until(&submitted) } else { Ok(()) }
    }
}
