//! What the loader needs of a weights file, whatever its format (GGUF,
//! safetensors): its name, its bytes as host memory, and each tensor's
//! description and bytes.

use gantry_engine::{HostMemory, TensorDesc};

use crate::Result;

/// One tensor of a weights file.
#[derive(Debug, Clone)]
pub struct TensorEntry<'a> {
    /// Its name in the file.
    pub name: &'a str,
    /// A contiguous description (dtype, shape in ggml order), named as in the file.
    pub desc: TensorDesc,
    /// Where its bytes start in [`WeightsFile::host_memory`].
    pub offset: usize,
    /// Its bytes.
    pub data: &'a [u8],
}

/// A file of named tensors the loader can place in a context.
pub trait WeightsFile {
    /// The file's path, as errors name it.
    fn source(&self) -> &str;
    /// The file's bytes, kept alive by a shared handle (buffers over them copy nothing).
    fn host_memory(&self) -> HostMemory;
    /// Every tensor, in file order; an error names the file and the tensor
    /// whose type or shape the engine cannot hold.
    fn tensor_entries(&self) -> Result<Vec<TensorEntry<'_>>>;
}
