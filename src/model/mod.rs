//! Models: reading GGUF files, loading their tensors into a [`crate::Context`],
//! and the tokenizers their metadata describes.

pub mod fetch;
pub mod gguf;
mod load;

pub use gguf::Gguf;
pub use load::{LoadOptions, LoadProgress, LoadedWeights, load_tensors};
pub mod tokenizer;
