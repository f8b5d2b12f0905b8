//! Loading a GGUF file's tensors into a [`Context`]: over the file mapping
//! when the device reads host memory (no copy), else copied into buffers of
//! the device's buffer type.

use std::collections::HashMap;
use std::sync::Arc;

use gantry_engine::{BufferId, BufferType, BufferUsage, Context, Device, TensorId};

use crate::{Error, Result};

use super::gguf::{Gguf, TensorInfo};

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
    /// place (default `true`); `false` always copies.
    pub use_mmap: bool,
    /// Called as tensors are placed or copied (copies report every few MiB).
    pub progress: Option<&'a mut dyn FnMut(LoadProgress)>,
}

impl Default for LoadOptions<'_> {
    fn default() -> Self {
        Self { use_mmap: true, progress: None }
    }
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

/// Creates one tensor per GGUF tensor in `ctx` (named as in the file, shape =
/// the file's dimensions in ggml order, contiguous) and gives them memory in
/// buffers marked [`BufferUsage::Weights`]:
///
/// - when `options.use_mmap` is set, the device's buffer type is host memory
///   and [`Device::buffer_from_host_memory`] succeeds, in one buffer over the
///   file's bytes, each tensor where it lies in the file: nothing is copied
///   (the buffer is registered under [`Device::host_memory_buffer_type`]);
/// - otherwise in buffers of the device's buffer type, with the bytes copied
///   in (as many buffers as the type's `max_size` requires).
///
/// On error nothing is left in `ctx`: the tensors and buffers made so far are removed.
pub fn load_tensors(
    gguf: &Gguf,
    ctx: &mut Context,
    device: &dyn Device,
    options: LoadOptions<'_>,
) -> Result<LoadedWeights> {
    let LoadOptions { use_mmap, progress } = options;
    let _span = tracing::info_span!("load", file = %gguf.source(), device = device.name()).entered();
    let started = std::time::Instant::now();
    let mut report = Progress::new(gguf, progress);
    let mut made = Made::default();
    let result = if use_mmap && device.buffer_type().is_host() {
        match load_mapped(gguf, ctx, device, &mut made, &mut report) {
            Ok(Some(w)) => Ok(w),
            Ok(None) => load_copied(gguf, ctx, device, &mut made, &mut report),
            Err(e) => Err(e),
        }
    } else {
        load_copied(gguf, ctx, device, &mut made, &mut report)
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

    fn finish(&mut self, gguf: &Gguf, mapped: bool) -> LoadedWeights {
        let tensors = std::mem::take(&mut self.tensors);
        let index = tensors.iter().enumerate().map(|(i, (n, _))| (n.clone(), i)).collect();
        LoadedWeights {
            source: gguf.source().to_owned(),
            tensors,
            index,
            buffers: std::mem::take(&mut self.buffers),
            mapped,
            bytes: gguf.tensor_bytes(),
        }
    }
}

pub(crate) struct Progress<'a> {
    callback: Option<&'a mut dyn FnMut(LoadProgress)>,
    state: LoadProgress,
}

impl<'a> Progress<'a> {
    pub(crate) fn new(gguf: &Gguf, callback: Option<&'a mut dyn FnMut(LoadProgress)>) -> Self {
        let state = LoadProgress {
            bytes_done: 0,
            bytes_total: gguf.tensor_bytes(),
            tensors_done: 0,
            tensors_total: gguf.tensors().len(),
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

fn create_tensor(gguf: &Gguf, ctx: &mut Context, made: &mut Made, info: &TensorInfo) -> Result<TensorId> {
    let desc = info.desc().map_err(|reason| Error::InvalidModel {
        file: gguf.source().to_owned(),
        reason: format!("tensor '{}': {reason}", info.name),
    })?;
    let t = ctx.insert(desc);
    made.tensors.push((info.name.clone(), t));
    Ok(t)
}

/// The no-copy path; `Ok(None)` when the device or the file's layout does not allow it.
fn load_mapped(
    gguf: &Gguf,
    ctx: &mut Context,
    device: &dyn Device,
    made: &mut Made,
    report: &mut Progress<'_>,
) -> Result<Option<LoadedWeights>> {
    let buft = device.host_memory_buffer_type();
    let align = buft.alignment().max(1);
    if !gguf.tensors().iter().all(|t| gguf.tensor_file_offset(t).is_multiple_of(align)) {
        // The buffer type wants stricter alignment than the file gives.
        return Ok(None);
    }
    let max_tensor = gguf.tensors().iter().map(|t| t.size).max().unwrap_or(0);
    let Ok(buffer) = device.buffer_from_host_memory(gguf.host_memory(), max_tensor) else {
        return Ok(None);
    };
    let id = ctx.add_buffer(buffer, buft, BufferUsage::Weights);
    made.buffers.push(id);
    for info in gguf.tensors() {
        let t = create_tensor(gguf, ctx, made, info)?;
        ctx.place(t, id, gguf.tensor_file_offset(info))?;
        report.bytes(info.size);
        report.tensor_done();
    }
    Ok(Some(made.finish(gguf, true)))
}

/// Bytes copied between progress reports.
const COPY_CHUNK: usize = 8 << 20;

/// The copying path: lay tensors out in as few buffers of the device's type
/// as its `max_size` allows, then copy each tensor's bytes in.
fn load_copied(
    gguf: &Gguf,
    ctx: &mut Context,
    device: &dyn Device,
    made: &mut Made,
    report: &mut Progress<'_>,
) -> Result<LoadedWeights> {
    let buft: Arc<dyn BufferType> = device.buffer_type();
    let align = buft.alignment().max(1);
    let max_size = buft.max_size();
    let overflow = |what: &str| {
        gantry_engine::Error::Overflow(format!("laying out {what} of {} in {}", gguf.source(), buft.name()))
    };

    // (tensor index, buffer number, offset) and the size of each buffer.
    let mut layout = Vec::with_capacity(gguf.tensors().len());
    let mut sizes = vec![0usize];
    for (i, info) in gguf.tensors().iter().enumerate() {
        let desc = info.desc().map_err(|reason| Error::InvalidModel {
            file: gguf.source().to_owned(),
            reason: format!("tensor '{}': {reason}", info.name),
        })?;
        let size = buft.alloc_size(&desc.layout());
        if size > max_size {
            return Err(gantry_engine::Error::OutOfMemory { buffer_type: buft.name().to_owned(), size }.into());
        }
        let mut current = sizes.len() - 1;
        let mut offset = sizes[current].checked_next_multiple_of(align).ok_or_else(|| overflow(&info.name))?;
        if offset.checked_add(size).is_none_or(|end| end > max_size) {
            sizes.push(0);
            current += 1;
            offset = 0;
        }
        sizes[current] = offset + size;
        layout.push((i, current, offset));
    }

    for &size in &sizes {
        let id = ctx.alloc_buffer(&buft, size, BufferUsage::Weights)?;
        made.buffers.push(id);
    }
    for (i, buffer, offset) in layout {
        let info = &gguf.tensors()[i];
        let t = create_tensor(gguf, ctx, made, info)?;
        ctx.place(t, made.buffers[buffer], offset)?;
        let data = gguf.tensor_data(info)?;
        write_weight(ctx, t, data, report)?;
        report.tensor_done();
    }
    Ok(made.finish(gguf, false))
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
