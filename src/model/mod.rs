//! The model layer: reading model files (GGUF, safetensors), loading their
//! tensors into a [`crate::Context`], the tokenizers they describe, the
//! shared building blocks ([`blocks`]) and the families made of them:
//! decoders ([`decoder`], configured by [`llama`] and [`gemma3`]) and the
//! BERT encoder ([`bert`]); the sampler and chat templates.

mod abort_callback;
pub mod bert;
pub mod blocks;
pub mod caught_panic;
pub mod chat_template;
pub mod decoder;
mod dequantized;
pub mod fetch;
mod finite_output;
pub mod gemma2;
pub mod gemma3;
pub mod gguf;
pub mod gpt_oss;
#[cfg(feature = "grammar")]
pub mod grammar;
mod host_tensors;
pub mod llama;
pub(crate) mod load;
pub mod phi3;
pub mod qwen2;
pub mod qwen3;
pub mod qwen3moe;
mod regular_file;
pub mod safetensors;
pub mod sampler;
mod sched_options;
mod template_operators;
pub mod tokenizer;
mod unused_tensors;
mod weights_file;

pub use dequantized::DequantizedFile;
pub use gguf::Gguf;
pub use host_tensors::HostTensors;
pub use load::{LoadOptions, LoadProgress, LoadedWeights, load_tensors, repack_from_env};
pub use sched_options::SchedulerOptions;
pub use weights_file::{TensorEntry, WeightsFile};
