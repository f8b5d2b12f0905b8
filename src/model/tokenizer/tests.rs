//! Tokenizer tests on tiny vocabularies built with the GGUF writer; the
//! expected ids are worked out by hand from the algorithms' rules.

use crate::Error;

use super::*;
use crate::model::gguf::{Array, GgufWriter};

fn gguf(build: impl FnOnce(&mut GgufWriter)) -> Gguf {
    let mut w = GgufWriter::new();
    build(&mut w);
    Gguf::parse(&w.to_bytes()).unwrap()
}

/// A SentencePiece vocabulary: `<unk> <s> </s>`, the 256 byte tokens
/// (ids 3..=258), then pieces with scores.
fn spm_vocab(w: &mut GgufWriter) {
    let mut tokens = vec!["<unk>".to_string(), "<s>".into(), "</s>".into()];
    let mut types = vec![2, 3, 3];
    let mut scores = vec![0.0f32; 3];
    for b in 0..=255u8 {
        tokens.push(format!("<0x{b:02X}>"));
        types.push(6);
        scores.push(0.0);
    }
    let pieces = [
        ("▁", -10.0),    // 259
        ("h", -10.0),    // 260
        ("e", -10.0),    // 261
        ("l", -10.0),    // 262
        ("o", -10.0),    // 263
        ("▁h", -5.0),    // 264
        ("he", -3.0),    // 265
        ("ll", -2.0),    // 266
        ("llo", -1.0),   // 267
        ("▁he", -4.0),   // 268
        ("hello", -0.5), // 269
    ];
    for (text, score) in pieces {
        tokens.push(text.into());
        types.push(1);
        scores.push(score);
    }
    w.add_str("tokenizer.ggml.model", "llama");
    w.add_array("tokenizer.ggml.tokens", Array::String(tokens));
    w.add_array("tokenizer.ggml.token_type", Array::I32(types));
    w.add_array("tokenizer.ggml.scores", Array::F32(scores));
}

#[test]
fn spm_merges_by_score_with_byte_fallback() {
    let tok = Tokenizer::from_gguf(&gguf(spm_vocab)).unwrap();
    assert_eq!(tok.kind(), VocabKind::Spm);
    assert_eq!((tok.bos(), tok.eos(), tok.adds_bos()), (Some(1), Some(2), true));
    // "▁hello": ll (-2), then llo (-1), he (-3), hello (-0.5); ▁he and ▁h are stale by then.
    assert_eq!(tok.encode("hello", false, false).unwrap(), [259, 269]);
    assert_eq!(tok.encode("hello", true, false).unwrap(), [1, 259, 269]);
    // "▁hé": ▁h (-5); "é" is no token: its UTF-8 bytes C3 A9 as byte tokens.
    assert_eq!(tok.encode("hé", false, false).unwrap(), [264, 3 + 0xC3, 3 + 0xA9]);
    // Special tokens in text: parsed, or spelled in bytes.
    assert_eq!(tok.encode("<s>hello", false, true).unwrap(), [1, 259, 269]);
    assert_eq!(
        tok.encode("<s>hello", false, false).unwrap(),
        [259, 3 + b'<' as u32, 3 + b's' as u32, 3 + b'>' as u32, 269]
    );
    assert_eq!(tok.encode("", true, false).unwrap(), [1]);
    assert_eq!(tok.encode("", false, false).unwrap(), Vec::<TokenId>::new());
}

#[test]
fn spm_decodes_spaces_and_bytes() {
    let tok = Tokenizer::from_gguf(&gguf(spm_vocab)).unwrap();
    assert_eq!(tok.decode_string(&[259, 269], false, false).unwrap(), "hello", "the space prefix is removed");
    assert_eq!(tok.decode_string(&[1, 259, 269], true, false).unwrap(), " hello", "as llama.cpp: not after a BOS");
    assert_eq!(tok.decode_string(&[1, 259, 269], false, true).unwrap(), "<s> hello");
    assert_eq!(tok.decode_string(&[264, 198, 172], false, false).unwrap(), "hé");
    assert_eq!(tok.token_to_piece(1, false).unwrap(), b"");
    assert_eq!(tok.token_to_piece(1, true).unwrap(), b"<s>");
    let e = tok.decode(&[269, 270], false, false).unwrap_err();
    assert!(
        matches!(e, Error::Engine(gantry_engine::Error::OutOfBounds(_))) && e.to_string().contains("token id 270"),
        "{e}"
    );
}

#[test]
fn spm_without_byte_tokens_reports_unspellable_text() {
    let g = gguf(|w| {
        w.add_str("tokenizer.ggml.model", "llama");
        w.add_array(
            "tokenizer.ggml.tokens",
            Array::String(vec!["<unk>".into(), "<s>".into(), "</s>".into(), "▁".into()]),
        );
    });
    let tok = Tokenizer::from_gguf(&g).unwrap();
    assert_eq!(tok.encode(" ", false, false).unwrap(), [3, 3]);
    let e = tok.encode("x", false, false).unwrap_err().to_string();
    assert!(e.contains("no byte token <0x78>"), "{e}");
}

/// A byte-level BPE vocabulary: ids 0..=255 are GPT-2's byte characters in
/// byte order, then merges.
fn bpe_vocab(pre: &'static str) -> impl FnOnce(&mut GgufWriter) {
    move |w: &mut GgufWriter| {
        let mut tokens: Vec<String> = (0..=255u8).map(|b| byte_to_char(b).to_string()).collect();
        let mut types = vec![1; 256];
        for (text, ty) in [
            ("he", 1),      // 256
            ("ll", 1),      // 257
            ("hell", 1),    // 258
            ("hello", 1),   // 259
            ("Ġh", 1),      // 260
            ("<|end|>", 3), // 261
            ("@@", 4),      // 262
            ("Ġhello", 1),  // 263 (reachable only when merges are ignored)
        ] {
            tokens.push(text.into());
            types.push(ty);
        }
        let merges = ["h e", "l l", "he ll", "hell o", "Ġ h", "x y"].map(String::from).to_vec();
        w.add_str("tokenizer.ggml.model", "gpt2");
        w.add_str("tokenizer.ggml.pre", pre);
        w.add_array("tokenizer.ggml.tokens", Array::String(tokens));
        w.add_array("tokenizer.ggml.token_type", Array::I32(types));
        w.add_array("tokenizer.ggml.merges", Array::String(merges));
        w.add_u32("tokenizer.ggml.eos_token_id", 261);
    }
}

#[test]
fn bpe_merges_by_rank() {
    let tok = Tokenizer::from_gguf(&gguf(bpe_vocab("gpt-2"))).unwrap();
    assert_eq!(tok.kind(), VocabKind::Bpe(PreTokenizer::Gpt2));
    // "hello" -> he (0), ll (1), hell (2), hello (3). " hello" -> Ġ + hello: Ġh (4) is stale by then.
    assert_eq!(tok.encode("hello hello", false, false).unwrap(), [259, 32, 259]);
    assert_eq!(tok.encode("🦙", false, false).unwrap(), [0xF0, 0x9F, 0xA6, 0x99]);
    assert_eq!(tok.eos(), Some(261));
    assert!(tok.is_eog(261) && !tok.is_eog(259));
}

#[test]
fn bpe_ignore_merges_takes_whole_word_tokens() {
    let tok = Tokenizer::from_gguf(&gguf(bpe_vocab("llama-bpe"))).unwrap();
    assert_eq!(tok.encode("hello hello", false, false).unwrap(), [259, 263]);
    assert!(tok.adds_bos(), "llama3 pre-tokenizers add BOS");
    // BOS defaults to id 11 for BPE vocabularies.
    assert_eq!(tok.encode("hello", true, false).unwrap(), [11, 259]);
}

#[test]
fn special_tokens_are_split_out() {
    let tok = Tokenizer::from_gguf(&gguf(bpe_vocab("gpt-2"))).unwrap();
    // Control tokens only with parse_special; user-defined tokens always.
    assert_eq!(tok.encode("hello<|end|>", false, true).unwrap(), [259, 261]);
    let as_text = tok.encode("hello<|end|>", false, false).unwrap();
    assert_eq!(as_text[0], 259);
    assert_eq!(as_text[1..], *"<|end|>".bytes().map(u32::from).collect::<Vec<_>>());
    assert_eq!(tok.encode("he@@llo", false, false).unwrap(), [256, 262, 257, b'o' as u32]);
}

#[test]
fn bpe_decodes_bytes_and_cleans_spaces() {
    let tok = Tokenizer::from_gguf(&gguf(bpe_vocab("gpt-2"))).unwrap();
    assert_eq!(tok.decode_string(&[259, 32, 259], false, false).unwrap(), "hello hello");
    assert_eq!(tok.decode_string(&[0xF0, 0x9F, 0xA6, 0x99], false, false).unwrap(), "🦙");
    // gpt-2 cleans " ." to "." and " 's" to "'s" (clean_up_tokenization_spaces).
    let ids = tok.encode("a . b 's", false, false).unwrap();
    assert_eq!(tok.decode_string(&ids, false, false).unwrap(), "a. b's");
    assert_eq!(tok.decode_string(&[261], false, false).unwrap(), "");
    assert_eq!(tok.decode_string(&[261], false, true).unwrap(), "<|end|>");
    // smollm does not clean spaces.
    let tok = Tokenizer::from_gguf(&gguf(bpe_vocab("smollm"))).unwrap();
    let ids = tok.encode("a . b", false, false).unwrap();
    assert_eq!(tok.decode_string(&ids, false, false).unwrap(), "a . b");
}

#[test]
fn clean_up_matches_llamas_passes() {
    let cases = [
        ("Hello , world !", "Hello, world!"),
        ("it ' s", "it's"),
        // The second apostrophe's space was blanked by the first's: only one pair goes.
        ("a ' ' b", "a'' b"),
        ("I 'm you 're we 've they 'll it 'd", "I'm you're we've they 'll it 'd"),
        ("", ""),
        (" .", "."),
    ];
    for (input, want) in cases {
        let mut b = input.as_bytes().to_vec();
        clean_up_spaces(&mut b);
        assert_eq!(String::from_utf8(b).unwrap(), want, "{input:?}");
    }
}

#[test]
fn stream_decoder_never_splits_a_character() {
    let tok = Tokenizer::from_gguf(&gguf(bpe_vocab("gpt-2"))).unwrap();
    let mut d = tok.stream_decoder(false);
    let mut got = Vec::new();
    for id in tok.encode("hé🦙!", false, false).unwrap() {
        got.push(d.push(id).unwrap());
    }
    assert_eq!(got.concat(), "hé🦙!");
    assert!(got.iter().any(String::is_empty), "bytes were held back");
    assert!(d.pending().is_empty());
    // An invalid byte comes out as U+FFFD; an unfinished character at the end too.
    let mut d = tok.stream_decoder(false);
    assert_eq!(d.push(0xFF).unwrap(), "\u{FFFD}");
    assert_eq!(d.push(b'a' as u32).unwrap(), "a");
    assert_eq!(d.push(0xE2).unwrap(), "");
    assert_eq!(d.finish(), "\u{FFFD}");
    let mut d = tok.stream_decoder(false);
    assert!(d.push(999).is_err());
}

#[test]
fn malformed_vocabularies_are_errors() {
    type Build = Box<dyn FnOnce(&mut GgufWriter)>;
    let cases: Vec<(Build, &str)> = vec![
        (Box::new(|_| {}), "'tokenizer.ggml.model' is missing"),
        (Box::new(|w| _ = w.add_str("tokenizer.ggml.model", "bert")), "'bert'"),
        (Box::new(|w| _ = w.add_str("tokenizer.ggml.model", "llama")), "'tokenizer.ggml.tokens' is missing"),
        (
            Box::new(|w| {
                w.add_str("tokenizer.ggml.model", "llama");
                w.add_array("tokenizer.ggml.tokens", Array::U8(vec![1]));
            }),
            "should be an array of",
        ),
        (
            Box::new(|w| {
                w.add_str("tokenizer.ggml.model", "llama");
                w.add_array("tokenizer.ggml.tokens", Array::String(vec!["a".into(), "b".into()]));
                w.add_array("tokenizer.ggml.scores", Array::F32(vec![1.0]));
            }),
            "tokenizer.ggml.scores",
        ),
        (
            Box::new(|w| {
                w.add_str("tokenizer.ggml.model", "llama");
                w.add_array("tokenizer.ggml.tokens", Array::String(vec!["a".into(), "b".into()]));
                w.add_array("tokenizer.ggml.token_type", Array::U8(vec![1, 1]));
            }),
            "tokenizer.ggml.token_type",
        ),
        (
            Box::new(|w| {
                w.add_str("tokenizer.ggml.model", "gpt2");
                w.add_str("tokenizer.ggml.pre", "no-such-pre");
                w.add_array("tokenizer.ggml.tokens", Array::String(vec!["a".into()]));
            }),
            "'no-such-pre'",
        ),
        (
            Box::new(|w| {
                w.add_str("tokenizer.ggml.model", "gpt2");
                w.add_array("tokenizer.ggml.tokens", Array::String(vec!["a".into()]));
            }),
            "'tokenizer.ggml.merges' is missing",
        ),
        (
            Box::new(|w| {
                w.add_str("tokenizer.ggml.model", "gpt2");
                w.add_array("tokenizer.ggml.tokens", Array::String(vec!["a".into()]));
                w.add_array("tokenizer.ggml.merges", Array::String(vec![]));
                w.add_bool("tokenizer.ggml.add_bos_token", true);
            }),
            "adds a BOS token but has none",
        ),
        (
            Box::new(|w| {
                w.add_str("tokenizer.ggml.model", "llama");
                w.add_array("tokenizer.ggml.tokens", Array::String(vec!["a".into()]));
                w.add_str("tokenizer.ggml.bos_token_id", "1");
            }),
            "'tokenizer.ggml.bos_token_id' should be u32",
        ),
    ];
    for (build, expect) in cases {
        let e = Tokenizer::from_gguf(&gguf(build)).unwrap_err();
        assert!(matches!(e, Error::InvalidModel { .. }), "{e}");
        assert!(e.to_string().contains(expect), "expected '{expect}' in: {e}");
    }
}

#[test]
fn out_of_range_special_ids_fall_back_to_defaults() {
    let tok = Tokenizer::from_gguf(&gguf(|w| {
        spm_vocab(w);
        w.add_u32("tokenizer.ggml.bos_token_id", 100_000);
        w.add_u32("tokenizer.ggml.eos_token_id", 260);
    }))
    .unwrap();
    assert_eq!((tok.bos(), tok.eos()), (Some(1), Some(260)));
    assert!(tok.is_eog(260));
}

/// The fuzz target's seeds (fuzz/seeds/gguf_reader), made by the writer:
/// checked to be current, rewritten with `GANTRY_WRITE_SEEDS=1`. (No `.gguf`
/// extension: the repository ignores `*.gguf`.)
#[test]
fn fuzz_seeds_are_current() {
    use gantry_engine::DType;
    let mut seeds: Vec<(&str, Vec<u8>)> = Vec::new();
    let mut spm = GgufWriter::new();
    spm_vocab(&mut spm);
    seeds.push(("spm_vocab", spm.to_bytes()));
    for (name, pre) in [("bpe_smollm", "smollm"), ("bpe_llama3", "llama-bpe"), ("bpe_default", "default")] {
        let mut w = GgufWriter::new();
        bpe_vocab(pre)(&mut w);
        seeds.push((name, w.to_bytes()));
    }
    let mut model = GgufWriter::new();
    model.set_version(2).set_alignment(64);
    model.add_str("general.architecture", "llama").add_u32("llama.block_count", 1).add_f32("llama.rope.freq_base", 1e4);
    model.add_array("nested", Array::Array(vec![Array::I8(vec![-1]), Array::Bool(vec![true]), Array::U64(vec![7])]));
    model.add_tensor("token_embd.weight", &[32, 2], DType::Q8_0, vec![1; 68]).unwrap();
    model.add_tensor("output_norm.weight", &[4], DType::F32, vec![2; 16]).unwrap();
    model.add_tensor("blk.0.ffn_up.weight", &[256], DType::Q4_K, vec![3; 144]).unwrap();
    seeds.push(("model_v2", model.to_bytes()));

    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds/gguf_reader");
    let write = std::env::var_os("GANTRY_WRITE_SEEDS").is_some();
    for (name, bytes) in seeds {
        assert!(Gguf::parse(&bytes).is_ok(), "{name}");
        let path = dir.join(name);
        if write {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(&path, &bytes).unwrap();
        }
        assert_eq!(std::fs::read(&path).ok(), Some(bytes), "{name} is stale: rerun with GANTRY_WRITE_SEEDS=1");
    }
}

#[test]
fn phi3_special_tokens_swallow_following_spaces() {
    let plain = Tokenizer::from_gguf(&gguf(bpe_vocab("gpt-2"))).unwrap();
    assert_eq!(plain.encode("hello<|end|>  hello", false, true).unwrap(), [259, 261, 32, 32, 259]);
    let phi = Tokenizer::from_gguf(&gguf(|w| {
        bpe_vocab("gpt-2")(w);
        w.add_str("general.name", "Phi-3 mini");
    }))
    .unwrap();
    assert_eq!(phi.encode("hello<|end|>  hello", false, true).unwrap(), [259, 261, 259]);
    assert_eq!(phi.encode("he@@ \tllo", false, false).unwrap(), [256, 262, 257, b'o' as u32]);
}
