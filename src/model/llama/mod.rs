//! Llama-family models: hyperparameters, weights, the KV cache and the
//! forward graph.

mod graph;
mod hparams;
mod kv_cache;
mod model;
mod session;
mod weights;

pub use graph::{Attention, BatchShape, LlamaGraph, LogitsFor, batch_inputs, build_llama_graph};
pub use hparams::LlamaHparams;
pub use kv_cache::KvCache;
pub use model::LlamaModel;
pub use session::{KV_BUCKET, Session, SessionParams};
pub use weights::{LayerWeights, LlamaWeights};
