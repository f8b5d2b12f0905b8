//! A weights file read as F32: every quantized (or F16, BF16) tensor
//! dequantized once, in memory. A model loaded from it runs the float
//! forward over exactly the weights of its quantized file, with no
//! activation quantized for a product: what tells the arithmetic of
//! quantized products (which makes some models' results move by a tenth of a
//! nat from any rounding change, see `tests/gemma3_reference.rs`) apart from
//! the model's own structure.

use std::sync::Arc;

use gantry_engine::{DType, HostMemory, TensorDesc};
use half::{bf16, f16};

use super::{TensorEntry, WeightsFile};
use crate::{Error, Result};

/// Tensors start at multiples of this many bytes, as in GGUF files (what
/// SIMD kernels and mapped buffers expect).
const ALIGNMENT: usize = 32;

/// One tensor of a [`DequantizedFile`]: where its F32 values lie.
#[derive(Debug, Clone)]
struct Dequantized {
    name: String,
    desc: TensorDesc,
    offset: usize,
    len: usize,
}

/// The F32 values of every tensor of a file, in one block of memory that
/// buffers can map without a copy.
///
/// ```no_run
/// # fn main() -> gantry::Result<()> {
/// use gantry::model::{DequantizedFile, Gguf, WeightsFile};
/// let gguf = Gguf::open("model-q4_k_m.gguf")?;
/// let f32_weights = DequantizedFile::new(&gguf)?;
/// assert!(f32_weights.tensor_entries()?.iter().all(|e| e.desc.dtype == gantry::DType::F32));
/// # Ok(()) }
/// ```
pub struct DequantizedFile {
    source: String,
    values: Arc<F32Bytes>,
    tensors: Vec<Dequantized>,
}

/// F32 storage read as bytes (4-byte aligned, as F32 kernels require).
struct F32Bytes(Vec<f32>);

impl AsRef<[u8]> for F32Bytes {
    fn as_ref(&self) -> &[u8] {
        bytemuck::cast_slice(&self.0)
    }
}

impl DequantizedFile {
    /// Dequantizes every tensor of `file` (F32 tensors are copied as they
    /// are). An error names the file and the tensor whose type has no F32
    /// reading (integer tensors) or whose bytes do not fit its shape.
    pub fn new(file: &dyn WeightsFile) -> Result<Self> {
        let entries = file.tensor_entries()?;
        let bad = |name: &str, reason: String| Error::InvalidModel {
            file: file.source().to_owned(),
            reason: format!("tensor '{name}' cannot be read as F32: {reason}"),
        };
        let mut tensors = Vec::with_capacity(entries.len());
        let mut total = 0usize;
        for e in &entries {
            let desc = TensorDesc {
                name: e.desc.name,
                ..TensorDesc::contiguous(DType::F32, e.desc.ne).map_err(|r| bad(e.name, r))?
            };
            let len = desc.nbytes();
            let offset = total
                .checked_next_multiple_of(ALIGNMENT)
                .and_then(|o| Some((o, o.checked_add(len)?)))
                .ok_or_else(|| bad(e.name, "the F32 copy of the file's tensors overflows".into()));
            let (offset, end) = offset?;
            total = end;
            tensors.push(Dequantized { name: e.name.to_owned(), desc, offset, len });
        }
        // Four bytes a weight: a legitimate size can still be more than the
        // machine holds, an error rather than an abort.
        let mut values = Vec::new();
        values.try_reserve_exact(total.div_ceil(4)).map_err(|_| Error::InvalidModel {
            file: file.source().to_owned(),
            reason: format!("no memory for the {total} bytes of its weights as F32"),
        })?;
        values.resize(total.div_ceil(4), 0f32);
        for (e, t) in entries.iter().zip(&tensors) {
            let out = &mut values[t.offset / 4..(t.offset + t.len) / 4];
            to_f32(e.desc.dtype, e.data, e.desc.ne[0], out).map_err(|r| bad(e.name, r))?;
        }
        Ok(Self { source: file.source().to_owned(), values: Arc::new(F32Bytes(values)), tensors })
    }
}

/// Writes the values of `data` (rows of `row_len` elements of `dtype`) into `out` as f32.
fn to_f32(dtype: DType, data: &[u8], row_len: usize, out: &mut [f32]) -> Result<(), String> {
    let short = || format!("{} bytes of {dtype} hold fewer than {} values", data.len(), out.len());
    match dtype {
        DType::F32 => {
            let bytes = data.get(..out.len() * 4).ok_or_else(short)?;
            bytemuck::cast_slice_mut::<f32, u8>(out).copy_from_slice(bytes);
        }
        DType::F16 | DType::BF16 => {
            let bytes = data.get(..out.len() * 2).ok_or_else(short)?;
            for (o, b) in out.iter_mut().zip(bytes.chunks_exact(2)) {
                let bits = u16::from_le_bytes([b[0], b[1]]);
                *o = if dtype == DType::F16 { f16::from_bits(bits).to_f32() } else { bf16::from_bits(bits).to_f32() };
            }
        }
        _ if dtype.is_quantized() => {
            let row_bytes = dtype
                .row_size(row_len)
                .ok_or_else(|| format!("rows of {row_len} values are not whole {dtype} blocks"))?;
            if row_len == 0 || data.len() < out.len() / row_len * row_bytes {
                return Err(short());
            }
            for (row, o) in data.chunks_exact(row_bytes).zip(out.chunks_exact_mut(row_len)) {
                gantry_engine::quant::dequantize_row(dtype, row, o).map_err(|e| e.to_string())?;
            }
        }
        _ => return Err(format!("{dtype} is not a float or quantized type")),
    }
    Ok(())
}

impl WeightsFile for DequantizedFile {
    fn source(&self) -> &str {
        &self.source
    }

    fn host_memory(&self) -> HostMemory {
        HostMemory::read_only(self.values.clone())
    }

    fn tensor_entries(&self) -> Result<Vec<TensorEntry<'_>>> {
        let bytes = (*self.values).as_ref();
        Ok(self
            .tensors
            .iter()
            .map(|t| TensorEntry {
                name: &t.name,
                desc: t.desc,
                offset: t.offset,
                data: &bytes[t.offset..t.offset + t.len],
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use bytemuck::Zeroable;

    use super::*;
    use crate::model::gguf::Gguf;

    #[test]
    fn every_tensor_reads_as_the_dequantized_values_of_its_blocks() {
        use gantry_engine::quant::{BlockQ8_0, dequantize_blocks, quantize_blocks};
        let values: Vec<f32> = (0..64).map(|i| (i as f32 - 20.0) * 0.37).collect();
        let mut blocks = vec![BlockQ8_0::zeroed(); 2];
        quantize_blocks(&values, &mut blocks);
        let halves: Vec<u8> = values[..32].iter().flat_map(|&v| f16::from_f32(v).to_le_bytes()).collect();
        let mut w = crate::model::gguf::GgufWriter::new();
        w.add_tensor("q8", &[32, 2], DType::Q8_0, bytemuck::cast_slice(&blocks).to_vec()).unwrap();
        w.add_tensor("h", &[32], DType::F16, halves).unwrap();
        let gguf = Gguf::parse(&w.to_bytes()).unwrap();
        let f = DequantizedFile::new(&gguf).unwrap();
        let entries = f.tensor_entries().unwrap();
        let read = |i: usize| bytemuck::pod_collect_to_vec::<u8, f32>(entries[i].data);
        let mut want = vec![0f32; 64];
        dequantize_blocks(&blocks, &mut want);
        assert_eq!((entries[0].name, entries[0].desc.dtype, entries[0].desc.ne), ("q8", DType::F32, [32, 2, 1, 1]));
        assert_eq!(read(0), want);
        assert_eq!(read(1), values[..32].iter().map(|&v| f16::from_f32(v).to_f32()).collect::<Vec<_>>());
        assert!(entries.iter().all(|e| e.offset % ALIGNMENT == 0 && e.desc.dtype == DType::F32));
    }

    #[test]
    fn an_integer_tensor_is_an_error_naming_it() {
        let mut w = crate::model::gguf::GgufWriter::new();
        w.add_tensor("ids", &[4], DType::I32, vec![0; 16]).unwrap();
        let gguf = Gguf::parse(&w.to_bytes()).unwrap();
        let e = DequantizedFile::new(&gguf).err().expect("I32 has no F32 reading").to_string();
        assert!(e.contains("'ids'") && e.contains("i32"), "{e}");
    }
}
