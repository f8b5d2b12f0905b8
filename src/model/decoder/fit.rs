//! Fitting a decoder under memory budgets (what llama.cpp's
//! `llama_params_fit` does): how many layers each device takes so that its
//! weights, its layers' KV cache and its compute memory stay within the
//! device's budget.
//!
//! Devices are filled in priority order: each takes as many of the next
//! layers as fit, the rest go on to the next device (the CPU last). The
//! input embeddings travel with the first layer and the output projection
//! with the last (see [`super::layer_split`]). The fit works from the file's
//! tensor sizes alone, before anything is loaded; the scheduler's own budget
//! check ([`gantry_engine::sched::budget`]) then holds the loaded model to
//! the same budgets with the compute memory it really plans.

use std::fmt;

use gantry_engine::DType;

use super::DecoderHparams;
use crate::model::HostTensors;
use crate::model::gguf::Gguf;
use crate::{Error, Result};

/// Layers per device, in the devices' order: device `d` holds the
/// `counts[d]` layers after those of the devices before it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayerCounts {
    counts: Vec<usize>,
}

impl LayerCounts {
    /// Counts as given (one per device).
    pub fn new(counts: Vec<usize>) -> Self {
        Self { counts }
    }

    /// `n_layer` layers spread evenly over `n_devices` (layer `l` on device
    /// `l * n_devices / n_layer`, llama.cpp's even split).
    pub fn even(n_layer: usize, n_devices: usize) -> Self {
        let n = n_devices.max(1);
        let mut counts = vec![0; n];
        for l in 0..n_layer {
            counts[l * n / n_layer] += 1;
        }
        Self { counts }
    }

    /// Layers per device.
    pub fn counts(&self) -> &[usize] {
        &self.counts
    }

    /// Layers over every device.
    pub fn n_layer(&self) -> usize {
        self.counts.iter().sum()
    }

    /// The device holding layer `layer` (the last device for a layer past
    /// the end).
    pub fn device_of(&self, layer: usize) -> usize {
        let mut end = 0;
        for (d, &c) in self.counts.iter().enumerate() {
            end += c;
            if layer < end {
                return d;
            }
        }
        self.counts.len().saturating_sub(1)
    }

    /// How many devices hold at least one layer.
    pub fn devices_used(&self) -> usize {
        self.counts.iter().filter(|&&c| c > 0).count()
    }
}

impl fmt::Display for LayerCounts {
    /// `"20 + 10"`: layers per device, in order.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, c) in self.counts.iter().enumerate() {
            if i > 0 {
                f.write_str(" + ")?;
            }
            write!(f, "{c}")?;
        }
        Ok(())
    }
}

/// Bytes a decoder model takes, by where they go: what the fit places.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ModelFootprint {
    /// Weight bytes of each layer (`blk.<l>.*`), its experts included.
    pub layer_weights: Vec<usize>,
    /// Of those, the bytes of each layer's expert tensors (mixture-of-experts
    /// models; [`HostTensors`] names them).
    pub layer_experts: Vec<usize>,
    /// KV cache bytes of one layer.
    pub layer_kv: usize,
    /// Bytes that go with the first layer (untied token embeddings).
    pub input: usize,
    /// Bytes that go with the last layer (final norm, output projection,
    /// tied embeddings, and any tensor of no layer).
    pub output: usize,
    /// Expert bytes kept in host memory whatever device their layer is on
    /// ([`ModelFootprint::with_experts_in_host_memory`]): the last device's,
    /// which is the CPU.
    pub host_experts: usize,
}

impl ModelFootprint {
    /// The footprint of `gguf`'s tensors with a KV cache of `n_ctx` cells of
    /// `kv_dtype`.
    pub fn from_gguf(gguf: &Gguf, hp: &DecoderHparams, n_ctx: usize, kv_dtype: DType) -> Result<Self> {
        // `hp` came from the file: its layer count sizes this table.
        let limits = *gguf.limits();
        let bad = |reason: String| Error::InvalidModel { file: gguf.source().to_owned(), reason };
        let n_layer = limits.check_count("block_count", hp.n_layer as u64, limits.max_layers).map_err(bad)?;
        let mut layer_weights = Vec::new();
        layer_weights.try_reserve_exact(n_layer).map_err(|_| bad(format!("no memory for {n_layer} layers")))?;
        layer_weights.resize(n_layer, 0usize);
        let mut layer_experts = layer_weights.clone();
        let mut input = 0usize;
        let mut output = 0;
        let tied = gguf.tensor("output.weight").is_err();
        for t in gguf.tensors() {
            let layer = t.name.strip_prefix("blk.").and_then(|rest| rest.split('.').next()?.parse::<usize>().ok());
            match layer {
                Some(l) if l < hp.n_layer => {
                    layer_weights[l] = layer_weights[l].saturating_add(t.size);
                    if HostTensors::ALL_EXPERTS.contains(&t.name) {
                        layer_experts[l] = layer_experts[l].saturating_add(t.size);
                    }
                }
                Some(l) => {
                    return Err(Error::InvalidModel {
                        file: gguf.source().to_owned(),
                        reason: format!("tensor {} is of layer {l}, but the model has {} layers", t.name, hp.n_layer),
                    });
                }
                None if t.name == "token_embd.weight" && !tied => input = input.saturating_add(t.size),
                None => output = t.size.saturating_add(output),
            }
        }
        let row = hp.n_head_kv * hp.head_dim;
        let row_bytes = kv_dtype
            .row_size(row)
            .ok_or_else(|| Error::Model(format!("a {kv_dtype} KV cache cannot hold rows of {row} values")))?;
        let layer_kv = row_bytes.saturating_mul(n_ctx).saturating_mul(2);
        Ok(Self { layer_weights, layer_experts, layer_kv, input, output, host_experts: 0 })
    }

    /// The footprint with the experts of the first `n` layers in host memory
    /// (`--n-cpu-moe n`): out of their layers' bytes, into the last device's.
    pub fn with_experts_in_host_memory(&self, n: usize) -> Self {
        let mut out = self.clone();
        for l in 0..n.min(out.layer_weights.len()) {
            let experts = out.layer_experts.get(l).copied().unwrap_or(0);
            out.layer_weights[l] = out.layer_weights[l].saturating_sub(experts);
            out.host_experts = out.host_experts.saturating_add(experts);
        }
        out
    }

    /// Whether any layer has experts.
    pub fn has_experts(&self) -> bool {
        self.layer_experts.iter().any(|&b| b > 0)
    }

    /// Bytes of layer `l` with its cache, and what travels with it.
    fn layer_bytes(&self, l: usize) -> usize {
        let n = self.layer_weights.len();
        // Saturating: a sum past `usize::MAX` fits no budget anyway.
        let mut bytes = self.layer_weights[l].saturating_add(self.layer_kv);
        if l == 0 {
            bytes = bytes.saturating_add(self.input);
        }
        if l + 1 == n {
            bytes = bytes.saturating_add(self.output);
        }
        bytes
    }

    /// Every byte of the model, cache included.
    pub fn total(&self) -> usize {
        (0..self.layer_weights.len()).map(|l| self.layer_bytes(l)).fold(self.host_experts, usize::saturating_add)
    }
}

/// One device the fit may put layers on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceRoom {
    /// The device's name (errors name it).
    pub name: String,
    /// Its budget in bytes (`None`: no limit).
    pub budget: Option<usize>,
    /// Bytes kept free for the device's compute memory (an estimate: see
    /// [`compute_estimate`]).
    pub compute: usize,
}

/// A generous estimate of the compute memory a batch of `n_tokens` over a
/// context of `n_ctx` cells takes on one device: the widest activations of
/// a layer, the attention scores, and the output logits, each live at once.
pub fn compute_estimate(hp: &DecoderHparams, n_tokens: usize, n_ctx: usize) -> usize {
    // Saturating: the sizes come from a file and the command line, and an
    // estimate past `usize::MAX` only has to fail the fit, not wrap.
    let per_token = [
        hp.n_embd.saturating_mul(4),
        hp.n_ff.saturating_mul(3),
        // Each chosen expert's gate, up and activation, its output row, and the router's scores.
        hp.n_expert_used
            .saturating_mul(hp.n_ff_exp.saturating_mul(3).saturating_add(hp.n_embd))
            .saturating_add(hp.n_expert),
        hp.n_head.saturating_mul(hp.head_dim).saturating_mul(2),
        hp.n_head.saturating_mul(n_ctx.min(4096)),
        hp.n_vocab,
    ]
    .into_iter()
    .fold(0usize, usize::saturating_add);
    let f32s = n_tokens.saturating_mul(per_token);
    // Room for the scheduler's input copies and the planner's alignment.
    f32s.saturating_mul(5)
}

/// The layers per device (in `devices`' order) under their budgets: each
/// device takes as many of the next layers as fit beside its compute
/// memory. An error names the last device when layers are left over.
///
/// ```
/// use gantry::model::decoder::{DeviceRoom, ModelFootprint, fit_layers};
///
/// let model = ModelFootprint { layer_weights: vec![100; 10], layer_kv: 10, input: 0, output: 50, ..Default::default() };
/// let gpu = DeviceRoom { name: "wgpu0".into(), budget: Some(500), compute: 100 };
/// let cpu = DeviceRoom { name: "CPU".into(), budget: None, compute: 100 };
/// let counts = fit_layers(&model, &[gpu, cpu])?;
/// assert_eq!(counts.counts(), &[3, 7]); // 100 + 3 × 110 ≤ 500
/// # Ok::<(), gantry::Error>(())
/// ```
pub fn fit_layers(model: &ModelFootprint, devices: &[DeviceRoom]) -> Result<LayerCounts> {
    let Some(last) = devices.last() else {
        return Err(Error::Model("no device to fit the model on".into()));
    };
    let n_layer = model.layer_weights.len();
    let mut counts = vec![0; devices.len()];
    let mut next = 0;
    for (d, device) in devices.iter().enumerate() {
        let Some(room) = device.budget.unwrap_or(usize::MAX).checked_sub(device.compute) else {
            continue;
        };
        // Experts kept in host memory are the last device's (the CPU's).
        let mut used = if d + 1 == devices.len() { model.host_experts } else { 0 };
        while next < n_layer {
            let add = model.layer_bytes(next);
            if used.saturating_add(add) > room {
                break;
            }
            used = used.saturating_add(add);
            next += 1;
            counts[d] += 1;
        }
    }
    if next < n_layer || last.budget.is_some_and(|b| model.host_experts.saturating_add(last.compute) > b) {
        let left = (next..n_layer).map(|l| model.layer_bytes(l)).fold(model.host_experts, usize::saturating_add);
        return Err(Error::Engine(gantry_engine::Error::BudgetExceeded {
            device: last.name.clone(),
            needed: left.saturating_add(last.compute),
            budget: last.budget.unwrap_or(0),
            compute: last.compute,
            held: left,
        }));
    }
    Ok(LayerCounts::new(counts))
}

/// [`fit_layers`] for a mixture-of-experts model, placing experts last (as
/// llama.cpp's fit does): when the GPUs cannot hold every layer, the experts
/// of the first layers move to host memory before any whole layer does —
/// the fewest layers' experts with which every layer fits on the devices
/// before the last (the CPU). When even every layer's experts in host memory
/// leave layers over, those layers go to the CPU. The layer counts, and how
/// many layers' experts stay in host memory (`--n-cpu-moe`).
///
/// ```
/// use gantry::model::decoder::{DeviceRoom, ModelFootprint, fit_layers_experts_last};
///
/// // Four layers of 100 bytes, 80 of them experts.
/// let model = ModelFootprint { layer_weights: vec![100; 4], layer_experts: vec![80; 4], ..Default::default() };
/// let gpu = DeviceRoom { name: "wgpu0".into(), budget: Some(250), compute: 0 };
/// let cpu = DeviceRoom { name: "CPU".into(), budget: None, compute: 0 };
/// let (counts, n_cpu_moe) = fit_layers_experts_last(&model, &[gpu, cpu])?;
/// assert_eq!((counts.counts(), n_cpu_moe), (&[4, 0][..], 2)); // 2 × 20 + 2 × 100 ≤ 250
/// # Ok::<(), gantry::Error>(())
/// ```
pub fn fit_layers_experts_last(model: &ModelFootprint, devices: &[DeviceRoom]) -> Result<(LayerCounts, usize)> {
    let plain = fit_layers(model, devices);
    let all_before_last = |c: &LayerCounts| c.counts().last().is_none_or(|&n| n == 0);
    if !model.has_experts() || devices.len() < 2 || plain.as_ref().is_ok_and(all_before_last) {
        return plain.map(|c| (c, 0));
    }
    let n_layer = model.layer_weights.len();
    for n in 1..=n_layer {
        if let Ok(c) = fit_layers(&model.with_experts_in_host_memory(n), devices)
            && all_before_last(&c)
        {
            return Ok((c, n));
        }
    }
    fit_layers(&model.with_experts_in_host_memory(n_layer), devices).map(|c| (c, n_layer))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(n: usize) -> ModelFootprint {
        ModelFootprint { layer_weights: vec![100; n], layer_kv: 20, input: 30, output: 70, ..Default::default() }
    }

    /// `n` layers of 100 bytes, 80 of them experts, caches of 20.
    fn experts(n: usize) -> ModelFootprint {
        ModelFootprint { layer_experts: vec![80; n], ..model(n) }
    }

    #[test]
    fn experts_go_to_host_memory_before_whole_layers() {
        let cpu = || room("cpu", None);
        // Everything fits: no experts move.
        let (c, n) = fit_layers_experts_last(&experts(4), &[room("gpu", Some(10_000)), cpu()]).unwrap();
        assert_eq!((c.counts(), n), (&[4, 0][..], 0));
        // GPU 500, 450 beside compute: the layers take 580 with their experts,
        // 500 with one layer's out, 420 with two.
        let (c, n) = fit_layers_experts_last(&experts(4), &[room("gpu", Some(500)), cpu()]).unwrap();
        assert_eq!((c.counts(), n), (&[4, 0][..], 2));
        let fp = experts(4).with_experts_in_host_memory(2);
        assert_eq!((fp.host_experts, fp.total()), (160, experts(4).total()), "moved, not lost");
        // GPU 300, 250 beside compute: even with every expert out the layers
        // take 260, so the last goes to the CPU.
        let (c, n) = fit_layers_experts_last(&experts(4), &[room("gpu", Some(300)), cpu()]).unwrap();
        assert_eq!((c.counts(), n), (&[3, 1][..], 4));
        // A dense model fits as before.
        let (c, n) = fit_layers_experts_last(&model(10), &[room("gpu", Some(450)), cpu()]).unwrap();
        assert_eq!((c.counts(), n), (&[3, 7][..], 0));
        // The host's experts count against a CPU budget.
        let err = fit_layers(&experts(4).with_experts_in_host_memory(4), &[room("cpu", Some(200))]).unwrap_err();
        assert!(err.to_string().contains("memory budget of cpu exceeded"), "{err}");
    }

    fn room(name: &str, budget: Option<usize>) -> DeviceRoom {
        DeviceRoom { name: name.into(), budget, compute: 50 }
    }

    #[test]
    fn even_counts_follow_llama_cpp_rule() {
        assert_eq!(LayerCounts::even(30, 1).counts(), &[30]);
        assert_eq!(LayerCounts::even(30, 2).counts(), &[15, 15]);
        assert_eq!(LayerCounts::even(10, 3).counts(), &[4, 3, 3]);
        let c = LayerCounts::even(10, 3);
        assert_eq!((0..10).map(|l| c.device_of(l)).collect::<Vec<_>>(), [0, 0, 0, 0, 1, 1, 1, 2, 2, 2]);
        assert_eq!(c.to_string(), "4 + 3 + 3");
    }

    #[test]
    fn devices_fill_in_order_and_the_rest_goes_last() {
        // GPU: 50 compute + layer 0 (120 + 30 input) + 2 × 120 = 440 ≤ 450; a fourth would pass it.
        let c = fit_layers(&model(10), &[room("gpu", Some(450)), room("cpu", None)]).unwrap();
        assert_eq!(c.counts(), &[3, 7]);
        // Everything fits on the GPU: the CPU gets nothing.
        let c = fit_layers(&model(10), &[room("gpu", Some(10_000)), room("cpu", None)]).unwrap();
        assert_eq!(c.counts(), &[10, 0]);
        assert_eq!(c.devices_used(), 1);
    }

    #[test]
    fn the_output_moves_the_last_layer_on() {
        // Ten layers and the input take 50 + 1230 = 1280; the output's 70 more does not fit.
        let c = fit_layers(&model(10), &[room("gpu", Some(1300)), room("cpu", None)]).unwrap();
        assert_eq!(c.counts(), &[9, 1]);
    }

    #[test]
    fn a_device_without_room_for_its_compute_takes_nothing() {
        let c = fit_layers(&model(4), &[room("gpu", Some(40)), room("cpu", None)]).unwrap();
        assert_eq!(c.counts(), &[0, 4]);
    }

    #[test]
    fn too_small_budgets_name_the_last_device() {
        let err = fit_layers(&model(10), &[room("gpu", Some(450)), room("cpu", Some(400))]).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("memory budget of cpu exceeded"), "{text}");
        assert!(fit_layers(&model(1), &[]).is_err());
    }
}
