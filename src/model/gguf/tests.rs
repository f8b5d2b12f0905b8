//! Reader tests: hand-assembled bytes (independent of the writer), round
//! trips through the writer, and every kind of malformed input.

use gantry_engine::DType;

use crate::Error;

use super::*;

/// A file assembled byte by byte from the GGUF specification, not by the
/// writer: one `u32` key, one string key, one 2x3 F32 tensor.
fn hand_made_file() -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(b"GGUF");
    b.extend_from_slice(&3u32.to_le_bytes());
    b.extend_from_slice(&1u64.to_le_bytes()); // tensors
    b.extend_from_slice(&2u64.to_le_bytes()); // key-value pairs
    b.extend_from_slice(&17u64.to_le_bytes());
    b.extend_from_slice(b"llama.block_count");
    b.extend_from_slice(&4u32.to_le_bytes()); // u32
    b.extend_from_slice(&30u32.to_le_bytes());
    b.extend_from_slice(&20u64.to_le_bytes());
    b.extend_from_slice(b"general.architecture");
    b.extend_from_slice(&8u32.to_le_bytes()); // string
    b.extend_from_slice(&5u64.to_le_bytes());
    b.extend_from_slice(b"llama");
    b.extend_from_slice(&1u64.to_le_bytes());
    b.extend_from_slice(b"w");
    b.extend_from_slice(&2u32.to_le_bytes()); // n_dims
    b.extend_from_slice(&3u64.to_le_bytes());
    b.extend_from_slice(&2u64.to_le_bytes());
    b.extend_from_slice(&0u32.to_le_bytes()); // F32
    b.extend_from_slice(&0u64.to_le_bytes()); // offset
    while !b.len().is_multiple_of(32) {
        b.push(0);
    }
    for i in 0..6 {
        b.extend_from_slice(&(i as f32).to_le_bytes());
    }
    // Writers pad the data of every tensor to the alignment, the last one too.
    b.resize(b.len().next_multiple_of(32), 0);
    b
}

fn invalid(bytes: &[u8]) -> String {
    match Gguf::parse(bytes) {
        Err(Error::InvalidModel { file, reason }) => {
            assert_eq!(file, "<memory>");
            reason
        }
        Err(other) => panic!("expected InvalidModel, got {other}"),
        Ok(_) => panic!("malformed input parsed"),
    }
}

#[test]
fn reads_a_hand_assembled_file() {
    let bytes = hand_made_file();
    let g = Gguf::parse(&bytes).unwrap();
    assert_eq!(g.version(), 3);
    assert_eq!(g.alignment(), 32);
    assert_eq!(g.architecture().unwrap(), "llama");
    assert_eq!(g.get_u32("llama.block_count").unwrap(), 30);
    assert_eq!(g.get_arch::<u64>("block_count").unwrap(), 30);
    let keys: Vec<&str> = g.metadata().map(|(k, _)| k).collect();
    assert_eq!(keys, ["llama.block_count", "general.architecture"]);
    let t = g.tensor("w").unwrap();
    assert_eq!((t.ne, t.n_dims, t.dtype, t.size), ([3, 2, 1, 1], 2, DType::F32, 24));
    assert_eq!(g.data_offset() % 32, 0);
    let data: Vec<f32> =
        g.tensor_data(t).unwrap().chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
    assert_eq!(data, [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
}

#[test]
fn writer_output_matches_the_hand_assembled_bytes() {
    let mut w = GgufWriter::new();
    w.add_u32("llama.block_count", 30).add_str("general.architecture", "llama");
    let data: Vec<u8> = (0..6).flat_map(|i| (i as f32).to_le_bytes()).collect();
    w.add_tensor("w", &[3, 2], DType::F32, data).unwrap();
    assert_eq!(w.to_bytes(), hand_made_file());
}

fn every_value() -> Vec<(&'static str, Value)> {
    vec![
        ("u8", Value::U8(200)),
        ("i8", Value::I8(-100)),
        ("u16", Value::U16(60000)),
        ("i16", Value::I16(-30000)),
        ("u32", Value::U32(4_000_000_000)),
        ("i32", Value::I32(-2_000_000_000)),
        ("u64", Value::U64(u64::MAX)),
        ("i64", Value::I64(i64::MIN)),
        ("f32", Value::F32(-1.5)),
        ("f64", Value::F64(1e300)),
        ("bool", Value::Bool(true)),
        ("string", Value::String("héllo ✓".into())),
        ("empty string", Value::String(String::new())),
        ("a.u8", Value::Array(Array::U8(vec![1, 2, 255]))),
        ("a.i8", Value::Array(Array::I8(vec![-1]))),
        ("a.u16", Value::Array(Array::U16(vec![1, 65535]))),
        ("a.i16", Value::Array(Array::I16(vec![-2]))),
        ("a.u32", Value::Array(Array::U32(vec![7, 8]))),
        ("a.i32", Value::Array(Array::I32(vec![-7, 8]))),
        ("a.u64", Value::Array(Array::U64(vec![u64::MAX]))),
        ("a.i64", Value::Array(Array::I64(vec![i64::MIN, 0]))),
        ("a.f32", Value::Array(Array::F32(vec![0.25, -0.0]))),
        ("a.f64", Value::Array(Array::F64(vec![2.5]))),
        ("a.bool", Value::Array(Array::Bool(vec![true, false]))),
        ("a.string", Value::Array(Array::String(vec!["a".into(), String::new(), "Ġthe".into()]))),
        ("a.empty", Value::Array(Array::F32(vec![]))),
        (
            "a.nested",
            Value::Array(Array::Array(vec![
                Array::I32(vec![1, 2]),
                Array::String(vec!["x".into()]),
                Array::Array(vec![Array::Bool(vec![true])]),
                Array::U8(vec![]),
            ])),
        ),
    ]
}

#[test]
fn every_value_type_round_trips_in_versions_2_and_3() {
    for version in [2, 3] {
        let mut w = GgufWriter::new();
        w.set_version(version);
        for (k, v) in every_value() {
            w.add(k, v);
        }
        let g = Gguf::parse(&w.to_bytes()).unwrap();
        assert_eq!(g.version(), version);
        for (k, v) in every_value() {
            assert_eq!(g.get(k), Some(&v), "{k}");
        }
        assert_eq!(g.get_slice::<String>("a.string").unwrap()[2], "Ġthe");
        assert_eq!(g.get_as::<&[f32]>("a.f32").unwrap(), &[0.25, -0.0]);
        assert!(g.get_slice::<i32>("a.f32").unwrap_err().to_string().contains("'a.f32'"));
        assert_eq!(g.get_as::<i64>("u32").unwrap(), 4_000_000_000);
        let e = g.get_u32("i8").unwrap_err().to_string();
        assert!(e.contains("'i8'") && e.contains("should be u32"), "{e}");
        assert!(g.get_u32("missing").unwrap_err().to_string().contains("'missing' is missing"));
        assert_eq!(g.get_opt::<u32>("missing").unwrap(), None);
        assert!(g.get_opt::<u32>("string").is_err());
    }
}

#[test]
fn tensors_are_laid_out_aligned_and_read_back() {
    for alignment in [32u32, 64, 1] {
        let mut w = GgufWriter::new();
        w.set_alignment(alignment);
        w.add_tensor("a", &[32, 3], DType::Q8_0, vec![7; 3 * 34]).unwrap();
        w.add_tensor("b", &[5], DType::F16, vec![1; 10]).unwrap();
        w.add_tensor("c", &[2, 2, 2, 2], DType::I32, vec![9; 64]).unwrap();
        w.add_tensor("empty", &[0, 4], DType::F32, vec![]).unwrap();
        let g = Gguf::parse(&w.to_bytes()).unwrap();
        assert_eq!(g.alignment(), alignment as usize);
        assert_eq!(g.tensors().len(), 4);
        for t in g.tensors() {
            assert_eq!(t.offset % alignment as usize, 0);
            assert_eq!((g.data_offset() + t.offset) % alignment as usize, 0);
        }
        let a = g.tensor("a").unwrap();
        assert_eq!((a.dims(), a.size), (&[32, 3][..], 102));
        assert!(g.tensor_data(a).unwrap().iter().all(|&b| b == 7));
        assert!(g.tensor_data(g.tensor("c").unwrap()).unwrap().iter().all(|&b| b == 9));
        assert_eq!(g.tensor("empty").unwrap().size, 0);
        assert!(g.tensor("nope").unwrap_err().to_string().contains("'nope'"));
    }
}

#[test]
fn rejects_bad_magic_and_versions() {
    assert!(invalid(b"GGUG\x03\0\0\0").contains("not a GGUF file"));
    assert!(invalid(b"").contains("truncated"));
    for version in [0u32, 1, 4, u32::MAX] {
        let mut b = hand_made_file();
        b[4..8].copy_from_slice(&version.to_le_bytes());
        assert!(invalid(&b).contains(&format!("unsupported GGUF version {version}")));
    }
}

#[test]
fn every_truncation_is_an_error() {
    let mut w = GgufWriter::new();
    for (k, v) in every_value() {
        w.add(k, v);
    }
    w.add_tensor("t", &[4, 2], DType::F32, vec![1; 32]).unwrap();
    let bytes = w.to_bytes();
    Gguf::parse(&bytes).unwrap();
    let data_start = Gguf::parse(&bytes).unwrap().data_offset();
    for len in 0..bytes.len() {
        let r = Gguf::parse(&bytes[..len]);
        // Cutting only the padding after the tensor infos leaves a file whose
        // tensor data is missing: still an error, as the tensor has bytes.
        assert!(r.is_err(), "prefix of {len} bytes (data starts at {data_start}) parsed");
    }
}

/// Offset of the 8-byte count field following `key`'s bytes in `bytes`.
fn find(bytes: &[u8], needle: &[u8]) -> usize {
    bytes.windows(needle.len()).position(|w| w == needle).expect("needle present")
}

#[test]
fn absurd_counts_fail_before_allocating() {
    let base = hand_made_file();
    // Tensor count and key-value count.
    for (at, what) in [(8, "tensors"), (16, "items")] {
        let mut b = base.clone();
        b[at..at + 8].copy_from_slice(&u64::MAX.to_le_bytes());
        let r = invalid(&b);
        assert!(r.contains(what), "{r}");
    }
    // A string length.
    let mut b = base.clone();
    b[24..32].copy_from_slice(&(u64::MAX - 3).to_le_bytes());
    assert!(invalid(&b).contains("claims"));
    // An array count.
    let mut w = GgufWriter::new();
    w.add_array("arr", Array::U64(vec![1, 2]));
    let mut b = w.to_bytes();
    let at = find(&b, b"arr") + 3 + 4 + 4;
    b[at..at + 8].copy_from_slice(&(1u64 << 61).to_le_bytes());
    assert!(invalid(&b).contains("array metadata key 'arr' claims"));
    // An array of strings whose count fits the bytes only at one byte each.
    let mut w = GgufWriter::new();
    w.add_array("s", Array::String(vec!["a".into()]));
    let mut b = w.to_bytes();
    let at = find(&b, b"s\x09") + 1 + 4 + 4;
    let len = b.len() as u64;
    b[at..at + 8].copy_from_slice(&len.to_le_bytes());
    assert!(invalid(&b).contains("claims"));
}

#[test]
fn rejects_unknown_types() {
    let mut b = hand_made_file();
    let at = find(&b, b"llama.block_count") + 17;
    b[at..at + 4].copy_from_slice(&13u32.to_le_bytes());
    assert!(invalid(&b).contains("unknown value type 13"));

    let mut w = GgufWriter::new();
    w.add_array("arr", Array::U8(vec![1]));
    let mut b = w.to_bytes();
    let at = find(&b, b"arr") + 3 + 4;
    b[at..at + 4].copy_from_slice(&99u32.to_le_bytes());
    assert!(invalid(&b).contains("unknown value type 99"));

    for ggml_type in [4u32, 16, 22, u32::MAX] {
        let mut w = GgufWriter::new();
        w.add_raw_tensor_info("iq", &[256], ggml_type, 0);
        let r = invalid(&w.to_bytes());
        assert!(r.contains(&format!("ggml type {ggml_type}")), "{r}");
    }
}

#[test]
fn rejects_bad_tensor_layouts() {
    type Build = Box<dyn Fn(&mut GgufWriter)>;
    let cases: Vec<(Build, &str)> = vec![
        (Box::new(|w| _ = w.add_raw_tensor_info("m", &[4], 0, 8)), "not a multiple of the alignment"),
        (Box::new(|w| _ = w.add_raw_tensor_info("far", &[4], 0, 1 << 40)), "outside the file"),
        (Box::new(|w| _ = w.add_raw_tensor_info("end", &[4], 0, u64::MAX - 31)), "outside the file"),
        (Box::new(|w| _ = w.add_raw_tensor_info("big", &[1 << 62, 1 << 62], 0, 0)), "spans more than"),
        // Empty, so the file holds it, but a kernel would walk 2^40 rows.
        (Box::new(|w| _ = w.add_raw_tensor_info("hidden", &[0, 1 << 40], 0, 0)), "'hidden': shape [0, 1099511627776"),
        (
            Box::new(|w| {
                // Each info fits the file; their number is past any model's.
                for i in 0..70_000 {
                    w.add_raw_tensor_info(&format!("t{i}"), &[0], 0, 0);
                }
            }),
            "the tensor count = 70000 is more than the 65536 allowed",
        ),
        (Box::new(|w| _ = w.add_raw_tensor_info("huge", &[u64::MAX], 0, 0)), "too large"),
        (Box::new(|w| _ = w.add_raw_tensor_info("5d", &[1, 1, 1, 1, 1], 0, 0)), "5 dimensions"),
        (Box::new(|w| _ = w.add_raw_tensor_info("q", &[33], 2, 0)), "block size 32"),
        (Box::new(|w| _ = w.add_raw_tensor_info(&"n".repeat(64), &[1], 0, 0)), "more than ggml's 63"),
        (
            Box::new(|w| {
                w.add_tensor("a", &[16], DType::F32, vec![0; 64]).unwrap();
                w.add_raw_tensor_info("b", &[8], 0, 32);
            }),
            "overlap",
        ),
        (
            Box::new(|w| {
                w.add_tensor("a", &[8], DType::F32, vec![0; 32]).unwrap();
                w.add_tensor("a", &[8], DType::F32, vec![0; 32]).unwrap();
            }),
            "'a' appears twice",
        ),
    ];
    for (build, expect) in cases {
        let mut w = GgufWriter::new();
        build(&mut w);
        let r = invalid(&w.to_bytes());
        assert!(r.contains(expect), "expected '{expect}' in: {r}");
    }
}

#[test]
fn rejects_bad_metadata() {
    let mut w = GgufWriter::new();
    w.add_u32("k", 1).add_u32("k", 2);
    assert!(invalid(&w.to_bytes()).contains("'k' appears twice"));

    for (value, ok) in
        [(Value::U32(0), false), (Value::U32(48), false), (Value::U64(64), false), (Value::U32(64), true)]
    {
        let mut w = GgufWriter::new();
        w.add(ALIGNMENT_KEY, value);
        assert_eq!(Gguf::parse(&w.to_bytes()).is_ok(), ok);
    }

    let mut w = GgufWriter::new();
    w.add_str("s", "ok?");
    let mut b = w.to_bytes();
    let at = find(&b, b"ok?");
    b[at + 2] = 0xff;
    assert!(invalid(&b).contains("not valid UTF-8"));
    let mut b = w.to_bytes();
    let at = find(&b, b"s\x08");
    b[at] = 0xc3;
    assert!(invalid(&b).contains("not valid UTF-8"));

    let mut w = GgufWriter::new();
    w.add_bool("b", true);
    let mut b = w.to_bytes();
    let at = find(&b, b"b\x07\0\0\0") + 5;
    b[at] = 2;
    assert!(invalid(&b).contains("not 0 or 1"));

    let mut deep = Array::U8(vec![1]);
    for _ in 0..MAX_ARRAY_DEPTH + 1 {
        deep = Array::Array(vec![deep]);
    }
    let mut w = GgufWriter::new();
    w.add_array("deep", deep);
    assert!(invalid(&w.to_bytes()).contains("deeper than"));
}

#[test]
fn random_corruption_never_panics() {
    let mut w = GgufWriter::new();
    for (k, v) in every_value() {
        w.add(k, v);
    }
    w.add_tensor("t", &[32, 2], DType::Q8_0, vec![3; 68]).unwrap();
    w.add_tensor("u", &[3], DType::F32, vec![3; 12]).unwrap();
    let bytes = w.to_bytes();
    let mut rng = gantry_engine::SplitMix64::new(0x9e37_79b9_7f4a_7c15);
    let mut next = || rng.next_u64();
    let mut parsed = 0;
    for _ in 0..20_000 {
        let mut b = bytes.clone();
        for _ in 0..1 + next() % 4 {
            let at = (next() as usize) % b.len();
            b[at] = match next() % 4 {
                0 => 0xff,
                1 => 0,
                2 => b[at] ^ (1 << (next() % 8)),
                _ => next() as u8,
            };
        }
        if let Ok(g) = Gguf::parse(&b) {
            parsed += 1;
            for t in g.tensors() {
                assert_eq!(g.tensor_data(t).unwrap().len(), t.size);
            }
        }
    }
    assert!(parsed > 0, "some corruptions (e.g. of tensor bytes) leave a valid file");
}

#[test]
fn opens_files_through_a_memory_map() {
    let scratch = tempfile::Builder::new().prefix("gantry-gguf-").tempdir().unwrap();
    let dir = scratch.path().to_owned();
    let path = dir.join("hand.gguf");
    std::fs::write(&path, hand_made_file()).unwrap();
    let g = Gguf::open(&path).unwrap();
    assert!(g.is_mapped());
    assert_eq!(g.source(), path.display().to_string());
    assert_eq!(g.host_memory().len(), hand_made_file().len());
    std::fs::write(&path, b"GGUF\x01\0\0\0").unwrap();
    let e = Gguf::open(&path).unwrap_err().to_string();
    assert!(e.contains("hand.gguf") && e.contains("version 1"), "{e}");
    let e = Gguf::open(dir.join("missing.gguf")).unwrap_err().to_string();
    assert!(e.contains("missing.gguf"), "{e}");
}

/// Inputs the fuzzer found to break an invariant (fuzz/regressions/gguf_reader):
/// each must now be refused, with the reason given in its file name.
#[test]
fn fuzz_regressions_are_errors() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/regressions/gguf_reader");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let reason = invalid(&std::fs::read(&path).unwrap());
        let expect = name.split("--").nth(1).unwrap().replace('-', " ");
        assert!(reason.contains(&expect), "{name}: {reason}");
        n += 1;
    }
    assert!(n > 0);
}

/// Soft-caps of 0 turn them off; any other value must be a finite positive
/// number, or the key and the value are named (gemma3 had said only that
/// "soft-caps" must be non-negative).
#[test]
fn non_negative_keys_name_a_bad_value() {
    for (value, ok) in [(0.0f32, true), (30.0, true), (-1.0, false), (f32::NAN, false), (f32::INFINITY, false)] {
        let mut w = GgufWriter::new();
        w.add_str("general.architecture", "gemma3").add_f32("gemma3.final_logit_softcapping", value);
        let g = Gguf::parse(&w.to_bytes()).unwrap();
        match g.get_arch_non_negative("final_logit_softcapping") {
            Ok(v) => assert!(ok && v == Some(value), "{value}: {v:?}"),
            Err(e) => {
                let e = e.to_string();
                assert!(!ok && e.contains(&format!("gemma3.final_logit_softcapping = {value}")), "{e}");
            }
        }
    }
}
