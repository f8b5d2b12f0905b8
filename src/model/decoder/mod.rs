//! Decoder-only transformers (llama, Gemma 3, ...): one configurable graph
//! over the shared blocks, the KV cache shared by several sequences, and
//! sessions that run batches mixing prompt and decode tokens of different
//! sequences, and layers spread over several devices (`layer_split`), as
//! many on each as its memory budget allows (`fit`), and a session computing
//! on a thread of its own or the host's (`worker`). The
//! families (`model::llama`, `model::gemma3`) read the configuration from
//! their files.

mod arch_keys;
mod batch;
mod fit;
mod graph;
mod hparams;
mod kv_cache;
mod kv_cells;
mod layer_split;
mod logits_read;
mod model;
mod session;
mod weights;
mod worker;

pub use crate::model::blocks::Attention;
pub use batch::Batch;
pub use fit::{DeviceRoom, LayerCounts, ModelFootprint, compute_estimate, fit_layers, fit_layers_experts_last};
pub use graph::{BatchShape, DecoderGraph, LogitsFor, build_decoder_graph};
pub use hparams::{DecoderHparams, MAX_EXPERTS};
pub use kv_cache::{KV_DTYPES, KvCache};
pub use kv_cells::{BatchPlacement, KvCells, MAX_PARALLEL_SEQUENCES, PAGE as KV_PAGE, SeqId};
pub use layer_split::layer_devices;
pub use model::{DECODER_ARCHITECTURES, DecoderModel};
pub use session::{KV_BUCKET, Session, SessionParams};
pub use weights::{DecoderWeights, FfnWeights, LayerWeights, QkvWeights};
pub(crate) use weights::{WeightRole, check_dtype, check_shape};
pub use worker::{DecodeDriver, DecodeWorker};
