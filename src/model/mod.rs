//! The model layer: reading GGUF files, loading their tensors into a
//! [`crate::Context`], the tokenizers their metadata describes, and
//! llama-family graphs over the engine.

pub mod fetch;
pub mod gguf;
pub mod llama;
pub(crate) mod load;
pub mod sampler;
pub mod tokenizer;

pub use gguf::Gguf;
pub use load::{LoadOptions, LoadProgress, LoadedWeights, load_tensors};
