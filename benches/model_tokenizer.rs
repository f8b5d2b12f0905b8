//! GGUF reading and SmolLM2 tokenization speed.
//!
//! `cargo bench -p gantry --bench model_tokenizer -- --warm-up-time 1 --measurement-time 3`
//!
//! Each group puts a baseline beside the measured code on the same input:
//! copying the file's metadata bytes (a lower bound for any parser) and
//! splitting the text on whitespace (a lower bound for any tokenizer).

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use gantry::model::{Gguf, fetch, tokenizer::Tokenizer};

fn text() -> String {
    let data: serde_json::Value = serde_json::from_str(include_str!("../tests/data/smollm2_tokenizer.json")).unwrap();
    let prompts: Vec<&str> = data["cases"].as_array().unwrap().iter().map(|c| c["text"].as_str().unwrap()).collect();
    let mut text = String::new();
    while text.len() < 16 << 10 {
        for p in &prompts {
            text.push_str(p);
            text.push(' ');
        }
    }
    text
}

fn bench(c: &mut Criterion) {
    let path = match fetch::smollm2_path() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("SKIPPED: SmolLM2 could not be fetched: {e}");
            return;
        }
    };
    let gguf = Gguf::open(&path).unwrap();
    let metadata_bytes = gguf.data_offset();

    let mut g = c.benchmark_group("gguf_open_smollm2");
    g.throughput(Throughput::Bytes(metadata_bytes as u64));
    g.bench_function("Gguf::open", |b| b.iter(|| black_box(Gguf::open(&path).unwrap())));
    g.bench_function("baseline: copy metadata bytes", |b| {
        b.iter(|| black_box(gguf.bytes()[..metadata_bytes].to_vec()))
    });
    g.finish();

    let mut g = c.benchmark_group("tokenizer_from_gguf_smollm2");
    g.bench_function("Tokenizer::from_gguf", |b| b.iter(|| black_box(Tokenizer::from_gguf(&gguf).unwrap())));
    g.finish();

    let tok = Tokenizer::from_gguf(&gguf).unwrap();
    let text = text();
    let ids = tok.encode(&text, false, true).unwrap();
    let mut g = c.benchmark_group("encode_smollm2_16KiB");
    g.throughput(Throughput::Bytes(text.len() as u64));
    g.bench_function("encode", |b| b.iter(|| black_box(tok.encode(black_box(&text), false, true).unwrap())));
    g.bench_function("baseline: split_whitespace", |b| b.iter(|| black_box(text.split_whitespace().count())));
    g.bench_function("decode", |b| b.iter(|| black_box(tok.decode(black_box(&ids), false, false).unwrap())));
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
