//! The formats against ggml's own output (`tests/data/quant`), and the
//! activation types against their definitions.

use std::path::PathBuf;

use super::*;

/// ggml's quantizer outputs, `tests/data/quant` (see its README).
fn reference_dir() -> PathBuf {
    crate::testing::reference_dir().join("quant")
}

fn read(name: &str) -> Vec<u8> {
    let path = reference_dir().join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

fn read_f32(name: &str) -> Vec<f32> {
    read(name).chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect()
}

const ROWS: usize = 4;
const ROW_LEN: usize = 512;

const REFERENCE_TYPES: [DType; 10] = DType::QUANTIZED_WEIGHTS;

#[test]
fn reference_quantizers_write_ggmls_bytes() {
    let input = read_f32("input_f32.bin");
    assert_eq!(input.len(), ROWS * ROW_LEN);
    let mut failures = Vec::new();
    for dtype in REFERENCE_TYPES {
        let want = read(&format!("{}_quantized.bin", dtype.name().to_lowercase()));
        let row_bytes = dtype.row_size(ROW_LEN).unwrap();
        assert_eq!(want.len(), ROWS * row_bytes, "{dtype}: reference file size");
        let mut got = vec![0u8; want.len()];
        for (x, y) in input.chunks_exact(ROW_LEN).zip(got.chunks_exact_mut(row_bytes)) {
            quantize_row(dtype, x, y).unwrap();
        }
        if let Some(at) = got.iter().zip(&want).position(|(a, b)| a != b) {
            let block = at / dtype.bytes_per_block();
            let differing = got.iter().zip(&want).filter(|(a, b)| a != b).count();
            failures.push(format!(
                "{dtype}: {differing} bytes differ, first at byte {at} (block {block}, offset {}): got {:#04x}, ggml {:#04x}",
                at % dtype.bytes_per_block(),
                got[at],
                want[at]
            ));
        }
    }
    assert!(failures.is_empty(), "quantized bytes differ from ggml's:\n{}", failures.join("\n"));
}

#[test]
fn dequantizers_give_ggmls_floats() {
    let mut failures = Vec::new();
    for dtype in REFERENCE_TYPES {
        let name = dtype.name().to_lowercase();
        let blocks = read(&format!("{name}_quantized.bin"));
        let want = read_f32(&format!("{name}_dequantized_f32.bin"));
        let row_bytes = dtype.row_size(ROW_LEN).unwrap();
        let mut got = vec![0f32; want.len()];
        for (x, y) in blocks.chunks_exact(row_bytes).zip(got.chunks_exact_mut(ROW_LEN)) {
            dequantize_row(dtype, x, y).unwrap();
        }
        if let Some(at) = got.iter().zip(&want).position(|(a, b)| a.to_bits() != b.to_bits()) {
            failures.push(format!("{dtype}: value {at} is {} here, {} in ggml", got[at], want[at]));
        }
    }
    assert!(failures.is_empty(), "dequantized values differ from ggml's:\n{}", failures.join("\n"));
}

/// A deterministic test signal with sign changes, a zero run and an outlier.
fn signal(n: usize, seed: u64) -> Vec<f32> {
    crate::testing::test_signal(n, seed, 2.0)
}

#[test]
fn q8_1_is_within_half_a_step_and_its_sum_is_d_times_the_quant_sum() {
    let x = signal(1024, 7);
    let mut bytes = vec![0u8; DType::Q8_1.row_size(x.len()).unwrap()];
    quantize_row(DType::Q8_1, &x, &mut bytes).unwrap();
    let blocks: &[BlockQ8_1] = bytemuck::cast_slice(&bytes);
    for (b, xb) in blocks.iter().zip(x.chunks_exact(32)) {
        let amax = xb.iter().fold(0f32, |a, v| a.max(v.abs()));
        let d_exact = amax / 127.0;
        let d = b.d.to_f32();
        assert_eq!(b.d, F16Bits::from_f32(d_exact), "d is amax/127 rounded to f16");
        let sum: i32 = b.qs.iter().map(|&q| q as i32).sum();
        assert_eq!(b.s, F16Bits::from_f32(sum as f32 * d_exact), "s = d·Σq (with the unrounded d)");
        for (&q, &v) in b.qs.iter().zip(xb) {
            // The quants were chosen against the unrounded d.
            assert!((q as f32 * d_exact - v).abs() <= 0.5 * d_exact * 1.0001 + 1e-30, "{q} vs {v}");
        }
        let mut y = [0f32; 32];
        b.dequantize(&mut y);
        for (&yv, &q) in y.iter().zip(&b.qs) {
            assert_eq!(yv, q as f32 * d);
        }
    }
}

#[test]
fn q8_k_is_within_half_a_step_and_its_bsums_are_the_group_sums() {
    let mut x = signal(1024, 11);
    x[256..512].fill(0.0); // an all-zero super-block
    let mut bytes = vec![0u8; DType::Q8_K.row_size(x.len()).unwrap()];
    quantize_row(DType::Q8_K, &x, &mut bytes).unwrap();
    let mut y = vec![0f32; x.len()];
    dequantize_row(DType::Q8_K, &bytes, &mut y).unwrap();
    for (i, (chunk, xb)) in bytes.chunks_exact(292).zip(x.chunks_exact(256)).enumerate() {
        let b: BlockQ8K = bytemuck::pod_read_unaligned(chunk);
        let amax = xb.iter().fold(0f32, |a, v| a.max(v.abs()));
        if amax == 0.0 {
            assert_eq!(b.d, 0.0, "block {i}");
            assert!(b.qs.iter().all(|&q| q == 0) && b.bsums.iter().all(|&s| s == 0));
            continue;
        }
        assert!((b.d.abs() - amax / 127.0).abs() <= amax / 127.0 * 1e-6, "block {i}: d {} amax {amax}", b.d);
        for (g, s) in b.bsums.iter().enumerate() {
            let want: i32 = b.qs[16 * g..16 * g + 16].iter().map(|&q| q as i32).sum();
            assert_eq!(*s as i32, want, "block {i} group {g}");
        }
        for (j, (&q, &v)) in b.qs.iter().zip(xb).enumerate() {
            assert_eq!(y[256 * i + j], b.d * q as f32);
            assert!((b.d * q as f32 - v).abs() <= 0.5 * b.d.abs() * 1.0001, "block {i} value {j}: {q} vs {v}");
        }
    }
}

#[test]
fn every_type_round_trips_within_its_precision() {
    // Not a bit-exactness check (the reference files do that) but a sanity
    // bound on every quantizer for a different signal, including Q8_1/Q8_K:
    // the rms error of each block against the block's largest magnitude.
    let x = signal(2048, 3);
    for (dtype, rel) in [
        (DType::Q4_0, 0.1),
        (DType::Q4_1, 0.1),
        (DType::Q5_0, 0.05),
        (DType::Q5_1, 0.05),
        (DType::Q8_0, 0.01),
        (DType::Q8_1, 0.01),
        (DType::Q2_K, 0.3),
        (DType::Q3_K, 0.15),
        (DType::Q4_K, 0.1),
        (DType::Q5_K, 0.05),
        (DType::Q6_K, 0.03),
        (DType::Q8_K, 0.01),
    ] {
        let mut bytes = vec![0u8; dtype.row_size(x.len()).unwrap()];
        quantize_row(dtype, &x, &mut bytes).unwrap();
        let mut y = vec![0f32; x.len()];
        dequantize_row(dtype, &bytes, &mut y).unwrap();
        let bs = dtype.block_size();
        for (i, (xb, yb)) in x.chunks_exact(bs).zip(y.chunks_exact(bs)).enumerate() {
            let amax = xb.iter().fold(0f32, |a, v| a.max(v.abs()));
            let err = (xb.iter().zip(yb).map(|(a, b)| (a - b) * (a - b)).sum::<f32>() / bs as f32).sqrt();
            assert!(err <= rel * amax, "{dtype} block {i}: rms error {err}, block max |x| {amax}");
        }
    }
}

#[test]
fn bad_lengths_are_errors() {
    let x = vec![1f32; 64];
    let mut out = vec![0u8; 1024];
    let mut y = vec![0f32; 512];
    for dtype in [DType::Q4_0, DType::Q8_1, DType::Q4_K, DType::Q8_K] {
        let bs = dtype.block_size();
        // A row that is not a whole number of blocks.
        assert!(quantize_row(dtype, &vec![1f32; bs + 1], &mut out).is_err(), "{dtype}");
        assert!(dequantize_row(dtype, &out, &mut y[..bs + 1]).is_err(), "{dtype}");
        // Output too short / input truncated.
        let row = dtype.row_size(bs).unwrap();
        assert!(quantize_row(dtype, &vec![1f32; bs], &mut out[..row - 1]).is_err(), "{dtype}");
        assert!(dequantize_row(dtype, &out[..row - 1], &mut y[..bs]).is_err(), "{dtype}");
        assert!(quantize_row(dtype, &vec![1f32; bs], &mut out[..row]).is_ok());
        assert!(dequantize_row(dtype, &out[..row], &mut y[..bs]).is_ok());
    }
    assert!(quantize_row(DType::F32, &x, &mut out).is_err());
    assert!(dequantize_row(DType::F16, &out, &mut y).is_err());
}

#[test]
fn blocks_have_alignment_one_except_q8_k() {
    assert_eq!(align_of::<BlockQ4_0>(), 1);
    assert_eq!(align_of::<BlockQ5_1>(), 1);
    assert_eq!(align_of::<BlockQ2K>(), 1);
    assert_eq!(align_of::<BlockQ6K>(), 1);
    assert_eq!(align_of::<BlockQ8K>(), 4);
}

/// The read-only lookup types against the `gguf` Python package's
/// dequantizers on seeded random blocks (`tests/data/quant/<type>_blocks.bin`,
/// see its README), bit for bit.
#[test]
fn lookup_dequantizers_give_gguf_pys_floats() {
    for dtype in DType::LOOKUP_WEIGHTS {
        let name = dtype.name();
        let blocks = read(&format!("{name}_blocks.bin"));
        let want = read_f32(&format!("{name}_dequantized_f32.bin"));
        assert_eq!(blocks.len() / dtype.bytes_per_block() * dtype.block_size(), want.len(), "{dtype}: file sizes");
        let mut got = vec![0f32; want.len()];
        dequantize_row(dtype, &blocks, &mut got).unwrap();
        if let Some(at) = got.iter().zip(&want).position(|(a, b)| a.to_bits() != b.to_bits()) {
            panic!("{dtype}: value {at} is {} here, {} in gguf-py", got[at], want[at]);
        }
        assert!(want.iter().any(|v| *v != 0.0), "{dtype}: the reference is not all zeros");
    }
}

#[test]
fn lookup_types_refuse_to_quantize_and_check_their_rows() {
    for dtype in DType::LOOKUP_WEIGHTS {
        let mut dst = vec![0u8; dtype.row_size(256).unwrap()];
        assert!(quantize_row(dtype, &[0.5; 256], &mut dst).is_err(), "{dtype}");
        let mut y = vec![0f32; 256];
        assert!(dequantize_row(dtype, &dst[..dst.len() - 1], &mut y).is_err(), "{dtype}: short source");
        assert!(dequantize_row(dtype, &dst, &mut y[..255]).is_err(), "{dtype}: not whole blocks");
    }
}

#[test]
fn e8m0_half_scales_are_ggmls() {
    // 2^(e − 128): subnormal for e < 2, exact everywhere.
    assert_eq!(e8m0_to_f32_half(0).to_bits(), 0x0020_0000);
    assert_eq!(e8m0_to_f32_half(1).to_bits(), 0x0040_0000);
    assert_eq!(e8m0_to_f32_half(2), 2f32.powi(-126));
    assert_eq!(e8m0_to_f32_half(128), 1.0);
    assert_eq!(e8m0_to_f32_half(127), 0.5);
    assert_eq!(e8m0_to_f32_half(255), 2f32.powi(127));
}
