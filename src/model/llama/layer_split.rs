//! A llama model's layers spread over several devices (llama.cpp's layer
//! split): the file is mapped once on the host, then each device's share of
//! the weights is moved into buffers of that device.

use std::path::Path;

use gantry_backends::cpu::CpuDevice;
use gantry_engine::{BufferUsage, Context, Device, TensorId};

use super::{LlamaModel, LlamaWeights};
use crate::model::LoadProgress;
use crate::model::load::{Progress, write_weight};
use crate::{Error, Result};

/// Which of `n` devices each weight goes to: layer `l` to device
/// `l * n / n_layer`; the final norm and the output projection (with the
/// token embeddings when they are tied to it) to the last; untied token
/// embeddings to the first.
pub fn layer_devices(weights: &LlamaWeights, n: usize) -> Vec<(TensorId, usize)> {
    let n_layer = weights.layers.len().max(1);
    let last = n.saturating_sub(1);
    let mut out = Vec::new();
    if weights.tok_embd != weights.output {
        out.push((weights.tok_embd, 0));
    }
    for (l, lw) in weights.layers.iter().enumerate() {
        let d = l * n / n_layer;
        for t in [lw.attn_norm, lw.wq, lw.wk, lw.wv, lw.wo, lw.ffn_norm, lw.w_gate, lw.w_up, lw.w_down] {
            out.push((t, d));
        }
    }
    out.push((weights.output_norm, last));
    out.push((weights.output, last));
    out
}

impl LlamaModel {
    /// Loads `path` with its layers spread over `devices` in order (see
    /// [`layer_devices`]): each device gets its weights in buffers of its own
    /// buffer type, and bytes a device already holds (a remote server's weight
    /// cache) are not sent. With one device this is [`LlamaModel::load`].
    pub fn load_across(
        path: impl AsRef<Path>,
        ctx: &mut Context,
        devices: &[&dyn Device],
        progress: Option<&mut dyn FnMut(LoadProgress)>,
    ) -> Result<Self> {
        match devices {
            [] => Err(Error::Model("no device to load the model on".into())),
            [one] => Self::load(path, ctx, *one, progress),
            _ => {
                // Mapping costs nothing; the bytes are then moved to their devices.
                let mut model = Self::load(path, ctx, &CpuDevice::new(), None)?;
                if let Err(e) = model.move_layers(ctx, devices, progress) {
                    model.remove(ctx);
                    return Err(e);
                }
                Ok(model)
            }
        }
    }

    fn move_layers(
        &mut self,
        ctx: &mut Context,
        devices: &[&dyn Device],
        progress: Option<&mut dyn FnMut(LoadProgress)>,
    ) -> Result<()> {
        let _span = tracing::info_span!("move_layers", devices = devices.len()).entered();
        let placement = layer_devices(&self.weights, devices.len());
        let mut report = Progress::new(&self.gguf, progress);
        let mut made = Vec::new();
        for (d, device) in devices.iter().enumerate() {
            let mine: Vec<TensorId> = placement.iter().filter(|(_, at)| *at == d).map(|(t, _)| *t).collect();
            for &t in &mine {
                ctx.unplace(t);
            }
            let buffers = ctx.alloc_tensors(&mine, &device.buffer_type(), BufferUsage::Weights)?;
            made.extend_from_slice(buffers.buffers());
            for &t in &mine {
                let info = self.gguf.tensor(ctx.name(t))?;
                let data = self.gguf.tensor_data(info)?;
                write_weight(ctx, t, data, &mut report)?;
                report.tensor_done();
            }
        }
        // No tensor is left over the file's mapping.
        for &b in self.loaded.buffers() {
            ctx.free_buffer(b)?;
        }
        self.loaded.replace_buffers(made);
        Ok(())
    }

    /// Removes the model's tensors and buffers from `ctx`.
    fn remove(&self, ctx: &mut Context) {
        for (_, t) in self.loaded.iter() {
            let _ = ctx.remove(t);
        }
        for &b in self.loaded.buffers() {
            let _ = ctx.free_buffer(b);
        }
    }
}
