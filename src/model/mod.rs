//! Models: reading GGUF files, loading their tensors into a [`crate::Context`],
//! and the tokenizers their metadata describes.

pub mod gguf;
