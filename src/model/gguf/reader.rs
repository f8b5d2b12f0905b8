//! Parsing GGUF bytes: header, metadata, tensor infos, data section.
//!
//! Every read is bounds-checked, every count is compared with what the
//! remaining bytes could hold before anything is allocated for it, and every
//! size computation is checked, so any input gives a parsed file or an
//! [`Error::InvalidModel`] naming the file and the problem.

use std::collections::HashMap;
use std::collections::hash_map::Entry;

use gantry_engine::{DType, Limits, MAX_DIMS};

use crate::{Error, Result};

use super::tensor_info::TensorInfo;
use super::value::{Array, Value, ValueType};

/// `"GGUF"` as the first four bytes.
pub const MAGIC: [u8; 4] = *b"GGUF";
/// Data alignment when `general.alignment` is absent.
pub const DEFAULT_ALIGNMENT: usize = 32;
/// The metadata key holding the data alignment.
pub const ALIGNMENT_KEY: &str = "general.alignment";
/// Longest tensor name ggml accepts (its 64-byte name buffer minus the NUL).
pub const MAX_TENSOR_NAME: usize = 63;
/// Deepest nesting of arrays accepted (real files nest at most once; the
/// limit keeps recursion bounded on hostile input).
pub const MAX_ARRAY_DEPTH: usize = 16;

/// Everything read from a GGUF file except the tensor bytes.
#[derive(Debug)]
pub(crate) struct Parsed {
    pub version: u32,
    pub metadata: Vec<(String, Value)>,
    pub metadata_index: HashMap<String, usize>,
    pub tensors: Vec<TensorInfo>,
    pub tensor_index: HashMap<String, usize>,
    pub alignment: usize,
    pub data_offset: usize,
}

/// A bounds-checked reader over the file's bytes.
struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
    file: &'a str,
}

impl<'a> Cursor<'a> {
    fn error(&self, reason: String) -> Error {
        Error::InvalidModel { file: self.file.to_owned(), reason }
    }

    fn remaining(&self) -> usize {
        self.bytes.len() - self.pos
    }

    fn take(&mut self, n: usize, what: &dyn Fn() -> String) -> Result<&'a [u8]> {
        if n > self.remaining() {
            return Err(self.error(format!(
                "truncated: {} needs {n} bytes at offset {} but only {} remain",
                what(),
                self.pos,
                self.remaining()
            )));
        }
        let out = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    fn array<const N: usize>(&mut self, what: &dyn Fn() -> String) -> Result<[u8; N]> {
        let bytes = self.take(N, what)?;
        let mut out = [0; N];
        out.copy_from_slice(bytes);
        Ok(out)
    }

    fn u32(&mut self, what: &dyn Fn() -> String) -> Result<u32> {
        self.array(what).map(u32::from_le_bytes)
    }

    fn u64(&mut self, what: &dyn Fn() -> String) -> Result<u64> {
        self.array(what).map(u64::from_le_bytes)
    }

    /// A count of items each at least `min_size` bytes long, refused when the
    /// remaining bytes could not hold that many.
    fn count(&mut self, min_size: usize, what: &dyn Fn() -> String) -> Result<usize> {
        let at = self.pos;
        let n = self.u64(&|| format!("the count of {}", what()))?;
        let fits = usize::try_from(n).ok().filter(|&n| n.checked_mul(min_size).is_some_and(|b| b <= self.remaining()));
        fits.ok_or_else(|| {
            self.error(format!(
                "{} claims {n} items at offset {at}, but the {} remaining bytes hold at most {}",
                what(),
                self.remaining(),
                self.remaining() / min_size.max(1)
            ))
        })
    }

    fn string(&mut self, what: &dyn Fn() -> String) -> Result<String> {
        let at = self.pos;
        let len = self.count(1, &|| format!("the length of {}", what()))?;
        let bytes = self.take(len, what)?;
        match std::str::from_utf8(bytes) {
            Ok(s) => Ok(s.to_owned()),
            Err(e) => Err(self.error(format!("{} (at offset {at}) is not valid UTF-8: {e}", what()))),
        }
    }

    fn value_type(&mut self, what: &dyn Fn() -> String) -> Result<ValueType> {
        let at = self.pos;
        let id = self.u32(&|| format!("the type of {}", what()))?;
        ValueType::from_id(id)
            .ok_or_else(|| self.error(format!("{} has unknown value type {id} (at offset {at})", what())))
    }

    fn value(&mut self, ty: ValueType, depth: usize, what: &dyn Fn() -> String) -> Result<Value> {
        Ok(match ty {
            ValueType::U8 => Value::U8(u8::from_le_bytes(self.array(what)?)),
            ValueType::I8 => Value::I8(i8::from_le_bytes(self.array(what)?)),
            ValueType::U16 => Value::U16(u16::from_le_bytes(self.array(what)?)),
            ValueType::I16 => Value::I16(i16::from_le_bytes(self.array(what)?)),
            ValueType::U32 => Value::U32(u32::from_le_bytes(self.array(what)?)),
            ValueType::I32 => Value::I32(i32::from_le_bytes(self.array(what)?)),
            ValueType::U64 => Value::U64(u64::from_le_bytes(self.array(what)?)),
            ValueType::I64 => Value::I64(i64::from_le_bytes(self.array(what)?)),
            ValueType::F32 => Value::F32(f32::from_le_bytes(self.array(what)?)),
            ValueType::F64 => Value::F64(f64::from_le_bytes(self.array(what)?)),
            ValueType::Bool => Value::Bool(self.bool(what)?),
            ValueType::String => Value::String(self.string(what)?),
            ValueType::Array => Value::Array(self.array_value(depth, what)?),
        })
    }

    fn bool(&mut self, what: &dyn Fn() -> String) -> Result<bool> {
        let at = self.pos;
        match self.array::<1>(what)?[0] {
            0 => Ok(false),
            1 => Ok(true),
            b => Err(self.error(format!("{} at offset {at} is a bool of value {b}, not 0 or 1", what()))),
        }
    }

    fn array_value(&mut self, depth: usize, what: &dyn Fn() -> String) -> Result<Array> {
        if depth >= MAX_ARRAY_DEPTH {
            return Err(self.error(format!("{} nests arrays deeper than {MAX_ARRAY_DEPTH} levels", what())));
        }
        let ty = self.value_type(&|| format!("the elements of {}", what()))?;
        let n = self.count(ty.min_encoded_size(), &|| format!("array {}", what()))?;
        // Fixed-size elements are read in one bounds check.
        macro_rules! fixed {
            ($t:ty, $variant:ident) => {{
                let size = std::mem::size_of::<$t>();
                let bytes = self.take(n * size, what)?;
                Array::$variant(
                    bytes
                        .chunks_exact(size)
                        .map(|c| {
                            let mut b = [0u8; std::mem::size_of::<$t>()];
                            b.copy_from_slice(c);
                            <$t>::from_le_bytes(b)
                        })
                        .collect(),
                )
            }};
        }
        Ok(match ty {
            ValueType::U8 => Array::U8(self.take(n, what)?.to_vec()),
            ValueType::I8 => fixed!(i8, I8),
            ValueType::U16 => fixed!(u16, U16),
            ValueType::I16 => fixed!(i16, I16),
            ValueType::U32 => fixed!(u32, U32),
            ValueType::I32 => fixed!(i32, I32),
            ValueType::U64 => fixed!(u64, U64),
            ValueType::I64 => fixed!(i64, I64),
            ValueType::F32 => fixed!(f32, F32),
            ValueType::F64 => fixed!(f64, F64),
            ValueType::Bool => {
                let mut v = Vec::with_capacity(n);
                for i in 0..n {
                    v.push(self.bool(&|| format!("element {i} of {}", what()))?);
                }
                Array::Bool(v)
            }
            ValueType::String => {
                let mut v = Vec::with_capacity(n);
                for i in 0..n {
                    v.push(self.string(&|| format!("element {i} of {}", what()))?);
                }
                Array::String(v)
            }
            ValueType::Array => {
                let mut v = Vec::with_capacity(n);
                for i in 0..n {
                    v.push(self.array_value(depth + 1, &|| format!("element {i} of {}", what()))?);
                }
                Array::Array(v)
            }
        })
    }
}

/// Parses a whole GGUF file held in `bytes`, its counts and shapes held to
/// `limits`; `file` names it in errors.
pub(crate) fn parse(file: &str, bytes: &[u8], limits: &Limits) -> Result<Parsed> {
    let mut c = Cursor { bytes, pos: 0, file };

    let magic = c.array::<4>(&|| "the magic number".into())?;
    if magic != MAGIC {
        return Err(c.error(format!("not a GGUF file: the first bytes are {magic:02x?}, not \"GGUF\"")));
    }
    let version = c.u32(&|| "the version".into())?;
    if !(2..=3).contains(&version) {
        return Err(c.error(format!("unsupported GGUF version {version} (only 2 and 3 are read)")));
    }
    // Each tensor info takes at least a name length, n_dims, type and offset;
    // each key-value pair at least a key length, a type and a one-byte value.
    let n_tensors_at = c.pos;
    let n_tensors = c.u64(&|| "the tensor count".into())?;
    let n_kv = c.count(8 + 4 + 1, &|| "the metadata".into())?;
    let n_tensors = usize::try_from(n_tensors)
        .ok()
        .filter(|&n| n.checked_mul(8 + 4 + 4 + 8).is_some_and(|b| b <= c.remaining()))
        .ok_or_else(|| {
            c.error(format!(
                "the header claims {n_tensors} tensors (at offset {n_tensors_at}), more than the file's {} bytes can describe",
                bytes.len()
            ))
        })?;
    // The bytes bound the count; the limit keeps a large file from
    // declaring more tensors than any model has.
    limits.check_count("the tensor count", n_tensors as u64, limits.max_tensors).map_err(|e| c.error(e))?;

    let mut metadata = Vec::with_capacity(n_kv);
    let mut metadata_index = HashMap::with_capacity(n_kv);
    for i in 0..n_kv {
        let key = c.string(&|| format!("the key of metadata pair {i}"))?;
        let ty = c.value_type(&|| format!("metadata key '{key}'"))?;
        let value = c.value(ty, 0, &|| format!("metadata key '{key}'"))?;
        match metadata_index.entry(key.clone()) {
            Entry::Occupied(_) => return Err(c.error(format!("metadata key '{key}' appears twice"))),
            Entry::Vacant(slot) => {
                slot.insert(metadata.len());
            }
        }
        metadata.push((key, value));
    }

    let alignment = match metadata_index.get(ALIGNMENT_KEY).map(|&i| &metadata[i].1) {
        None => DEFAULT_ALIGNMENT,
        Some(Value::U32(a)) if a.is_power_of_two() => *a as usize,
        Some(other) => {
            return Err(c.error(format!("'{ALIGNMENT_KEY}' must be a u32 power of two, not {}", other.describe())));
        }
    };

    let mut tensors = Vec::with_capacity(n_tensors);
    let mut tensor_index = HashMap::with_capacity(n_tensors);
    for i in 0..n_tensors {
        let info = read_tensor_info(&mut c, i, alignment, limits)?;
        match tensor_index.entry(info.name.clone()) {
            Entry::Occupied(_) => return Err(c.error(format!("tensor '{}' appears twice", info.name))),
            Entry::Vacant(slot) => {
                slot.insert(tensors.len());
            }
        }
        tensors.push(info);
    }

    let data_offset =
        c.pos.checked_next_multiple_of(alignment).ok_or_else(|| c.error("the data section offset overflows".into()))?;
    check_data_section(&c, &tensors, data_offset)?;

    Ok(Parsed { version, metadata, metadata_index, tensors, tensor_index, alignment, data_offset })
}

fn read_tensor_info(c: &mut Cursor<'_>, i: usize, alignment: usize, limits: &Limits) -> Result<TensorInfo> {
    let name = c.string(&|| format!("the name of tensor {i}"))?;
    if name.len() > MAX_TENSOR_NAME {
        return Err(c.error(format!(
            "tensor {i}'s name '{name}' is {} bytes long, more than ggml's {MAX_TENSOR_NAME}",
            name.len()
        )));
    }
    let n_dims = c.u32(&|| format!("the dimension count of tensor '{name}'"))? as usize;
    if n_dims > MAX_DIMS {
        return Err(c.error(format!("tensor '{name}' has {n_dims} dimensions, more than {MAX_DIMS}")));
    }
    let mut ne = [1usize; MAX_DIMS];
    for (d, slot) in ne.iter_mut().enumerate().take(n_dims) {
        let v = c.u64(&|| format!("dimension {d} of tensor '{name}'"))?;
        // ggml stores dimensions as int64.
        *slot = usize::try_from(v)
            .ok()
            .filter(|&v| v as u64 <= i64::MAX as u64)
            .ok_or_else(|| c.error(format!("tensor '{name}' dimension {d} is {v}, too large")))?;
    }
    // An empty tensor may not hide a huge dimension that a kernel or a
    // shape computation would loop over or multiply.
    limits.check_shape(&ne).map_err(|reason| c.error(format!("tensor '{name}': {reason}")))?;
    let type_id = c.u32(&|| format!("the type of tensor '{name}'"))?;
    let dtype = DType::from_ggml_id(type_id).ok_or_else(|| {
        c.error(format!("tensor '{name}' has ggml type {type_id}, which is unknown or not supported by Gantry"))
    })?;
    let offset = c.u64(&|| format!("the data offset of tensor '{name}'"))?;
    let offset = usize::try_from(offset)
        .map_err(|_| c.error(format!("tensor '{name}' data offset {offset} does not fit in memory")))?;
    if !offset.is_multiple_of(alignment) {
        return Err(
            c.error(format!("tensor '{name}' data offset {offset} is not a multiple of the alignment {alignment}"))
        );
    }
    let size =
        tensor_size(dtype, ne).map_err(|reason| c.error(format!("tensor '{name}' ({dtype} {ne:?}): {reason}")))?;
    Ok(TensorInfo { name, n_dims, ne, dtype, offset, size })
}

/// Bytes of a contiguous tensor of `dtype` and shape `ne`, checked.
pub(crate) fn tensor_size(dtype: DType, ne: [usize; MAX_DIMS]) -> Result<usize, String> {
    let bs = dtype.block_size();
    if !ne[0].is_multiple_of(bs) {
        return Err(format!("row length {} is not a multiple of the block size {bs}", ne[0]));
    }
    let mut size = dtype.row_size(ne[0]).ok_or("the row size overflows")?;
    let mut elements = ne[0];
    for &n in &ne[1..] {
        size = size.checked_mul(n).ok_or("the size overflows")?;
        elements = elements.checked_mul(n).ok_or("the element count overflows")?;
    }
    if size > isize::MAX as usize || elements > i64::MAX as usize {
        return Err("the size overflows".into());
    }
    Ok(size)
}

/// Every tensor lies inside the file after `data_offset`, and no two overlap.
fn check_data_section(c: &Cursor<'_>, tensors: &[TensorInfo], data_offset: usize) -> Result<()> {
    if !tensors.is_empty() && data_offset > c.bytes.len() {
        return Err(c.error(format!(
            "the data section starts at byte {data_offset}, past the end of the file ({} bytes)",
            c.bytes.len()
        )));
    }
    let data_len = c.bytes.len().saturating_sub(data_offset);
    for t in tensors {
        let end = t.offset.checked_add(t.size);
        if end.is_none_or(|end| end > data_len) {
            return Err(c.error(format!(
                "tensor '{}' ({} bytes at data offset {}) lies outside the file's data section of {data_len} bytes",
                t.name, t.size, t.offset
            )));
        }
    }
    let mut spans: Vec<&TensorInfo> = tensors.iter().filter(|t| t.size > 0).collect();
    spans.sort_unstable_by_key(|t| t.offset);
    for pair in spans.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        if a.offset + a.size > b.offset {
            return Err(c.error(format!(
                "tensors '{}' (bytes {}..{}) and '{}' (from byte {}) overlap",
                a.name,
                a.offset,
                a.offset + a.size,
                b.name,
                b.offset
            )));
        }
    }
    Ok(())
}
