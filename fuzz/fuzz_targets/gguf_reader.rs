//! Parses arbitrary bytes as GGUF; when that succeeds, walks every metadata
//! value and tensor info, reads every tensor's bytes, and builds the
//! tokenizer the metadata describes (when it describes one) and runs it.
//!
//! Run with `RUSTC_BOOTSTRAP=1 cargo fuzz run gguf_reader fuzz/seeds/gguf_reader`
//! from the repository root (seeds are small files made by `GgufWriter`).
#![no_main]

use gantry::model::gguf::{Array, Gguf, Value};
use gantry::model::tokenizer::Tokenizer;
use libfuzzer_sys::fuzz_target;

fn walk_array(a: &Array) -> usize {
    let mut n = a.len();
    for i in 0..a.len() {
        if let Some(v) = a.get(i) {
            n += walk_value(&v);
        }
    }
    if let Some(ints) = a.integers() {
        n += ints.count();
    }
    n
}

fn walk_value(v: &Value) -> usize {
    let _ = v.describe();
    match v {
        Value::String(s) => s.len(),
        Value::Array(a) => walk_array(a),
        other => other.as_integer().map_or(1, |i| i as usize & 1),
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(gguf) = Gguf::parse(data) else {
        return;
    };
    let mut seen = 0usize;
    for (key, value) in gguf.metadata() {
        seen = seen.wrapping_add(key.len()).wrapping_add(walk_value(value));
        let _ = gguf.get_u32(key);
        let _ = gguf.get_str(key);
        let _ = gguf.get_slice::<f32>(key);
    }
    for info in gguf.tensors() {
        let bytes = gguf.tensor_data(info).expect("a parsed tensor lies inside the file");
        assert_eq!(bytes.len(), info.size);
        assert!(info.desc().is_ok());
        seen = seen.wrapping_add(info.dims().len());
    }
    let _ = gguf.get_arch::<u32>("block_count");
    if let Ok(tok) = Tokenizer::from_gguf(&gguf) {
        for text in ["Hello world", " <s>x 12", "é🦙\n\n  ", ""] {
            if let Ok(ids) = tok.encode(text, true, true) {
                let _ = tok.decode(&ids, true, false);
                let mut stream = tok.stream_decoder(true);
                for id in ids {
                    let _ = stream.push(id);
                }
            }
        }
    }
    std::hint::black_box(seen);
});
