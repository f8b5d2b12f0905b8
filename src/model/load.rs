//! Loading a weights file's tensors (GGUF, safetensors) into a
//! [`Context`]: over the file mapping when the device reads host memory (no
//! copy), else copied into buffers of the device's buffer type; on a device
//! with a repacked weight layout (the CPU's `CPU_REPACK`, offered through
//! the engine's [`WeightRepack`] extension), the matrices it has one for
//! repacked into the layout its kernels read (see [`LoadOptions::repack`]).

use std::collections::HashMap;
use std::sync::Arc;

use gantry_engine::{
    BufferId, BufferType, BufferUsage, Context, Device, Limits, TensorId, WeightRepack, device_extension,
    same_buffer_type,
};

use crate::{Error, Result};

use super::gguf::{Gguf, TensorInfo};
use super::{HostTensors, TensorEntry, WeightsFile};

/// How far loading has got, for a progress bar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadProgress {
    /// Tensor bytes placed or copied so far.
    pub bytes_done: usize,
    /// Tensor bytes in the file.
    pub bytes_total: usize,
    /// Tensors finished so far.
    pub tensors_done: usize,
    /// Tensors in the file.
    pub tensors_total: usize,
}

/// Options of [`load_tensors`].
pub struct LoadOptions<'a> {
    /// Place tensors over the file's bytes when the device can read them in
    /// place (default `true`); `false` always copies. For
    /// [`DecoderModel::load_with`](crate::model::decoder::DecoderModel::load_with)
    /// `false` means the file is read into memory instead of mapped
    /// (`--no-mmap`), so that it may change underneath without harm.
    pub use_mmap: bool,
    /// Called as tensors are placed or copied (copies report every few MiB).
    pub progress: Option<&'a mut dyn FnMut(LoadProgress)>,
    /// Where a copied tensor goes that is larger than one buffer of the
    /// device may be (a 262k-token embedding table on a software GPU, say);
    /// `None` makes such a tensor an out-of-memory error.
    pub oversize: Option<Arc<dyn BufferType>>,
    /// On a device with a repacked weight layout ([`WeightRepack`]: the
    /// CPU, for matrices and expert stacks of Q4_0 … Q8_0, Q4_K, Q5_K and
    /// Q6_K rows), keep the weights it has one for in a buffer of its
    /// repacking type, repacked once here into the layout the quantized
    /// kernels read (ggml's CPU_REPACK). Reading them back gives the file's
    /// bytes; on the CPU only MUL_MAT and MUL_MAT_ID (as weights) and
    /// GET_ROWS read them, so a model whose graphs read a quantized matrix
    /// otherwise turns this off. Default: on ([`LoadOptions::from_env`]
    /// turns it off for `GANTRY_NO_REPACK=1`).
    pub repack: bool,
    /// Weights kept in host memory whatever the device (the experts of a
    /// model's first layers, `--n-cpu-moe`): placed in CPU buffers
    /// (repacked for the CPU's kernels when `repack` is on) instead of the
    /// device's, so the scheduler computes the ops reading them on the CPU.
    /// Nothing changes for a device whose buffers are host memory.
    pub host_tensors: HostTensors,
    /// What [`DecoderModel::load_with`](crate::model::decoder::DecoderModel::load_with)
    /// holds the file to: its tensor count and shapes, and every size its
    /// metadata gives (layers, widths, context, vocabulary, the chat
    /// template's output), each refused by name beyond its limit before it
    /// sizes anything. Default [`Limits::DEFAULT`]; a program loading files
    /// it does not trust can hold them tighter. (Limits above the defaults
    /// admit no larger model: the graph and session code keep the
    /// defaults as their own bounds.)
    pub limits: Limits,
}

impl Default for LoadOptions<'_> {
    /// The defaults, whatever the environment says.
    fn default() -> Self {
        Self {
            use_mmap: true,
            progress: None,
            oversize: None,
            repack: true,
            host_tensors: HostTensors::NONE,
            limits: Limits::DEFAULT,
        }
    }
}

impl LoadOptions<'_> {
    /// The defaults with the loader's environment switch: `GANTRY_NO_REPACK`
    /// set to anything but empty or `0` turns [`LoadOptions::repack`] off
    /// ([`repack_from_env`]), for comparing with the plain layout.
    pub fn from_env() -> Self {
        Self { repack: repack_from_env(), ..Self::default() }
    }
}

/// Whether `GANTRY_NO_REPACK` leaves repacking on: yes, unless it is set to
/// anything but `0` or empty. Read by [`LoadOptions::from_env`] only.
pub fn repack_from_env() -> bool {
    std::env::var_os("GANTRY_NO_REPACK").is_none_or(|v| v.is_empty() || v == "0")
}

/// The tensors [`load_tensors`] created, by name, and the buffers holding them.
#[derive(Debug, Clone)]
pub struct LoadedWeights {
    source: String,
    tensors: Vec<(String, TensorId)>,
    index: HashMap<String, usize>,
    buffers: Vec<BufferId>,
    mapped: bool,
    bytes: usize,
}

impl LoadedWeights {
    /// The tensor named `name`; an error names the file and tensor when absent.
    pub fn get(&self, name: &str) -> Result<TensorId> {
        self.index.get(name).map(|&i| self.tensors[i].1).ok_or_else(|| Error::InvalidModel {
            file: self.source.clone(),
            reason: format!("tensor '{name}' is missing"),
        })
    }

    /// The tensor named `name`, or `None`.
    pub fn find(&self, name: &str) -> Option<TensorId> {
        self.index.get(name).map(|&i| self.tensors[i].1)
    }

    /// Every tensor with its name, in file order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&str, TensorId)> + '_ {
        self.tensors.iter().map(|(n, t)| (n.as_str(), *t))
    }

    /// Number of tensors.
    pub fn len(&self) -> usize {
        self.tensors.len()
    }

    /// Whether no tensor was loaded.
    pub fn is_empty(&self) -> bool {
        self.tensors.is_empty()
    }

    /// The buffers holding the tensors (usage [`BufferUsage::Weights`]).
    pub fn buffers(&self) -> &[BufferId] {
        &self.buffers
    }

    /// Whether the tensors lie in a buffer over the file's bytes (no copy).
    pub fn is_mapped(&self) -> bool {
        self.mapped
    }

    /// Bytes of tensor data.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The tensors were moved into `buffers` (of their devices), off the mapping.
    pub(crate) fn replace_buffers(&mut self, buffers: Vec<BufferId>) {
        self.buffers = buffers;
        self.mapped = false;
    }
}

/// Creates one tensor per tensor of `file` in `ctx` (named as in the file,
/// shape = the file's dimensions in ggml order, contiguous) and gives them
/// memory in buffers marked [`BufferUsage::Weights`]:
///
/// - when `options.use_mmap` is set, the device's buffer type is host memory,
///   every tensor lies at an offset the buffer type's alignment allows, and
///   [`Device::buffer_from_host_memory`] succeeds, in one buffer over the
///   file's bytes, each tensor where it lies in the file: nothing is copied
///   (the buffer is registered under [`Device::host_memory_buffer_type`]);
/// - otherwise in buffers of the device's buffer type, with the bytes copied
///   in (as many buffers as the type's `max_size` requires).
///
/// On error nothing is left in `ctx`: the tensors and buffers made so far are removed.
pub fn load_tensors(
    file: &dyn WeightsFile,
    ctx: &mut Context,
    device: &dyn Device,
    options: LoadOptions<'_>,
) -> Result<LoadedWeights> {
    // The limits were the file's business (it was read under them).
    let LoadOptions { use_mmap, progress, oversize, repack, host_tensors, limits: _ } = options;
    let _span = tracing::info_span!("load", file = %file.source(), device = device.name()).entered();
    let started = std::time::Instant::now();
    let entries = file.tensor_entries()?;
    let mut report = Progress::new(&entries, progress);
    let mut made = Made::default();
    let homes = Homes { oversize, host_tensors, repack };
    let result = if use_mmap && device.buffer_type().is_host() {
        match load_mapped(file, &entries, ctx, device, &mut made, &mut report) {
            Ok(Some(w)) => Ok(w),
            Ok(None) => load_copied(file, &entries, ctx, device, homes, &mut made, &mut report),
            Err(e) => Err(e),
        }
    } else {
        load_copied(file, &entries, ctx, device, homes, &mut made, &mut report)
    };
    let repack_layout = if repack { device_extension::<WeightRepack>(device) } else { None };
    let result = match (result, repack_layout) {
        (Ok(mut w), Some(layout)) => {
            match repack_matrices(file, &entries, ctx, &mut w, layout) {
                Ok(()) => Ok(w),
                Err(e) => {
                    // `made` handed everything over to `w`.
                    w.unload(ctx);
                    Err(e)
                }
            }
        }
        (other, _) => other,
    };
    match &result {
        Ok(w) => tracing::info!(
            tensors = w.len(),
            bytes = w.bytes(),
            mapped = w.is_mapped(),
            ms = started.elapsed().as_secs_f64() * 1e3,
            "weights loaded"
        ),
        Err(e) => {
            tracing::warn!(error = %e, "loading failed; nothing kept");
            made.undo(ctx);
        }
    }
    result
}

impl LoadedWeights {
    /// Removes the tensors and frees the buffers from `ctx` (a model that
    /// failed to build after its file loaded leaves nothing behind).
    pub fn unload(self, ctx: &mut Context) {
        let mut made = Made { tensors: self.tensors, buffers: self.buffers };
        made.undo(ctx);
    }
}

/// What a load created, to remove again when it fails.
#[derive(Default)]
struct Made {
    tensors: Vec<(String, TensorId)>,
    buffers: Vec<BufferId>,
}

impl Made {
    fn undo(&mut self, ctx: &mut Context) {
        for (_, t) in self.tensors.drain(..) {
            let _ = ctx.remove(t);
        }
        for b in self.buffers.drain(..) {
            let _ = ctx.free_buffer(b);
        }
    }

    fn finish(&mut self, file: &dyn WeightsFile, entries: &[TensorEntry<'_>], mapped: bool) -> LoadedWeights {
        let tensors = std::mem::take(&mut self.tensors);
        let index = tensors.iter().enumerate().map(|(i, (n, _))| (n.clone(), i)).collect();
        LoadedWeights {
            source: file.source().to_owned(),
            tensors,
            index,
            buffers: std::mem::take(&mut self.buffers),
            mapped,
            bytes: entries.iter().map(|e| e.data.len()).sum(),
        }
    }
}

pub(crate) struct Progress<'a> {
    callback: Option<&'a mut dyn FnMut(LoadProgress)>,
    state: LoadProgress,
}

impl<'a> Progress<'a> {
    pub(crate) fn new(entries: &[TensorEntry<'_>], callback: Option<&'a mut dyn FnMut(LoadProgress)>) -> Self {
        let state = LoadProgress {
            bytes_done: 0,
            bytes_total: entries.iter().map(|e| e.data.len()).sum(),
            tensors_done: 0,
            tensors_total: entries.len(),
        };
        Self { callback, state }
    }

    fn bytes(&mut self, n: usize) {
        self.state.bytes_done += n;
        if let Some(cb) = self.callback.as_mut() {
            cb(self.state);
        }
    }

    pub(crate) fn tensor_done(&mut self) {
        self.state.tensors_done += 1;
        self.bytes(0);
    }
}

fn create_tensor(ctx: &mut Context, made: &mut Made, entry: &TensorEntry<'_>) -> TensorId {
    let t = ctx.insert(entry.desc);
    made.tensors.push((entry.name.to_owned(), t));
    t
}

/// The no-copy path; `Ok(None)` when the device or the file's layout does not allow it.
fn load_mapped(
    file: &dyn WeightsFile,
    entries: &[TensorEntry<'_>],
    ctx: &mut Context,
    device: &dyn Device,
    made: &mut Made,
    report: &mut Progress<'_>,
) -> Result<Option<LoadedWeights>> {
    let buft = device.host_memory_buffer_type();
    let align = buft.alignment().max(1);
    if !entries.iter().all(|e| e.offset.is_multiple_of(align)) {
        // The buffer type wants stricter alignment than the file gives.
        return Ok(None);
    }
    let max_tensor = entries.iter().map(|e| e.data.len()).max().unwrap_or(0);
    let Ok(buffer) = device.buffer_from_host_memory(file.host_memory(), max_tensor) else {
        return Ok(None);
    };
    let id = ctx.add_buffer(buffer, buft, BufferUsage::Weights);
    made.buffers.push(id);
    for entry in entries {
        let t = create_tensor(ctx, made, entry);
        ctx.place(t, id, entry.offset)?;
        report.bytes(entry.data.len());
        report.tensor_done();
    }
    Ok(Some(made.finish(file, entries, true)))
}

/// Bytes copied between progress reports.
const COPY_CHUNK: usize = 8 << 20;

/// Where the copying path puts the tensors that do not go to the device.
struct Homes {
    /// For tensors larger than one buffer of the device.
    oversize: Option<Arc<dyn BufferType>>,
    /// Tensors kept in host memory.
    host_tensors: HostTensors,
    /// Whether host-kept tensors the CPU repacks go repacked.
    repack: bool,
}

impl Homes {
    /// The host buffer type for a kept tensor of `layout`: the CPU's
    /// repacking type when it repacks the layout, else plain CPU memory.
    fn host_type(&self, layout: &gantry_engine::TensorLayout) -> Arc<dyn BufferType> {
        if self.repack && gantry_backends::cpu::repacks_layout(layout) {
            gantry_backends::cpu::repack_buffer_type()
        } else {
            gantry_backends::cpu::buffer_type()
        }
    }
}

/// The copying path: lay tensors out in as few buffers of the device's type
/// as its `max_size` allows (tensors larger than that in buffers of the
/// `oversize` type, tensors kept in host memory in CPU buffers), then copy
/// each tensor's bytes in.
fn load_copied(
    file: &dyn WeightsFile,
    entries: &[TensorEntry<'_>],
    ctx: &mut Context,
    device: &dyn Device,
    homes: Homes,
    made: &mut Made,
    report: &mut Progress<'_>,
) -> Result<LoadedWeights> {
    let buft: Arc<dyn BufferType> = device.buffer_type();
    // Layout 0 is the device's; the others are made as tensors need them.
    let mut layouts = vec![Layout::new(buft.clone())];
    let mut layout_of = |t: Arc<dyn BufferType>| match layouts.iter().position(|l| same_buffer_type(&l.buft, &t)) {
        Some(i) => i,
        None => {
            layouts.push(Layout::new(t));
            layouts.len() - 1
        }
    };
    let mut homes_of = Vec::with_capacity(entries.len());
    for entry in entries {
        let layout = entry.desc.layout();
        let home = if !buft.is_host() && homes.host_tensors.contains(entry.name) {
            layout_of(homes.host_type(&layout))
        } else {
            match &homes.oversize {
                Some(big) if buft.alloc_size(&layout) > buft.max_size() => layout_of(big.clone()),
                _ => 0,
            }
        };
        homes_of.push(home);
    }
    let mut placed = Vec::with_capacity(entries.len());
    for (entry, &home) in entries.iter().zip(&homes_of) {
        placed.push((home, layouts[home].add(file, entry)?));
    }
    let mut buffers = Vec::with_capacity(layouts.len());
    for layout in &layouts {
        buffers.push(layout.allocate(ctx, made)?);
    }
    for (entry, (home, (buffer, offset))) in entries.iter().zip(placed) {
        let t = create_tensor(ctx, made, entry);
        ctx.place(t, buffers[home][buffer], offset)?;
        write_weight(ctx, t, entry.data, report)?;
        report.tensor_done();
    }
    Ok(made.finish(file, entries, false))
}

/// Tensors laid out in as few buffers of one type as its `max_size` allows.
struct Layout {
    buft: Arc<dyn BufferType>,
    /// Bytes used in each buffer so far.
    sizes: Vec<usize>,
}

impl Layout {
    fn new(buft: Arc<dyn BufferType>) -> Self {
        Self { buft, sizes: Vec::new() }
    }

    /// Finds room for `entry`: (buffer number, offset).
    fn add(&mut self, file: &dyn WeightsFile, entry: &TensorEntry<'_>) -> Result<(usize, usize)> {
        let (align, max_size) = (self.buft.alignment().max(1), self.buft.max_size());
        let size = self.buft.alloc_size(&entry.desc.layout());
        if size > max_size {
            return Err(gantry_engine::Error::OutOfMemory { buffer_type: self.buft.name().to_owned(), size }.into());
        }
        let overflow = || {
            gantry_engine::Error::Overflow(format!(
                "laying out {} of {} in {}",
                entry.name,
                file.source(),
                self.buft.name()
            ))
        };
        if self.sizes.is_empty() {
            self.sizes.push(0);
        }
        let mut current = self.sizes.len() - 1;
        let mut offset = self.sizes[current].checked_next_multiple_of(align).ok_or_else(overflow)?;
        if offset.checked_add(size).is_none_or(|end| end > max_size) {
            self.sizes.push(0);
            current += 1;
            offset = 0;
        }
        self.sizes[current] = offset + size;
        Ok((current, offset))
    }

    /// Allocates the buffers (recorded in `made`, to undo on failure).
    fn allocate(&self, ctx: &mut Context, made: &mut Made) -> Result<Vec<BufferId>> {
        let mut ids = Vec::with_capacity(self.sizes.len());
        for &size in &self.sizes {
            let id = ctx.alloc_buffer(&self.buft, size, BufferUsage::Weights)?;
            made.buffers.push(id);
            ids.push(id);
        }
        Ok(ids)
    }
}

impl WeightsFile for Gguf {
    fn source(&self) -> &str {
        Gguf::source(self)
    }

    fn host_memory(&self) -> gantry_engine::HostMemory {
        Gguf::host_memory(self)
    }

    fn tensor_entries(&self) -> Result<Vec<TensorEntry<'_>>> {
        self.tensors()
            .iter()
            .map(|info: &TensorInfo| {
                let desc = info.desc().map_err(|reason| Error::InvalidModel {
                    file: self.source().to_owned(),
                    reason: format!("tensor '{}': {reason}", info.name),
                })?;
                Ok(TensorEntry {
                    name: &info.name,
                    desc,
                    offset: self.tensor_file_offset(info),
                    data: self.tensor_data(info)?,
                })
            })
            .collect()
    }
}

/// Moves the tensors of `loaded` that have a repacked layout into one
/// buffer of `layout`'s repacking type (`CPU_REPACK`), repacking the file's
/// bytes into it (the mapping or the copy they leave stays for the others).
fn repack_matrices(
    file: &dyn WeightsFile,
    entries: &[TensorEntry<'_>],
    ctx: &mut Context,
    loaded: &mut LoadedWeights,
    layout: &WeightRepack,
) -> Result<()> {
    let chosen: Vec<(TensorId, &[u8])> = entries
        .iter()
        .filter(|e| (layout.repacks)(&e.desc.layout()))
        .filter_map(|e| loaded.find(e.name).map(|t| (t, e.data)))
        .collect();
    if chosen.is_empty() {
        return Ok(());
    }
    let _span = tracing::info_span!("repack", file = %file.source(), tensors = chosen.len()).entered();
    let tensors: Vec<TensorId> = chosen.iter().map(|&(t, _)| t).collect();
    for &t in &tensors {
        ctx.unplace(t);
    }
    let placed = ctx.alloc_tensors(&tensors, &(layout.buffer_type)(), BufferUsage::Weights)?;
    loaded.buffers.extend_from_slice(placed.buffers());
    for &(t, data) in &chosen {
        ctx.write_tensor_bytes(t, 0, data)?;
    }
    Ok(())
}

/// Writes a weight's bytes: from where its device already holds them when it
/// can (a remote server with the same file), else copied in chunks.
pub(crate) fn write_weight(ctx: &Context, t: TensorId, data: &[u8], report: &mut Progress<'_>) -> Result<()> {
    if ctx.write_tensor_from_cache(t, data)? {
        report.bytes(data.len());
        return Ok(());
    }
    for (k, chunk) in data.chunks(COPY_CHUNK).enumerate() {
        ctx.write_tensor_bytes(t, k * COPY_CHUNK, chunk)?;
        report.bytes(chunk.len());
    }
    Ok(())
}

#[cfg(test)]
mod tests;
