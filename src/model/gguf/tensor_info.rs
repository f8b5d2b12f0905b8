//! Tensor infos: what the file says about each tensor.

use gantry_engine::{DType, MAX_DIMS, TensorDesc};

/// One tensor described by a GGUF file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorInfo {
    /// The name, as in the file (at most 63 bytes).
    pub name: String,
    /// Number of dimensions the file gives (0 to 4).
    pub n_dims: usize,
    /// Elements per dimension in ggml order (dimension 0 fastest), padded with 1s.
    pub ne: [usize; MAX_DIMS],
    /// Element type.
    pub dtype: DType,
    /// Byte offset of the data from the start of the data section.
    pub offset: usize,
    /// Bytes of data (contiguous).
    pub size: usize,
}

impl TensorInfo {
    /// The dimensions the file gives (`ne[..n_dims]`).
    pub fn dims(&self) -> &[usize] {
        &self.ne[..self.n_dims]
    }

    /// Number of elements.
    pub fn nelements(&self) -> usize {
        // The reader checked that the product does not overflow.
        self.ne.iter().product()
    }

    /// A contiguous tensor description of this tensor, named as in the file.
    pub fn desc(&self) -> Result<TensorDesc, String> {
        let mut desc = TensorDesc::contiguous(self.dtype, self.ne)?;
        desc.name = gantry_engine::Name::new(&self.name);
        Ok(desc)
    }
}
