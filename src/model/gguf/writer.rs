//! Writing small GGUF files in memory: for tests, fuzz seeds and tools.

use gantry_engine::DType;

use crate::{Error, Result};

use super::reader::{ALIGNMENT_KEY, DEFAULT_ALIGNMENT, MAGIC, tensor_size};
use super::value::{Array, Value};

/// One tensor to write: its info as it will appear in the file, and its bytes.
struct PendingTensor {
    name: String,
    dims: Vec<u64>,
    type_id: u32,
    /// `None`: placed after the previous tensor, aligned. `Some`: written as is.
    offset: Option<u64>,
    data: Vec<u8>,
}

/// Builds a GGUF file in memory.
///
/// Tensors are laid out in the order added, each at the next aligned offset.
/// [`GgufWriter::add_raw_tensor_info`] writes infos exactly as given (any
/// type id, any offset) to build malformed files for tests.
pub struct GgufWriter {
    version: u32,
    alignment: usize,
    metadata: Vec<(String, Value)>,
    tensors: Vec<PendingTensor>,
}

impl Default for GgufWriter {
    fn default() -> Self {
        Self::new()
    }
}

impl GgufWriter {
    /// An empty version-3 file with the default alignment.
    pub fn new() -> Self {
        Self { version: 3, alignment: DEFAULT_ALIGNMENT, metadata: Vec::new(), tensors: Vec::new() }
    }

    /// Sets the version number written in the header (the reader accepts 2 and 3).
    pub fn set_version(&mut self, version: u32) -> &mut Self {
        self.version = version;
        self
    }

    /// Sets the data alignment and writes it as `general.alignment`.
    pub fn set_alignment(&mut self, alignment: u32) -> &mut Self {
        self.alignment = alignment.max(1) as usize;
        self.metadata.retain(|(k, _)| k != ALIGNMENT_KEY);
        self.metadata.push((ALIGNMENT_KEY.into(), Value::U32(alignment)));
        self
    }

    /// Adds a key with any value (duplicates are written as given).
    pub fn add(&mut self, key: &str, value: Value) -> &mut Self {
        self.metadata.push((key.into(), value));
        self
    }

    /// Removes every value of `key` (to replace one a helper wrote).
    pub fn remove(&mut self, key: &str) -> &mut Self {
        self.metadata.retain(|(k, _)| k != key);
        self
    }

    /// Adds a `u32` value.
    pub fn add_u32(&mut self, key: &str, v: u32) -> &mut Self {
        self.add(key, Value::U32(v))
    }

    /// Adds an `i32` value.
    pub fn add_i32(&mut self, key: &str, v: i32) -> &mut Self {
        self.add(key, Value::I32(v))
    }

    /// Adds an `f32` value.
    pub fn add_f32(&mut self, key: &str, v: f32) -> &mut Self {
        self.add(key, Value::F32(v))
    }

    /// Adds a `bool` value.
    pub fn add_bool(&mut self, key: &str, v: bool) -> &mut Self {
        self.add(key, Value::Bool(v))
    }

    /// Adds a string value.
    pub fn add_str(&mut self, key: &str, v: &str) -> &mut Self {
        self.add(key, Value::String(v.into()))
    }

    /// Adds an array value.
    pub fn add_array(&mut self, key: &str, v: Array) -> &mut Self {
        self.add(key, Value::Array(v))
    }

    /// Adds a tensor with dimensions `dims` (ggml order) and its `data`,
    /// which must be exactly the tensor's size.
    pub fn add_tensor(&mut self, name: &str, dims: &[usize], dtype: DType, data: Vec<u8>) -> Result<&mut Self> {
        let mut ne = [1; gantry_engine::MAX_DIMS];
        if dims.len() > ne.len() {
            return Err(writer_error(format!("tensor '{name}' has {} dimensions", dims.len())));
        }
        ne[..dims.len()].copy_from_slice(dims);
        let size = tensor_size(dtype, ne).map_err(|r| writer_error(format!("tensor '{name}': {r}")))?;
        if size != data.len() {
            return Err(writer_error(format!("tensor '{name}' needs {size} bytes, {} given", data.len())));
        }
        self.tensors.push(PendingTensor {
            name: name.into(),
            dims: dims.iter().map(|&d| d as u64).collect(),
            type_id: dtype.ggml_id(),
            offset: None,
            data,
        });
        Ok(self)
    }

    /// Adds a tensor info written exactly as given, with no data (for
    /// building malformed files).
    pub fn add_raw_tensor_info(&mut self, name: &str, dims: &[u64], type_id: u32, offset: u64) -> &mut Self {
        self.tensors.push(PendingTensor {
            name: name.into(),
            dims: dims.to_vec(),
            type_id,
            offset: Some(offset),
            data: Vec::new(),
        });
        self
    }

    /// The file's bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(&MAGIC);
        out.extend_from_slice(&self.version.to_le_bytes());
        out.extend_from_slice(&(self.tensors.len() as u64).to_le_bytes());
        out.extend_from_slice(&(self.metadata.len() as u64).to_le_bytes());
        for (key, value) in &self.metadata {
            write_str(&mut out, key);
            out.extend_from_slice(&value.value_type().id().to_le_bytes());
            write_value(&mut out, value);
        }
        let mut next = 0u64;
        let mut offsets = Vec::with_capacity(self.tensors.len());
        for t in &self.tensors {
            let offset = t.offset.unwrap_or(next);
            offsets.push(offset);
            if t.offset.is_none() {
                next = (offset + t.data.len() as u64).next_multiple_of(self.alignment as u64);
            }
            write_str(&mut out, &t.name);
            out.extend_from_slice(&(t.dims.len() as u32).to_le_bytes());
            for d in &t.dims {
                out.extend_from_slice(&d.to_le_bytes());
            }
            out.extend_from_slice(&t.type_id.to_le_bytes());
            out.extend_from_slice(&offset.to_le_bytes());
        }
        let data_start = out.len().next_multiple_of(self.alignment);
        out.resize(data_start, 0);
        for (t, &offset) in self.tensors.iter().zip(&offsets) {
            if t.offset.is_some() {
                continue;
            }
            out.resize(data_start + offset as usize, 0);
            out.extend_from_slice(&t.data);
        }
        if !self.tensors.is_empty() {
            out.resize(out.len().next_multiple_of(self.alignment), 0);
        }
        out
    }
}

fn writer_error(reason: String) -> Error {
    Error::InvalidModel { file: "<GgufWriter>".into(), reason }
}

fn write_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

fn write_value(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::U8(v) => out.push(*v),
        Value::I8(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::U16(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::I16(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::U32(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::I32(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::U64(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::I64(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::F32(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::F64(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::Bool(v) => out.push(u8::from(*v)),
        Value::String(s) => write_str(out, s),
        Value::Array(a) => write_array(out, a),
    }
}

fn write_array(out: &mut Vec<u8>, array: &Array) {
    out.extend_from_slice(&array.element_type().id().to_le_bytes());
    out.extend_from_slice(&(array.len() as u64).to_le_bytes());
    macro_rules! each {
        ($v:expr) => {
            for x in $v {
                out.extend_from_slice(&x.to_le_bytes());
            }
        };
    }
    match array {
        Array::U8(v) => out.extend_from_slice(v),
        Array::I8(v) => each!(v),
        Array::U16(v) => each!(v),
        Array::I16(v) => each!(v),
        Array::U32(v) => each!(v),
        Array::I32(v) => each!(v),
        Array::U64(v) => each!(v),
        Array::I64(v) => each!(v),
        Array::F32(v) => each!(v),
        Array::F64(v) => each!(v),
        Array::Bool(v) => out.extend(v.iter().map(|&b| u8::from(b))),
        Array::String(v) => v.iter().for_each(|s| write_str(out, s)),
        Array::Array(v) => v.iter().for_each(|a| write_array(out, a)),
    }
}
