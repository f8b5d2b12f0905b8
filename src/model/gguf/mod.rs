//! GGUF files (versions 2 and 3): metadata, tensor infos and tensor data.
//!
//! ```
//! use gantry::model::gguf::{Gguf, GgufWriter};
//! use gantry::DType;
//! let mut w = GgufWriter::new();
//! w.add_str("general.architecture", "llama");
//! w.add_u32("llama.block_count", 2);
//! w.add_tensor("tok_embd.weight", &[4, 2], DType::F32, vec![0; 32])?;
//! let file = Gguf::parse(&w.to_bytes())?;
//! assert_eq!(file.get_arch::<u32>("block_count")?, 2);
//! assert_eq!(file.tensor("tok_embd.weight")?.ne, [4, 2, 1, 1]);
//! assert!(Gguf::parse(b"GGUF").is_err());
//! # Ok::<(), gantry::Error>(())
//! ```

mod reader;
mod tensor_info;
mod value;
mod writer;

use std::collections::HashMap;
use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use gantry_engine::{HostMemory, Limits};

use crate::{Error, Result};
use memmap2::Mmap;

pub use reader::{ALIGNMENT_KEY, DEFAULT_ALIGNMENT, MAGIC, MAX_ARRAY_DEPTH, MAX_TENSOR_NAME};
pub use tensor_info::TensorInfo;
pub use value::{Array, ArrayElement, FromValue, Value, ValueType};
pub use writer::GgufWriter;

/// The bytes of a GGUF file: a read-only memory map, or bytes in memory.
#[derive(Clone)]
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

/// A parsed GGUF file. Metadata and tensor infos are read up front; tensor
/// data stays in the file's bytes (a memory map for [`Gguf::open`]) and is
/// handed out as slices or, for a buffer over the mapping, as [`HostMemory`].
pub struct Gguf {
    source: String,
    storage: Storage,
    version: u32,
    metadata: Vec<(String, Value)>,
    metadata_index: HashMap<String, usize>,
    tensors: Vec<TensorInfo>,
    tensor_index: HashMap<String, usize>,
    alignment: usize,
    data_offset: usize,
    /// What the file's counts and sizes were held to, and what the loaders
    /// hold the sizes its metadata gives to ([`Gguf::get_arch_count`]).
    limits: Limits,
}

impl Gguf {
    /// Maps the file at `path` read-only and parses it.
    ///
    /// The mapping is shared: tensor data is never copied by the reader, and
    /// [`Gguf::host_memory`] lends the mapping to buffers. As with any memory
    /// map, the file must not be truncated or rewritten while it is in use.
    pub fn open(path: impl AsRef<Path>) -> Result<Gguf> {
        Self::open_with_limits(path, true, &Limits::DEFAULT)
    }

    /// [`Gguf::open`] (`mmap`) or [`Gguf::read`], the file's counts and
    /// sizes held to `limits` instead of [`Limits::DEFAULT`] (a server
    /// loading files it does not trust can hold them tighter).
    pub fn open_with_limits(path: impl AsRef<Path>, mmap: bool, limits: &Limits) -> Result<Gguf> {
        if !mmap {
            let (name, bytes) = crate::model::regular_file::read_regular(path.as_ref())?;
            return Self::from_storage(name, Storage::Owned(Arc::new(bytes)), limits);
        }
        let path = path.as_ref();
        let name = path.display().to_string();
        crate::model::regular_file::check_regular(path)?;
        let file = File::open(path).map_err(|source| Error::Io { context: format!("opening {name}"), source })?;
        let map = gantry_backends::cpu::map_read_only(&file)
            .map_err(|source| Error::Io { context: format!("mapping {name}"), source })?;
        Self::from_storage(name, Storage::Mapped(Arc::new(map)), limits)
    }

    /// Reads the GGUF file at `path` into memory instead of mapping it
    /// (`--no-mmap`): it takes the file's size in memory and the time to
    /// read it, but a file truncated or rewritten while the model runs then
    /// changes nothing, where a mapped one kills the process (`SIGBUS`) or
    /// changes the weights underneath. The read memory is reserved
    /// fallibly: a file larger than the memory is an error, not an abort.
    pub fn read(path: impl AsRef<Path>) -> Result<Gguf> {
        Self::open_with_limits(path, false, &Limits::DEFAULT)
    }

    /// [`Gguf::open`] when `mmap`, else [`Gguf::read`].
    pub fn open_mapped_or_read(path: impl AsRef<Path>, mmap: bool) -> Result<Gguf> {
        Self::open_with_limits(path, mmap, &Limits::DEFAULT)
    }

    /// Parses GGUF bytes (copied once into shared memory the file's tensors
    /// then point into).
    pub fn parse(bytes: &[u8]) -> Result<Gguf> {
        Self::from_vec("<memory>", bytes.to_vec())
    }

    /// Parses GGUF bytes owned by `bytes`, naming them `source` in errors.
    pub fn from_vec(source: impl Into<String>, bytes: Vec<u8>) -> Result<Gguf> {
        Self::from_storage(source.into(), Storage::Owned(Arc::new(bytes)), &Limits::DEFAULT)
    }

    /// [`Gguf::parse`] with the counts and sizes held to `limits`.
    pub fn parse_with_limits(bytes: &[u8], limits: &Limits) -> Result<Gguf> {
        Self::from_storage("<memory>".into(), Storage::Owned(Arc::new(bytes.to_vec())), limits)
    }

    fn from_storage(source: String, storage: Storage, limits: &Limits) -> Result<Gguf> {
        let p = reader::parse(&source, storage.bytes(), limits)?;
        Ok(Gguf {
            source,
            storage,
            version: p.version,
            metadata: p.metadata,
            metadata_index: p.metadata_index,
            tensors: p.tensors,
            tensor_index: p.tensor_index,
            alignment: p.alignment,
            data_offset: p.data_offset,
            limits: *limits,
        })
    }

    /// The limits the file was read under, which the loaders hold its
    /// metadata's sizes to.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The file's path (or `"<memory>"`), as errors name it.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The format version (2 or 3).
    pub fn version(&self) -> u32 {
        self.version
    }

    /// The data alignment (`general.alignment`, default 32).
    pub fn alignment(&self) -> usize {
        self.alignment
    }

    /// Byte offset of the data section from the start of the file.
    pub fn data_offset(&self) -> usize {
        self.data_offset
    }

    /// All the file's bytes.
    pub fn bytes(&self) -> &[u8] {
        self.storage.bytes()
    }

    /// Whether the bytes are a memory map of a file.
    pub fn is_mapped(&self) -> bool {
        matches!(self.storage, Storage::Mapped(_))
    }

    /// The file's bytes as read-only [`HostMemory`] kept alive by a shared
    /// handle (for a buffer over the mapping: no copy).
    pub fn host_memory(&self) -> HostMemory {
        match &self.storage {
            Storage::Mapped(m) => HostMemory::read_only(m.clone()),
            Storage::Owned(v) => HostMemory::read_only(v.clone()),
        }
    }

    fn error(&self, reason: String) -> Error {
        Error::InvalidModel { file: self.source.clone(), reason }
    }

    // ---- metadata --------------------------------------------------------------

    /// Every metadata key and value, in file order.
    pub fn metadata(&self) -> impl ExactSizeIterator<Item = (&str, &Value)> + '_ {
        self.metadata.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// The value of `key`, if present.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.metadata_index.get(key).map(|&i| &self.metadata[i].1)
    }

    /// Whether `key` is present.
    pub fn contains_key(&self, key: &str) -> bool {
        self.metadata_index.contains_key(key)
    }

    /// The value of `key` converted to `T` (see [`FromValue`] for the
    /// conversions); an error names the file and key when it is missing or
    /// of another type.
    pub fn get_as<'a, T: FromValue<'a>>(&'a self, key: &str) -> Result<T> {
        self.get_opt(key)?.ok_or_else(|| self.error(format!("metadata key '{key}' is missing")))
    }

    /// Like [`Gguf::get_as`], but `Ok(None)` when the key is missing; still an
    /// error when it is present with another type.
    pub fn get_opt<'a, T: FromValue<'a>>(&'a self, key: &str) -> Result<Option<T>> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => T::from_value(v).map(Some).ok_or_else(|| {
                self.error(format!("metadata key '{key}' should be {}, but is {}", T::EXPECTED, v.describe()))
            }),
        }
    }

    /// `key` as a `u32`.
    pub fn get_u32(&self, key: &str) -> Result<u32> {
        self.get_as(key)
    }

    /// `key` as an `i32`.
    pub fn get_i32(&self, key: &str) -> Result<i32> {
        self.get_as(key)
    }

    /// `key` as a `u64`.
    pub fn get_u64(&self, key: &str) -> Result<u64> {
        self.get_as(key)
    }

    /// `key` as an `f32` (from `f32` or `f64`).
    pub fn get_f32(&self, key: &str) -> Result<f32> {
        self.get_as(key)
    }

    /// `key` as a `bool`.
    pub fn get_bool(&self, key: &str) -> Result<bool> {
        self.get_as(key)
    }

    /// `key` as a string.
    pub fn get_str(&self, key: &str) -> Result<&str> {
        self.get_as(key)
    }

    /// `key` as an array.
    pub fn get_array(&self, key: &str) -> Result<&Array> {
        self.get_as(key)
    }

    /// `key` as a slice of `T` (an array whose elements are `T`).
    pub fn get_slice<T: ArrayElement>(&self, key: &str) -> Result<&[T]> {
        let array = self.get_array(key)?;
        array.as_slice::<T>().ok_or_else(|| {
            self.error(format!(
                "metadata key '{key}' should be an array of {}, but is an array of {}",
                std::any::type_name::<T>(),
                array.element_type()
            ))
        })
    }

    /// The model architecture (`general.architecture`, e.g. `"llama"`).
    pub fn architecture(&self) -> Result<&str> {
        self.get_str("general.architecture")
    }

    /// The key `"{architecture}.{suffix}"` (`arch_key("block_count")` is
    /// `"llama.block_count"` in a llama file).
    pub fn arch_key(&self, suffix: &str) -> Result<String> {
        Ok(format!("{}.{suffix}", self.architecture()?))
    }

    /// The architecture-prefixed key `suffix`, converted to `T`.
    pub fn get_arch<'a, T: FromValue<'a>>(&'a self, suffix: &str) -> Result<T> {
        let key = self.arch_key(suffix)?;
        self.get_as(&key)
    }

    /// The architecture-prefixed key `suffix`, or `Ok(None)` when missing.
    pub fn get_arch_opt<'a, T: FromValue<'a>>(&'a self, suffix: &str) -> Result<Option<T>> {
        let key = self.arch_key(suffix)?;
        self.get_opt(&key)
    }

    /// The architecture-prefixed `f32` key `suffix` (`Ok(None)` when
    /// missing), which must be finite and positive: a rope base, a rope
    /// scaling factor, a norm's epsilon. Zero, a negative value or NaN there
    /// would give NaN logits, not an error; it is an error naming the key.
    pub fn get_arch_positive(&self, suffix: &str) -> Result<Option<f32>> {
        self.get_arch_f32_where(suffix, |v| v > 0.0, "a finite number above zero")
    }

    /// `{arch}.{suffix}` as a finite number of at least zero (a soft-cap,
    /// where 0 turns it off), `None` when absent; any other value is an
    /// error naming the file, the key and the value.
    pub fn get_arch_non_negative(&self, suffix: &str) -> Result<Option<f32>> {
        self.get_arch_f32_where(suffix, |v| v >= 0.0, "a finite number of at least zero (0: off)")
    }

    /// `{arch}.{suffix}` as a finite `f32` for which `holds` is true, else an
    /// error naming the file, the key and the value, and saying it `must` be.
    fn get_arch_f32_where(&self, suffix: &str, holds: impl Fn(f32) -> bool, must: &str) -> Result<Option<f32>> {
        let Some(value) = self.get_arch_opt::<f32>(suffix)? else { return Ok(None) };
        if !(value.is_finite() && holds(value)) {
            let key = self.arch_key(suffix)?;
            return Err(Error::InvalidModel {
                file: self.source.clone(),
                reason: format!("{key} = {value}: it must be {must}"),
            });
        }
        Ok(Some(value))
    }

    /// `{arch}.{suffix}` as a size of at most `max` (a layer count, a
    /// width, a context length; see [`Limits`]), `None` when absent: a larger
    /// value is an error naming the file and the key, before it sizes an
    /// allocation or a loop.
    pub fn get_arch_count(&self, suffix: &str, max: usize) -> Result<Option<usize>> {
        let Some(value) = self.get_arch_opt::<u64>(suffix)? else { return Ok(None) };
        let key = self.arch_key(suffix)?;
        self.limits.check_count(&key, value, max).map(Some).map_err(|reason| self.error(reason))
    }

    /// [`get_arch_count`](Self::get_arch_count) of a key the file must have.
    pub fn get_arch_count_req(&self, suffix: &str, max: usize) -> Result<usize> {
        match self.get_arch_count(suffix, max)? {
            Some(n) => Ok(n),
            None => Err(self.error(format!("metadata key '{}' is missing", self.arch_key(suffix)?))),
        }
    }

    /// [`get_arch_count_req`](Self::get_arch_count_req) of a size that must
    /// be at least one (a sliding window: a window of 0 would hide every
    /// key, the token's own included).
    pub fn get_arch_positive_count_req(&self, suffix: &str, max: usize) -> Result<usize> {
        match self.get_arch_count_req(suffix, max)? {
            0 => Err(self.error(format!("{} = 0: it must be at least 1", self.arch_key(suffix)?))),
            n => Ok(n),
        }
    }

    // ---- tensors ---------------------------------------------------------------

    /// Whether the file has a tensor named `name`.
    pub fn has_tensor(&self, name: &str) -> bool {
        self.tensors().iter().any(|t| t.name == name)
    }

    /// Every tensor info, in file order.
    pub fn tensors(&self) -> &[TensorInfo] {
        &self.tensors
    }

    /// The tensor named `name`; an error names the file when it is missing.
    pub fn tensor(&self, name: &str) -> Result<&TensorInfo> {
        self.tensor_index
            .get(name)
            .map(|&i| &self.tensors[i])
            .ok_or_else(|| self.error(format!("tensor '{name}' is missing")))
    }

    /// Byte offset of `info`'s data from the start of the file.
    pub fn tensor_file_offset(&self, info: &TensorInfo) -> usize {
        // The reader checked that every tensor lies inside the file.
        self.data_offset + info.offset
    }

    /// The bytes of `info`'s data.
    pub fn tensor_data(&self, info: &TensorInfo) -> Result<&[u8]> {
        let start = self.data_offset.checked_add(info.offset);
        start
            .and_then(|s| Some(s..s.checked_add(info.size)?))
            .and_then(|range| self.bytes().get(range))
            .ok_or_else(|| self.error(format!("tensor '{}' lies outside the file", info.name)))
    }

    /// Total bytes of tensor data.
    pub fn tensor_bytes(&self) -> usize {
        self.tensors.iter().map(|t| t.size).sum()
    }
}

impl std::fmt::Debug for Gguf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gguf")
            .field("source", &self.source)
            .field("version", &self.version)
            .field("metadata", &self.metadata.len())
            .field("tensors", &self.tensors.len())
            .field("alignment", &self.alignment)
            .field("data_offset", &self.data_offset)
            .finish()
    }
}

#[cfg(test)]
mod tests;
