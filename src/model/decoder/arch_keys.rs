//! Accounting for a decoder file's architecture keys: every `{arch}.*`
//! key either is read by the family or is refused by name. A key that
//! changes the math (a rope scaling type, experts in a family without them,
//! a sliding window in a family that has none, soft-capping) and that Gantry does not implement
//! must fail the load: computing without it gives a model that runs and
//! answers wrongly, the worst kind of bug for an engine.

use crate::model::gguf::Gguf;
use crate::{Error, Result};

use super::DecoderHparams;

/// The `{arch}.*` keys every decoder family reads the same way
/// ([`crate::model::llama::common_shape`]), with the values checked below.
pub(crate) const COMMON_KEYS: &[&str] = &[
    "context_length",
    "embedding_length",
    "block_count",
    "feed_forward_length",
    "vocab_size",
    "attention.head_count",
    "attention.head_count_kv",
    "attention.key_length",
    "attention.value_length",
    "attention.layer_norm_rms_epsilon",
    "rope.freq_base",
    "rope.dimension_count",
    "rope.scaling.type",
    "rope.scaling.factor",
    // Linear scaling does not read it; YaRN (gpt-oss) does, and a family
    // without YaRN refuses that scaling type.
    "rope.scaling.original_context_length",
    // A note from the converter, no parameter of the computation.
    "rope.scaling.finetuned",
    "expert_count",
    "expert_used_count",
];

/// Checks the file's `{arch}.*` keys against `COMMON_KEYS` and the family's
/// own `family_keys`, and the values of the common ones Gantry computes
/// only in part. Errors name the file and the key.
pub(crate) fn check_arch_keys(gguf: &Gguf, hp: &DecoderHparams, family_keys: &[&str]) -> Result<()> {
    let arch = gguf.architecture()?;
    let refuse = |key: &str, why: String| {
        Err(Error::InvalidModel { file: gguf.source().to_owned(), reason: format!("{key}: {why}") })
    };
    let prefix = format!("{arch}.");
    for (key, value) in gguf.metadata() {
        let Some(suffix) = key.strip_prefix(&prefix) else { continue };
        if !COMMON_KEYS.contains(&suffix) && !family_keys.contains(&suffix) {
            return refuse(
                key,
                format!(
                    "{} is not implemented for {arch}; refusing to load rather than compute a different model",
                    value.describe()
                ),
            );
        }
    }
    // YaRN only where the family computes it (its extrapolation mix set).
    if let Some(kind) = gguf.get_arch_opt::<&str>("rope.scaling.type")?
        && !matches!(kind, "none" | "linear")
        && !(kind == "yarn" && hp.rope_ext_factor > 0.0)
    {
        return refuse(
            &gguf.arch_key("rope.scaling.type")?,
            format!("rope scaling {kind:?} is not implemented for {arch} (only none and linear)"),
        );
    }
    if let Some(n) = gguf.get_arch_opt::<u64>("rope.dimension_count")?
        && n != hp.head_dim as u64
    {
        return refuse(
            &gguf.arch_key("rope.dimension_count")?,
            format!("rope over {n} of each head's {} dimensions is not implemented (only the whole head)", hp.head_dim),
        );
    }
    if let Some(n) = gguf.get_arch_opt::<u64>("attention.value_length")?
        && n != hp.head_dim as u64
    {
        return refuse(
            &gguf.arch_key("attention.value_length")?,
            format!("value heads of {n} beside key heads of {} are not implemented", hp.head_dim),
        );
    }
    // A family that reads experts has set `n_expert`; any other computes a
    // dense network and must not meet a file that says otherwise.
    for key in ["expert_count", "expert_used_count"] {
        if let Some(n) = gguf.get_arch_opt::<u64>(key)?
            && n > 0
            && hp.n_expert == 0
        {
            return refuse(&gguf.arch_key(key)?, format!("{n}: mixture-of-experts {arch} models are not implemented"));
        }
    }
    Ok(())
}
