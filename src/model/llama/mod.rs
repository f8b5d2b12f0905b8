//! Llama-family models: hyperparameters, weights, the KV cache, the
//! forward graph, and layers spread over several devices (`layer_split`).

mod graph;
mod hparams;
mod kv_cache;
mod layer_split;
mod model;
mod session;
mod weights;

pub use graph::{Attention, BatchShape, LlamaGraph, LogitsFor, batch_inputs, build_llama_graph};
pub use hparams::LlamaHparams;
pub use kv_cache::KvCache;
pub use layer_split::layer_devices;
pub use model::LlamaModel;
pub use session::{KV_BUCKET, Session, SessionParams};
pub use weights::{LayerWeights, LlamaWeights};
