//! A decoder model's layers spread over several devices (llama.cpp's layer
//! split): the file is mapped once on the host, then each device's share of
//! the weights is moved into buffers of that device.

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;

use gantry_backends::cpu::CpuDevice;
use gantry_engine::{BufferId, BufferType, BufferUsage, Context, Device, TensorId};

use super::{DecoderModel, DecoderWeights};
use crate::model::load::{Progress, write_weight};
use crate::model::{LoadProgress, WeightsFile};
use crate::{Error, Result};

/// Which of `n` devices each weight goes to: layer `l` (with its optional
/// norms) to device `l * n / n_layer`; the final norm and the output
/// projection (with the token embeddings when they are tied to it) to the
/// last; untied token embeddings to the first.
pub fn layer_devices(weights: &DecoderWeights, n: usize) -> Vec<(TensorId, usize)> {
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
        for t in [lw.attn_q_norm, lw.attn_k_norm, lw.attn_post_norm, lw.ffn_post_norm].into_iter().flatten() {
            out.push((t, d));
        }
    }
    out.push((weights.output_norm, last));
    out.push((weights.output, last));
    out
}

impl DecoderModel {
    /// Loads `path` with its layers spread over `devices` in order (see
    /// [`layer_devices`]; a tensor of the file that is no layer's goes to the
    /// last device): each device gets its weights in buffers of its own
    /// buffer type (a tensor larger than the type's largest buffer stays in
    /// host memory, as [`DecoderModel::load`] keeps it), and bytes a device
    /// already holds (a remote server's weight cache) are not sent. With one
    /// device this is [`DecoderModel::load`]. On error nothing is left in `ctx`.
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
                let mut made = Vec::new();
                match model.move_layers(ctx, devices, progress, &mut made) {
                    Ok(()) => Ok(model),
                    Err(e) => {
                        // The tensors first, then every buffer they were in.
                        model.loaded.unload(ctx);
                        for b in made {
                            let _ = ctx.free_buffer(b);
                        }
                        Err(e)
                    }
                }
            }
        }
    }

    fn move_layers(
        &mut self,
        ctx: &mut Context,
        devices: &[&dyn Device],
        progress: Option<&mut dyn FnMut(LoadProgress)>,
        made: &mut Vec<BufferId>,
    ) -> Result<()> {
        let _span = tracing::info_span!("move_layers", devices = devices.len()).entered();
        let mut placement = layer_devices(&self.weights, devices.len());
        let placed: HashSet<TensorId> = placement.iter().map(|&(t, _)| t).collect();
        let last = devices.len() - 1;
        placement.extend(self.loaded.iter().filter(|(_, t)| !placed.contains(t)).map(|(_, t)| (t, last)));
        let entries = self.gguf.tensor_entries()?;
        let mut report = Progress::new(&entries, progress);
        let host: Arc<dyn BufferType> = gantry_backends::cpu::buffer_type();
        for (d, device) in devices.iter().enumerate() {
            let buft = device.buffer_type();
            let mut mine = Vec::new();
            let mut oversize = Vec::new();
            for &(t, _) in placement.iter().filter(|(_, at)| *at == d) {
                let big = buft.alloc_size(&ctx.desc(t)?.layout()) > buft.max_size();
                if big { &mut oversize } else { &mut mine }.push(t);
            }
            for &t in mine.iter().chain(&oversize) {
                ctx.unplace(t);
            }
            let buffers = ctx.alloc_tensors(&mine, &buft, BufferUsage::Weights)?;
            made.extend_from_slice(buffers.buffers());
            let buffers = ctx.alloc_tensors(&oversize, &host, BufferUsage::Weights)?;
            made.extend_from_slice(buffers.buffers());
            for &t in mine.iter().chain(&oversize) {
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
        self.loaded.replace_buffers(std::mem::take(made));
        Ok(())
    }
}
