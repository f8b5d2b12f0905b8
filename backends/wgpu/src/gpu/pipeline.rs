//! Compiling WGSL kernels into compute pipelines.

use ::wgpu;
use gantry_engine::Result;

use super::context::Gpu;

/// A compiled compute kernel (entry point `main`) over the shared bind-group
/// layout. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Pipeline {
    pub(super) raw: wgpu::ComputePipeline,
}

impl Gpu {
    /// Compiles `source`; a WGSL error is an `Err` quoting the compiler.
    pub fn compile(&self, label: &str, source: &str) -> Result<Pipeline> {
        let what = format!("compiling kernel {label}");
        let raw = self.catch_compile(&what, || {
            let module = self.device.create_shader_module(wgpu::ShaderModuleDescriptor {
                label: Some(label),
                source: wgpu::ShaderSource::Wgsl(source.into()),
            });
            self.device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(label),
                layout: Some(&self.bindings.pipeline_layout),
                module: &module,
                entry_point: Some("main"),
                compilation_options: wgpu::PipelineCompilationOptions {
                    constants: &[],
                    // Every kernel writes its shared memory before reading it.
                    zero_initialize_workgroup_memory: false,
                },
                cache: None,
            })
        })?;
        Ok(Pipeline { raw })
    }
}
