//! BERT encoders from Hugging Face checkpoints (all-MiniLM-L6-v2 and the
//! like): `config.json` ([`BertConfig`]), `model.safetensors` (F32 or F16,
//! over a memory map) and `tokenizer.json` (WordPiece, through the
//! `tokenizers` crate). The graph: word, position and token-type
//! embeddings, LayerNorm, bidirectional attention with a padding mask,
//! exact-GELU feed-forward, LayerNorm after each residual, then mean pooling
//! over each sentence's tokens and L2 normalisation. Sentences of different
//! lengths run in one graph, padded to the longest.

mod config;
mod encoder;
mod graph;
mod modules;
mod weights;

pub use config::BertConfig;
pub use encoder::{BertModel, EncodedBatch, Encoder, EncoderParams};
pub use graph::{BertGraph, build_bert_graph};
pub use weights::{BertLayerWeights, BertWeights};
