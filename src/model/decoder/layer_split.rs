//! A decoder model's layers spread over several devices (llama.cpp's layer
//! split): the file is mapped once on the host, then each device's share of
//! the weights is moved into buffers of that device.

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;

use gantry_backends::cpu::{self, CpuDevice};
use gantry_engine::{BufferId, BufferType, BufferUsage, Context, Device, TensorId, WeightRepack, device_extension};

use super::{DecoderHparams, DecoderModel, DecoderWeights, LayerCounts};
use crate::model::gguf::Gguf;
use crate::model::load::{Progress, write_weight};
use crate::model::{HostTensors, LoadOptions, LoadProgress, WeightsFile};
use crate::{Error, Result};

/// Which device each weight goes to: layer `l` (with its optional norms) to
/// `counts.device_of(l)`; the final norm and the output projection (with the
/// token embeddings when they are tied to it) with the last layer; untied
/// token embeddings with the first.
pub fn layer_devices(weights: &DecoderWeights, counts: &LayerCounts) -> Vec<(TensorId, usize)> {
    let n_layer = weights.layers.len();
    let first = counts.device_of(0);
    let last = counts.device_of(n_layer.saturating_sub(1));
    let mut out = Vec::new();
    if weights.tok_embd != weights.output {
        out.push((weights.tok_embd, first));
    }
    for (l, lw) in weights.layers.iter().enumerate() {
        let d = counts.device_of(l);
        out.extend(lw.tensors().map(|t| (t, d)));
    }
    // Llama 3's rope factors are read by every layer's rope: with the first.
    if let Some(f) = weights.rope_freqs {
        out.push((f, first));
    }
    out.push((weights.output_norm, last));
    out.push((weights.output, last));
    out
}

impl DecoderModel {
    /// Loads `path` with its layers spread evenly over `devices` in order
    /// ([`LayerCounts::even`]; see [`DecoderModel::load_split`]).
    pub fn load_across(
        path: impl AsRef<Path>,
        ctx: &mut Context,
        devices: &[&dyn Device],
        progress: Option<&mut dyn FnMut(LoadProgress)>,
    ) -> Result<Self> {
        let n_layer = Self::layer_count(path.as_ref())?;
        Self::load_split(path, ctx, devices, &LayerCounts::even(n_layer, devices.len()), progress)
    }

    /// The number of layers of the decoder model in `path` (its metadata only).
    pub fn layer_count(path: &Path) -> Result<usize> {
        Ok(DecoderHparams::from_gguf(&Gguf::open(path)?)?.n_layer)
    }

    /// Loads `path` with `counts.counts()[d]` layers on `devices[d]` (see
    /// [`layer_devices`]; a tensor of the file that is no layer's goes with
    /// the last layer): each device gets its weights in buffers of its own
    /// buffer type (a tensor larger than the type's largest buffer stays in
    /// host memory, as [`DecoderModel::load`] keeps it), and bytes a device
    /// already holds (a remote server's weight cache) are not sent. With all
    /// layers on one device this is [`DecoderModel::load`] for it. On error
    /// nothing is left in `ctx`.
    pub fn load_split(
        path: impl AsRef<Path>,
        ctx: &mut Context,
        devices: &[&dyn Device],
        counts: &LayerCounts,
        progress: Option<&mut dyn FnMut(LoadProgress)>,
    ) -> Result<Self> {
        let options = LoadOptions { progress, oversize: Some(cpu::buffer_type()), ..LoadOptions::default() };
        Self::load_split_with(path, ctx, devices, counts, options)
    }

    /// [`DecoderModel::load_split`] with the loader's options as given: its
    /// progress callback, and whether a CPU device's share is repacked
    /// ([`LoadOptions::repack`]); tensors too large for a device's buffers
    /// go to `options.oversize` when there is one device, to host memory
    /// when there are several.
    pub fn load_split_with(
        path: impl AsRef<Path>,
        ctx: &mut Context,
        devices: &[&dyn Device],
        counts: &LayerCounts,
        options: LoadOptions<'_>,
    ) -> Result<Self> {
        if counts.counts().len() != devices.len() {
            return Err(Error::Model(format!(
                "{} layer counts given for {} devices",
                counts.counts().len(),
                devices.len()
            )));
        }
        let n_layer = Self::layer_count(path.as_ref())?;
        if counts.n_layer() != n_layer {
            return Err(Error::Model(format!(
                "layer counts {counts} add up to {} layers, but {} has {n_layer}",
                counts.n_layer(),
                path.as_ref().display()
            )));
        }
        let used: Vec<usize> = (0..devices.len()).filter(|&d| counts.counts()[d] > 0).collect();
        match (devices, used.as_slice()) {
            ([], _) => Err(Error::Model("no device to load the model on".into())),
            (_, [one]) => Self::load_with(path, ctx, devices[*one], options),
            _ => {
                // Mapping costs nothing; the bytes are then moved to their devices
                // (and repacked there for a CPU device's share).
                let LoadOptions { progress, repack, use_mmap, host_tensors, .. } = options;
                let mapped = LoadOptions { repack: false, use_mmap, ..LoadOptions::default() };
                let mut model = Self::load_with(path, ctx, &CpuDevice::new(), mapped)?;
                let mut made = Vec::new();
                let moving = Moving { progress, repack, host_tensors };
                match model.move_layers(ctx, devices, counts, moving, &mut made) {
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
        counts: &LayerCounts,
        Moving { progress, repack, host_tensors }: Moving<'_>,
        made: &mut Vec<BufferId>,
    ) -> Result<()> {
        let _span = tracing::info_span!("move_layers", devices = devices.len(), layers = %counts).entered();
        let mut placement = layer_devices(&self.weights, counts);
        let placed: HashSet<TensorId> = placement.iter().map(|&(t, _)| t).collect();
        let last = counts.device_of(self.weights.layers.len().saturating_sub(1));
        placement.extend(self.loaded.iter().filter(|(_, t)| !placed.contains(t)).map(|(_, t)| (t, last)));
        let entries = self.gguf.tensor_entries()?;
        let mut report = Progress::new(&entries, progress);
        let host: Arc<dyn BufferType> = cpu::buffer_type();
        for (d, device) in devices.iter().enumerate() {
            let buft = device.buffer_type();
            // A CPU's weight matrices go repacked (see `LoadOptions::repack`).
            let repacking = repack.then(|| device_extension::<WeightRepack>(*device)).flatten();
            let mut mine = Vec::new();
            let mut oversize = Vec::new();
            let mut repacked = Vec::new();
            let mut host_repacked = Vec::new();
            for &(t, _) in placement.iter().filter(|(_, at)| *at == d) {
                let layout = ctx.desc(t)?.layout();
                let big = buft.alloc_size(&layout) > buft.max_size();
                let kept = !buft.is_host() && host_tensors.contains(ctx.name(t));
                if repacking.is_some_and(|r| (r.repacks)(&layout)) {
                    repacked.push(t);
                } else if kept && repack && cpu::repacks_layout(&layout) {
                    host_repacked.push(t);
                } else if big || kept {
                    oversize.push(t);
                } else {
                    mine.push(t);
                }
            }
            for &t in mine.iter().chain(&oversize).chain(&repacked).chain(&host_repacked) {
                ctx.unplace(t);
            }
            let buffers = ctx.alloc_tensors(&mine, &buft, BufferUsage::Weights)?;
            made.extend_from_slice(buffers.buffers());
            let buffers = ctx.alloc_tensors(&oversize, &host, BufferUsage::Weights)?;
            made.extend_from_slice(buffers.buffers());
            if let Some(r) = repacking {
                let buffers = ctx.alloc_tensors(&repacked, &(r.buffer_type)(), BufferUsage::Weights)?;
                made.extend_from_slice(buffers.buffers());
            }
            let buffers = ctx.alloc_tensors(&host_repacked, &cpu::repack_buffer_type(), BufferUsage::Weights)?;
            made.extend_from_slice(buffers.buffers());
            for &t in mine.iter().chain(&oversize).chain(&repacked).chain(&host_repacked) {
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

/// What [`DecoderModel::move_layers`] takes of the loader's options.
struct Moving<'a> {
    progress: Option<&'a mut dyn FnMut(LoadProgress)>,
    /// A CPU device's share goes repacked, and so do host-kept tensors the CPU repacks.
    repack: bool,
    /// Tensors kept in host memory whatever device their layer is on.
    host_tensors: HostTensors,
}
