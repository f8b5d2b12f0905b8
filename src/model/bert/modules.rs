//! A sentence-transformers folder's own description of its pipeline
//! (`modules.json`, and the pooling module's `config.json`), checked
//! against what Gantry computes: the encoder, mean pooling over the
//! sentence's tokens, L2 normalisation; and what it asks of the tokenizer
//! (`sentence_bert_config.json`: the length texts are cut to, lowercasing). A folder asking for more (a `Dense`
//! projection, CLS or max pooling, as BAAI's bge models do) would otherwise
//! be embedded the plain way with exit status 0: a silently wrong answer.
//! A folder without these files (a plain BERT) is embedded as before.

use std::path::Path;

use crate::{Error, Result};

/// The module types Gantry's pipeline computes.
const SUPPORTED_MODULES: &[&str] = &[
    "sentence_transformers.models.Transformer",
    "sentence_transformers.models.Pooling",
    "sentence_transformers.models.Normalize",
];

/// The pooling modes of sentence-transformers' `Pooling` config: only the
/// mean may be on.
const OTHER_POOLING_MODES: &[&str] = &[
    "pooling_mode_cls_token",
    "pooling_mode_max_tokens",
    "pooling_mode_mean_sqrt_len_tokens",
    "pooling_mode_weightedmean_tokens",
    "pooling_mode_lasttoken",
];

/// A module's `type` (empty when it has none).
fn kind_of(module: &serde_json::Value) -> &str {
    module.get("type").and_then(serde_json::Value::as_str).unwrap_or_default()
}

/// The most bytes a module description may have.
const MAX_DESCRIPTION_BYTES: u64 = 1 << 20;

fn read_json(path: &Path) -> Result<serde_json::Value> {
    let bytes = gantry_engine::read_small_file(path, MAX_DESCRIPTION_BYTES)
        .map_err(|source| Error::Io { context: format!("reading {}", path.display()), source })?;
    serde_json::from_slice(&bytes)
        .map_err(|e| Error::InvalidModel { file: path.display().to_string(), reason: format!("not JSON: {e}") })
}

/// `Err` naming the file and the module or key when the folder `dir`
/// describes a pipeline other than Gantry's (or pooling of vectors of
/// another width than the encoder's `hidden_size`); else whether the
/// pooled vectors are L2-normalised: when `modules.json` lists a
/// `Normalize` module, or when there is no `modules.json` (a plain folder,
/// embedded as all-MiniLM-L6-v2 is). paraphrase-MiniLM-L6-v2 and many
/// others list none: their vectors are the plain means.
pub(crate) fn check_modules(dir: &Path, hidden_size: usize) -> Result<bool> {
    let modules = dir.join("modules.json");
    let mut pooling_dirs = Vec::new();
    let mut normalize = true;
    if modules.exists() {
        let file = modules.display().to_string();
        let bad = |reason: String| Error::InvalidModel { file: file.clone(), reason };
        let json = read_json(&modules)?;
        let list = json.as_array().ok_or_else(|| bad("not a list of modules".into()))?;
        if let Some(kind) = list.iter().map(kind_of).find(|k| !SUPPORTED_MODULES.contains(k)) {
            return Err(bad(format!(
                "module {kind:?} is not supported: Gantry embeds with the encoder, mean pooling and L2 \
                 normalisation only"
            )));
        }
        let mut kinds = Vec::with_capacity(list.len().min(SUPPORTED_MODULES.len() + 1));
        for module in list {
            let kind = kind_of(module);
            let sub = module.get("path").and_then(serde_json::Value::as_str).unwrap_or_default();
            if kind.ends_with(".Transformer") && !sub.is_empty() {
                return Err(bad(format!(
                    "the encoder's path is {sub:?}: Gantry reads the encoder from the folder itself (path \"\")"
                )));
            }
            if kind.ends_with(".Pooling") {
                // A module's folder is a plain name inside the model's folder.
                if sub.is_empty() || sub.contains(['/', '\\']) || sub == ".." || sub == "." {
                    return Err(bad(format!("the pooling module's path {sub:?} is not a folder name")));
                }
                if !dir.join(sub).join("config.json").is_file() {
                    return Err(bad(format!("the pooling module's {sub}/config.json is missing")));
                }
                pooling_dirs.push(sub.to_owned());
            }
            kinds.push(kind.rsplit('.').next().unwrap_or_default());
        }
        // sentence-transformers runs the modules in the list's order: only the
        // encoder, then its pooling, then (optionally) the normalisation is
        // the pipeline Gantry computes.
        let normalized = kinds == ["Transformer", "Pooling", "Normalize"];
        if !normalized && kinds != ["Transformer", "Pooling"] {
            return Err(bad(format!(
                "the modules are [{}]: Gantry computes Transformer, Pooling and optionally Normalize, in that order",
                kinds.join(", ")
            )));
        }
        normalize = normalized;
    } else if dir.join("1_Pooling").is_dir() {
        pooling_dirs.push("1_Pooling".into());
    }
    for sub in pooling_dirs {
        let path = dir.join(sub).join("config.json");
        if !path.exists() {
            continue;
        }
        let file = path.display().to_string();
        let json = read_json(&path)?;
        // A mode given as anything but true or false (`1`, `"true"`) would be
        // read as off by Gantry and as on by Python: refused.
        let modes = OTHER_POOLING_MODES.iter().chain(["pooling_mode_mean_tokens"].iter());
        if let Some((key, v)) = modes.filter_map(|k| json.get(*k).map(|v| (k, v))).find(|(_, v)| !v.is_boolean()) {
            return Err(Error::InvalidModel { file, reason: format!("{key} = {v} is not true or false") });
        }
        let on = |key: &str| json.get(key).and_then(serde_json::Value::as_bool).unwrap_or(false);
        if !on("pooling_mode_mean_tokens") {
            return Err(Error::InvalidModel {
                file,
                reason: "pooling_mode_mean_tokens is not true: Gantry pools by the mean only".into(),
            });
        }
        if let Some(width) = json.get("word_embedding_dimension").filter(|w| !w.is_null())
            && width.as_u64() != Some(hidden_size as u64)
        {
            return Err(Error::InvalidModel {
                file,
                reason: format!("word_embedding_dimension = {width}, but config.json's hidden_size is {hidden_size}"),
            });
        }
        if let Some(other) = OTHER_POOLING_MODES.iter().find(|k| on(k)) {
            return Err(Error::InvalidModel {
                file,
                reason: format!("{other} is true: Gantry pools by the mean only"),
            });
        }
    }
    Ok(normalize)
}

/// What a sentence-transformers folder's `sentence_bert_config.json` asks
/// of the tokenizer; the default (no file) asks nothing.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SentenceConfig {
    /// `max_seq_length`: texts are cut to this many tokens, the special
    /// ones included (all-MiniLM-L6-v2: 256, of its 512 positions).
    pub max_seq_length: Option<usize>,
    /// `do_lower_case`: texts are lowercased before they are tokenized.
    pub do_lower_case: bool,
}

/// Reads `dir/sentence_bert_config.json` if there is one; a key of the
/// wrong type is an error naming the file and the key.
pub(crate) fn sentence_config(dir: &Path) -> Result<SentenceConfig> {
    let path = dir.join("sentence_bert_config.json");
    if !path.exists() {
        return Ok(SentenceConfig::default());
    }
    let json = read_json(&path)?;
    let bad = |reason: String| Error::InvalidModel { file: path.display().to_string(), reason };
    let max_seq_length = match json.get("max_seq_length") {
        None | Some(serde_json::Value::Null) => None,
        Some(v) => match v.as_u64() {
            Some(n @ 1..) => Some(usize::try_from(n).unwrap_or(usize::MAX)),
            _ => return Err(bad(format!("max_seq_length = {v} is not a positive whole number"))),
        },
    };
    let do_lower_case = match json.get("do_lower_case") {
        None | Some(serde_json::Value::Null) => false,
        Some(serde_json::Value::Bool(b)) => *b,
        Some(v) => return Err(bad(format!("do_lower_case = {v} is not true or false"))),
    };
    Ok(SentenceConfig { max_seq_length, do_lower_case })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A folder holding `files`, removed when the guard drops.
    fn folder(name: &str, files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::Builder::new().prefix(&format!("gantry-bert-modules-{name}-")).tempdir().unwrap();
        for (path, text) in files {
            let path = dir.path().join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        dir
    }

    const MODULES: &str = r#"[{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}]"#;
    const MEAN: &str = r#"{"word_embedding_dimension": 384, "pooling_mode_cls_token": false,
        "pooling_mode_mean_tokens": true, "pooling_mode_max_tokens": false}"#;

    /// all-MiniLM-L6-v2's width.
    fn check_modules_384(dir: &Path) -> Result<bool> {
        check_modules(dir, 384)
    }

    #[test]
    fn gantrys_pipeline_is_accepted_and_any_other_refused_by_file() {
        // all-MiniLM-L6-v2's own description, and a plain folder.
        check_modules_384(folder("minilm", &[("modules.json", MODULES), ("1_Pooling/config.json", MEAN)]).path())
            .unwrap();
        check_modules_384(folder("plain", &[]).path()).unwrap();
        let cls = MEAN.replace("\"pooling_mode_cls_token\": false", "\"pooling_mode_cls_token\": true");
        let cls = cls.replace("\"pooling_mode_mean_tokens\": true", "\"pooling_mode_mean_tokens\": false");
        let wide = MEAN.replace("384", "768");
        let cls_one = MEAN.replace("\"pooling_mode_cls_token\": false", "\"pooling_mode_cls_token\": 1");
        let dense = MODULES.replace(
            "2_Normalize\", \"type\": \"sentence_transformers.models.Normalize",
            "2_Dense\", \"type\": \"sentence_transformers.models.Dense",
        );
        let pooling = ("1_Pooling/config.json", MEAN);
        let no_pooling = MODULES.replace(
            r#"{"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},"#,
            "",
        );
        let normalize_entry =
            r#"{"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}"#;
        let pooling_entry =
            r#"{"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}"#;
        let encoder_entry =
            r#"{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"}"#;
        let reordered_json = format!("[{encoder_entry}, {normalize_entry}, {pooling_entry}]");
        let reordered = vec![("modules.json", reordered_json.as_str()), pooling];
        let twice_json = format!("[{encoder_entry}, {pooling_entry}, {pooling_entry}, {normalize_entry}]");
        let twice = vec![("modules.json", twice_json.as_str()), pooling];
        let sub_encoder_json = MODULES.replacen(r#""path": """#, r#""path": "0_BERT""#, 1);
        let sub_encoder = vec![("modules.json", sub_encoder_json.as_str()), pooling];
        for (name, files, says) in [
            (
                "cls",
                vec![("modules.json", MODULES), ("1_Pooling/config.json", cls.as_str())],
                "pooling_mode_mean_tokens",
            ),
            ("cls-alone", vec![("1_Pooling/config.json", cls.as_str())], "pooling_mode_mean_tokens"),
            ("dense", vec![("modules.json", dense.as_str())], "Dense"),
            ("wide", vec![("1_Pooling/config.json", wide.as_str())], "word_embedding_dimension = 768, but"),
            (
                "cls-as-1",
                vec![("1_Pooling/config.json", cls_one.as_str())],
                "pooling_mode_cls_token = 1 is not true or false",
            ),
            (
                "no-pooling-folder",
                vec![("modules.json", MODULES)],
                "the pooling module's 1_Pooling/config.json is missing",
            ),
            ("empty", vec![("modules.json", "[]")], "the modules are []"),
            ("no-pooling", vec![("modules.json", no_pooling.as_str())], "the modules are [Transformer, Normalize]"),
            ("reordered", reordered.clone(), "the modules are [Transformer, Normalize, Pooling]"),
            ("twice", twice.clone(), "the modules are [Transformer, Pooling, Pooling, Normalize]"),
            ("sub-encoder", sub_encoder.clone(), "the encoder's path is \"0_BERT\""),
            (
                "escape",
                vec![("modules.json", r#"[{"type": "sentence_transformers.models.Pooling", "path": "../x"}]"#)],
                "not a folder name",
            ),
        ] {
            let e = check_modules_384(folder(name, &files).path()).unwrap_err().to_string();
            assert!(e.contains(says), "{name}: {e}");
        }
    }

    #[test]
    fn sentence_bert_config_gives_the_length_and_lowercasing() {
        assert_eq!(sentence_config(folder("none", &[]).path()).unwrap(), SentenceConfig::default());
        let minilm = r#"{"max_seq_length": 256, "do_lower_case": false}"#;
        let got = sentence_config(folder("minilm-st", &[("sentence_bert_config.json", minilm)]).path()).unwrap();
        assert_eq!(got, SentenceConfig { max_seq_length: Some(256), do_lower_case: false });
        for (name, text, says) in [
            ("zero", r#"{"max_seq_length": 0}"#, "max_seq_length = 0"),
            ("text", r#"{"max_seq_length": "256"}"#, "max_seq_length = \"256\""),
            ("lower", r#"{"do_lower_case": 1}"#, "do_lower_case = 1"),
            ("json", "{", "not JSON"),
        ] {
            let e = sentence_config(folder(name, &[("sentence_bert_config.json", text)]).path()).unwrap_err();
            let e = e.to_string();
            assert!(e.contains(says) && e.contains("sentence_bert_config.json"), "{name}: {e}");
        }
    }
}
