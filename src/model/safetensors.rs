//! Reading safetensors files (Hugging Face's format: a JSON header of
//! tensor names, dtypes, shapes and byte ranges, then the bytes) through the
//! `safetensors` crate, over a read-only memory map. Shapes are row-major
//! (numpy order), so a `[out, in]` matrix becomes ggml's `ne = [in, out]`.

use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use gantry_engine::{DType, HostMemory, Limits, MAX_DIMS, Name, TensorDesc};
use memmap2::Mmap;
use safetensors::tensor::{Dtype, Metadata, SafeTensors};

use super::{TensorEntry, WeightsFile};
use crate::{Error, Result};

/// One tensor of a safetensors file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SafetensorsInfo {
    /// Its name.
    pub name: String,
    /// The file's dtype, as the format spells it (`F32`, `F16`, ...).
    pub file_dtype: String,
    /// The engine's dtype, when it has one for the file's.
    pub dtype: Option<DType>,
    /// The shape in the file's (row-major) order.
    pub shape: Vec<usize>,
    /// Byte offset of the data from the start of the file.
    pub offset: usize,
    /// Bytes of data.
    pub size: usize,
}

enum Storage {
    Mapped(Arc<Mmap>),
    Owned(Arc<Vec<u8>>),
}

impl Storage {
    fn bytes(&self) -> &[u8] {
        match self {
            Storage::Mapped(m) => m,
            Storage::Owned(v) => v,
        }
    }
}

/// A parsed safetensors file: its tensors, in file order, over its bytes.
pub struct SafetensorsFile {
    source: String,
    storage: Storage,
    tensors: Vec<SafetensorsInfo>,
}

impl std::fmt::Debug for SafetensorsFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SafetensorsFile").field("source", &self.source).field("tensors", &self.tensors.len()).finish()
    }
}

/// The engine's dtype for a safetensors dtype.
fn engine_dtype(dtype: Dtype) -> Option<DType> {
    match dtype {
        Dtype::F32 => Some(DType::F32),
        Dtype::F16 => Some(DType::F16),
        Dtype::BF16 => Some(DType::BF16),
        Dtype::I32 => Some(DType::I32),
        _ => None,
    }
}

impl SafetensorsFile {
    /// Maps the file at `path` read-only and parses its header.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let name = path.display().to_string();
        crate::model::regular_file::check_regular(path)?;
        let file = File::open(path).map_err(|source| Error::Io { context: format!("opening {name}"), source })?;
        let map = gantry_backends::cpu::map_read_only(&file)
            .map_err(|source| Error::Io { context: format!("mapping {name}"), source })?;
        Self::from_storage(name, Storage::Mapped(Arc::new(map)))
    }

    /// Reads the file at `path` into memory instead of mapping it
    /// (`--no-mmap`): the file may then change underneath without harm. The
    /// memory is reserved fallibly (a file larger than memory is an error).
    pub fn read(path: impl AsRef<Path>) -> Result<Self> {
        let (name, bytes) = crate::model::regular_file::read_regular(path.as_ref())?;
        Self::from_vec(name, bytes)
    }

    /// Parses safetensors bytes owned by `bytes`, naming them `source` in errors.
    pub fn from_vec(source: impl Into<String>, bytes: Vec<u8>) -> Result<Self> {
        Self::from_storage(source.into(), Storage::Owned(Arc::new(bytes)))
    }

    fn from_storage(source: String, storage: Storage) -> Result<Self> {
        let bytes = storage.bytes();
        let (header, metadata): (usize, Metadata) = SafeTensors::read_metadata(bytes)
            .map_err(|e| Error::InvalidModel { file: source.clone(), reason: format!("safetensors header: {e}") })?;
        let data_start = 8 + header;
        // The crate checks that each tensor's bytes match its shape; an
        // empty tensor may still claim a huge dimension, and a large header
        // any number of tensors.
        let limits = Limits::DEFAULT;
        let bad = |reason: String| Error::InvalidModel { file: source.clone(), reason };
        let infos = metadata.tensors();
        limits.check_count("the tensor count", infos.len() as u64, limits.max_tensors).map_err(bad)?;
        for (name, info) in &infos {
            limits.check_shape(&info.shape).map_err(|e| bad(format!("tensor '{name}': {e}")))?;
        }
        let mut tensors: Vec<SafetensorsInfo> = infos
            .into_iter()
            .map(|(name, info)| SafetensorsInfo {
                name,
                file_dtype: format!("{:?}", info.dtype),
                dtype: engine_dtype(info.dtype),
                shape: info.shape.clone(),
                offset: data_start + info.data_offsets.0,
                size: info.data_offsets.1 - info.data_offsets.0,
            })
            .collect();
        tensors.sort_by_key(|t| t.offset);
        Ok(Self { source, storage, tensors })
    }

    /// The file's path, as errors name it.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Every tensor, in file order.
    pub fn tensors(&self) -> &[SafetensorsInfo] {
        &self.tensors
    }

    /// The tensors the loader leaves out, by name, with their file dtype
    /// (types Gantry cannot hold: I64, U8, ...).
    pub fn unloadable(&self) -> std::collections::HashMap<String, String> {
        self.tensors.iter().filter(|t| t.dtype.is_none()).map(|t| (t.name.clone(), t.file_dtype.clone())).collect()
    }

    /// The tensor named `name`.
    pub fn tensor(&self, name: &str) -> Option<&SafetensorsInfo> {
        self.tensors.iter().find(|t| t.name == name)
    }

    fn entry<'a>(&'a self, info: &'a SafetensorsInfo) -> Result<TensorEntry<'a>> {
        let bad = |reason: String| Error::InvalidModel { file: self.source.clone(), reason };
        let dtype = info.dtype.ok_or_else(|| {
            bad(format!(
                "tensor '{}' has type {}, which Gantry cannot hold (F32, F16, BF16, I32)",
                info.name, info.file_dtype
            ))
        })?;
        if info.shape.len() > MAX_DIMS {
            return Err(bad(format!("tensor '{}' has {} dimensions, at most {MAX_DIMS}", info.name, info.shape.len())));
        }
        let mut ne = [1usize; MAX_DIMS];
        for (i, &d) in info.shape.iter().rev().enumerate() {
            ne[i] = d;
        }
        let mut desc = TensorDesc::contiguous(dtype, ne).map_err(|r| bad(format!("tensor '{}': {r}", info.name)))?;
        desc.name = Name::new(&info.name);
        let data = self
            .storage
            .bytes()
            .get(info.offset..info.offset + info.size)
            .ok_or_else(|| bad(format!("tensor '{}' lies outside the file", info.name)))?;
        Ok(TensorEntry { name: &info.name, desc, offset: info.offset, data })
    }
}

impl WeightsFile for SafetensorsFile {
    fn source(&self) -> &str {
        &self.source
    }

    fn host_memory(&self) -> HostMemory {
        match &self.storage {
            Storage::Mapped(m) => HostMemory::read_only(m.clone()),
            Storage::Owned(v) => HostMemory::read_only(v.clone()),
        }
    }

    /// Every tensor of a dtype the engine holds; the others (integer
    /// buffers such as BERT's `position_ids`) are left out: a model that
    /// needs one reports it, with its type ([`SafetensorsFile::unloadable`]).
    fn tensor_entries(&self) -> Result<Vec<TensorEntry<'_>>> {
        self.tensors.iter().filter(|t| t.dtype.is_some()).map(|t| self.entry(t)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A safetensors file of `tensors` (name, dtype, shape, bytes), written by the crate.
    pub(crate) fn write(tensors: &[(&str, Dtype, Vec<usize>, Vec<u8>)]) -> Vec<u8> {
        let views: Vec<(String, safetensors::tensor::TensorView<'_>)> = tensors
            .iter()
            .map(|(n, d, s, b)| ((*n).to_owned(), safetensors::tensor::TensorView::new(*d, s.clone(), b).unwrap()))
            .collect();
        safetensors::serialize(views, None).unwrap()
    }

    #[test]
    fn shapes_are_reversed_into_ggml_order_and_foreign_dtypes_are_errors_naming_the_tensor() {
        let f32s: Vec<u8> = (0..6).flat_map(|i| (i as f32).to_le_bytes()).collect();
        let bytes = write(&[("w", Dtype::F32, vec![2, 3], f32s.clone()), ("ids", Dtype::I64, vec![1], vec![0; 8])]);
        let file = SafetensorsFile::from_vec("test.safetensors", bytes).unwrap();
        let w = file.tensor("w").unwrap();
        let entry = file.entry(w).unwrap();
        assert_eq!(entry.desc.ne, [3, 2, 1, 1]);
        assert_eq!(entry.data, &f32s[..]);
        let entries = file.tensor_entries().unwrap();
        assert_eq!(entries.iter().map(|e| e.name).collect::<Vec<_>>(), ["w"], "I64 tensors are not loaded");
        assert_eq!(file.unloadable().get("ids").map(String::as_str), Some("I64"));
        let err = file.entry(file.tensor("ids").unwrap()).unwrap_err().to_string();
        assert!(err.contains("test.safetensors") && err.contains("'ids'") && err.contains("I64"), "{err}");
        let err = SafetensorsFile::from_vec("broken.safetensors", vec![1, 2, 3]).unwrap_err().to_string();
        assert!(err.contains("broken.safetensors"), "{err}");
    }
}
