//! `config.json` of a BERT checkpoint.

use std::path::Path;

use gantry_engine::Limits;
use serde::Deserialize;

use crate::{Error, Result};

/// The fields of a Hugging Face `config.json` a BERT encoder needs.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct BertConfig {
    /// `"bert"`.
    pub model_type: String,
    /// Vocabulary size.
    pub vocab_size: usize,
    /// Width of the hidden states.
    pub hidden_size: usize,
    /// Transformer blocks.
    pub num_hidden_layers: usize,
    /// Attention heads.
    pub num_attention_heads: usize,
    /// Hidden width of the feed-forward network.
    pub intermediate_size: usize,
    /// Positions the position embeddings cover (the longest input).
    pub max_position_embeddings: usize,
    /// Token types (segments).
    #[serde(default = "default_type_vocab_size")]
    pub type_vocab_size: usize,
    /// LayerNorm epsilon.
    #[serde(default = "default_layer_norm_eps")]
    pub layer_norm_eps: f32,
    /// The feed-forward activation; `"gelu"` (exact, erf) is supported.
    #[serde(default = "default_hidden_act")]
    pub hidden_act: String,
    /// How positions are embedded: `absolute`, the only kind Gantry runs
    /// (relative and rotary positions change the attention's math, so a
    /// config asking for them is refused, not run as absolute).
    #[serde(default = "default_position_embedding_type")]
    pub position_embedding_type: String,
    /// Whether attention is causal (`true` is refused: Gantry's encoder
    /// attends both ways).
    #[serde(default)]
    pub is_decoder: bool,
    /// Whether layers attend to an encoder's output (`true` is refused).
    #[serde(default)]
    pub add_cross_attention: bool,
}

fn default_position_embedding_type() -> String {
    "absolute".into()
}

fn default_type_vocab_size() -> usize {
    2
}

fn default_layer_norm_eps() -> f32 {
    1e-12
}

fn default_hidden_act() -> String {
    "gelu".into()
}

impl BertConfig {
    /// Reads and checks `config.json`; errors name the file and the key.
    pub fn from_file(path: &Path) -> Result<Self> {
        crate::model::regular_file::check_regular(path)?;
        let file = path.display().to_string();
        let text =
            std::fs::read_to_string(path).map_err(|source| Error::Io { context: format!("reading {file}"), source })?;
        Self::from_json(&file, &text)
    }

    /// Parses and checks the JSON `text` of the file named `file`.
    pub fn from_json(file: &str, text: &str) -> Result<Self> {
        let bad = |reason: String| Error::InvalidModel { file: file.to_owned(), reason };
        let cfg: BertConfig = serde_json::from_str(text).map_err(|e| bad(format!("not a BERT config: {e}")))?;
        if cfg.model_type != "bert" {
            return Err(bad(format!("model_type {:?} is not supported (supported: bert)", cfg.model_type)));
        }
        if cfg.is_decoder || cfg.add_cross_attention {
            let key = if cfg.is_decoder { "is_decoder" } else { "add_cross_attention" };
            return Err(bad(format!("{key} is true: Gantry's encoder attends both ways, without cross-attention")));
        }
        if cfg.position_embedding_type != "absolute" {
            return Err(bad(format!(
                "position_embedding_type {:?} is not supported (supported: absolute)",
                cfg.position_embedding_type
            )));
        }
        if cfg.hidden_act != "gelu" {
            return Err(bad(format!("hidden_act {:?} is not supported (supported: gelu)", cfg.hidden_act)));
        }
        let sizes = [
            ("vocab_size", cfg.vocab_size),
            ("hidden_size", cfg.hidden_size),
            ("num_hidden_layers", cfg.num_hidden_layers),
            ("num_attention_heads", cfg.num_attention_heads),
            ("intermediate_size", cfg.intermediate_size),
            ("max_position_embeddings", cfg.max_position_embeddings),
            ("type_vocab_size", cfg.type_vocab_size),
        ];
        if let Some((key, _)) = sizes.iter().find(|(_, v)| *v == 0) {
            return Err(bad(format!("{key} is 0")));
        }
        // Each size bounds a loop or an allocation (a `Vec` per layer, a
        // mask per position) before any tensor is checked against it.
        let limits = Limits::DEFAULT;
        for (key, n) in sizes {
            let max = match key {
                "num_hidden_layers" => limits.max_layers,
                "vocab_size" | "type_vocab_size" => limits.max_vocab,
                "max_position_embeddings" => limits.max_context,
                _ => limits.max_width,
            };
            limits.check_count(key, n as u64, max).map_err(bad)?;
        }
        if !cfg.hidden_size.is_multiple_of(cfg.num_attention_heads) {
            return Err(bad(format!(
                "hidden_size {} is not a multiple of num_attention_heads {}",
                cfg.hidden_size, cfg.num_attention_heads
            )));
        }
        if !(cfg.layer_norm_eps >= 0.0 && cfg.layer_norm_eps.is_finite()) {
            return Err(bad(format!("layer_norm_eps {} must be finite and non-negative", cfg.layer_norm_eps)));
        }
        Ok(cfg)
    }

    /// Width of each attention head.
    pub fn head_dim(&self) -> usize {
        self.hidden_size / self.num_attention_heads
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configs_that_cannot_be_run_are_errors_naming_the_file_and_key() {
        let good = r#"{"model_type": "bert", "vocab_size": 10, "hidden_size": 8, "num_hidden_layers": 1,
            "num_attention_heads": 2, "intermediate_size": 16, "max_position_embeddings": 4}"#;
        let cfg = BertConfig::from_json("config.json", good).unwrap();
        assert_eq!((cfg.head_dim(), cfg.type_vocab_size, cfg.layer_norm_eps), (4, 2, 1e-12));
        let cases = [
            (good.replace("\"bert\"", "\"gpt2\""), "model_type"),
            (good.replace("\"hidden_size\": 8", "\"hidden_size\": 9"), "num_attention_heads"),
            (good.replace("\"intermediate_size\": 16", "\"intermediate_size\": 0"), "intermediate_size"),
            (good.replace("\"vocab_size\": 10,", ""), "vocab_size"),
            (good.replace('}', ", \"hidden_act\": \"relu\"}"), "hidden_act"),
            (good.replace('}', ", \"position_embedding_type\": \"relative_key_query\"}"), "position_embedding_type"),
            (good.replace('}', ", \"is_decoder\": true}"), "is_decoder"),
            (good.replace('}', ", \"add_cross_attention\": true}"), "add_cross_attention"),
            ("{ not json".into(), "not a BERT config"),
            // Sizes that would size a `Vec` or a loop before any tensor is read.
            (
                good.replace("\"num_hidden_layers\": 1", "\"num_hidden_layers\": 18446744073709551615"),
                "num_hidden_layers",
            ),
            (good.replace("\"num_hidden_layers\": 1", "\"num_hidden_layers\": 1000000000"), "num_hidden_layers"),
            (
                good.replace("\"max_position_embeddings\": 4", "\"max_position_embeddings\": 4000000000000"),
                "max_position_embeddings",
            ),
            (good.replace("\"vocab_size\": 10", "\"vocab_size\": 10000000000"), "vocab_size"),
            (good.replace("\"hidden_size\": 8", "\"hidden_size\": 8000000000"), "hidden_size"),
        ];
        for (text, key) in cases {
            let err = BertConfig::from_json("dir/config.json", &text).unwrap_err().to_string();
            assert!(err.contains("dir/config.json") && err.contains(key), "{key}: {err}");
        }
    }
}
