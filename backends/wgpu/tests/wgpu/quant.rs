//! The wgpu backend's dequantizing kernels (GET_ROWS, MUL_MAT) against
//! ggml's own blocks and dequantized values from `tests/data/quant`.

use super::support::{Harness, assert_close, read_f32_file, reference_dir, values};
use gantry_engine::DType;

const ROWS: usize = 4;
const N: usize = 512;

/// ggml's blocks and its dequantization of them for `dtype`.
fn golden(dtype: DType) -> (Vec<u8>, Vec<f32>) {
    let dir = reference_dir();
    let name = dtype.name().to_lowercase();
    let blocks = std::fs::read(dir.join("quant").join(format!("{name}_quantized.bin"))).expect("blocks");
    let floats = read_f32_file(&dir.join("quant").join(format!("{name}_dequantized_f32.bin")));
    assert_eq!(blocks.len(), ROWS * dtype.row_size(N).unwrap());
    assert_eq!(floats.len(), ROWS * N);
    (blocks, floats)
}

const TYPES: [DType; 10] = DType::QUANTIZED_WEIGHTS;

#[test]
fn wgpu_get_rows_dequantizes_like_ggml() {
    let dev = device_or_skip!();
    for dtype in TYPES {
        let (blocks, floats) = golden(dtype);
        let mut h = Harness::new(dev);
        let w = h.input_bytes(dtype, &[N, ROWS], blocks);
        let idx = h.input_i32(&[5], &[3, 0, 2, 1, 3]);
        let y = h.ctx.get_rows(w, idx).unwrap();
        h.compute(&[y]);
        let want: Vec<f32> = [3, 0, 2, 1, 3].iter().flat_map(|&r| floats[r * N..(r + 1) * N].to_vec()).collect();
        // The same f32 products as ggml's to_float, up to fused multiply-adds.
        assert_close(&format!("GET_ROWS {dtype}"), &h.read(y), &want, 1e-6, 1e-6);
    }
}

#[test]
fn wgpu_mul_mat_quantized_like_ggml() {
    let dev = device_or_skip!();
    for dtype in TYPES {
        let (blocks, floats) = golden(dtype);
        // 2 and 8 columns: the matrix-vector kernel; 9: the tiled one. The 4 rows
        // are 2 batches of 2, broadcast over 4 batches of src1.
        for n in [2usize, 8, 9] {
            let xv = values(N * n * 4, 100 + n as u64, -1.0, 1.0);
            let mut h = Harness::new(dev);
            let w = h.input_bytes(dtype, &[N, 2, 2], blocks.clone());
            let x = h.input(DType::F32, &[N, n, 4], &xv);
            let y = h.ctx.mul_mat(w, x).unwrap();
            h.compute(&[y]);
            let mut want = Vec::new();
            for b in 0..4 {
                for col in 0..n {
                    for r in 0..2 {
                        let wrow = &floats[((b / 2) * 2 + r) * N..][..N];
                        let xrow = &xv[(b * n + col) * N..][..N];
                        want.push(wrow.iter().zip(xrow).map(|(&a, &c)| a as f64 * c as f64).sum::<f64>() as f32);
                    }
                }
            }
            assert_close(&format!("MUL_MAT {dtype} n={n}"), &h.read(y), &want, 2e-4, 1e-4);
        }
    }
}

/// ggml's input values.
fn golden_input() -> Vec<f32> {
    read_f32_file(&reference_dir().join("quant").join("input_f32.bin"))
}

#[test]
fn wgpu_quantizing_copies_write_ggml_blocks() {
    let dev = device_or_skip!();
    let input = golden_input();
    for dtype in [DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0] {
        let (blocks, _) = golden(dtype);
        let row = dtype.row_size(N).unwrap();
        // CPY of all rows, and SET_ROWS of rows 2 and 0 into slots 0 and 3 of a 4-row tensor.
        let mut h = Harness::new(dev);
        let x = h.input(DType::F32, &[N, ROWS], &input);
        let q = h.input_bytes(dtype, &[N, ROWS], vec![0xEE; ROWS * row]);
        let y = h.ctx.cpy(x, q).unwrap();
        let picks = h.input(DType::F32, &[N, 2], &[&input[2 * N..3 * N], &input[..N]].concat());
        let slots = h.input_i32(&[2], &[0, 3]);
        let cache = h.input_bytes(dtype, &[N, ROWS], vec![0xEE; ROWS * row]);
        let z = h.ctx.set_rows(cache, picks, slots).unwrap();
        h.compute(&[y, z]);
        let got = h.ctx.get_bytes(q).unwrap();
        let differing: Vec<usize> = (0..got.len() / dtype.bytes_per_block())
            .filter(|&b| {
                let r = b * dtype.bytes_per_block()..(b + 1) * dtype.bytes_per_block();
                got[r.clone()] != blocks[r]
            })
            .collect();
        assert!(differing.is_empty(), "{dtype}: blocks {differing:?} differ from ggml's");
        let set = h.ctx.get_bytes(cache).unwrap();
        assert_eq!(set[..row], blocks[2 * row..3 * row], "{dtype}: SET_ROWS slot 0");
        assert_eq!(set[3 * row..], blocks[..row], "{dtype}: SET_ROWS slot 3");
        assert!(set[row..3 * row].iter().all(|&b| b == 0xEE), "{dtype}: SET_ROWS wrote other rows");
    }
}

/// Random weights quantized by the engine's quantizer, multiplied on the
/// device and by f64 over the engine's dequantization: odd row counts, both
/// kernels, a broadcast batch, and GET_ROWS of the same blocks.
#[test]
fn wgpu_quantized_products_match_the_engine_quantizers() {
    use gantry_engine::quant::{dequantize_row, quantize_row};
    let dev = device_or_skip!();
    for dtype in TYPES {
        let k = if dtype.block_size() == 256 { 512 } else { 96 };
        let (m, batches) = (37, 2);
        let w = values(k * m * batches, 200 + dtype as u64, -2.0, 2.0);
        let row = dtype.row_size(k).unwrap();
        let mut blocks = vec![0u8; row * m * batches];
        let mut deq = vec![0f32; k * m * batches];
        for r in 0..m * batches {
            quantize_row(dtype, &w[r * k..(r + 1) * k], &mut blocks[r * row..(r + 1) * row]).unwrap();
            dequantize_row(dtype, &blocks[r * row..(r + 1) * row], &mut deq[r * k..(r + 1) * k]).unwrap();
        }
        for n in [1usize, 6, 13] {
            let xv = values(k * n * 4, 300 + n as u64, -1.0, 1.0);
            let mut h = Harness::new(dev);
            let a = h.input_bytes(dtype, &[k, m, batches], blocks.clone());
            let x = h.input(DType::F32, &[k, n, 4], &xv);
            let y = h.ctx.mul_mat(a, x).unwrap();
            let idx = h.input_i32(&[3, batches], &[36, 0, 17, 5, 5, 1]);
            let g = h.ctx.get_rows(a, idx).unwrap();
            h.compute(&[y, g]);
            let mut want = Vec::new();
            for b in 0..4 {
                for col in 0..n {
                    for r in 0..m {
                        let wr = &deq[((b / 2) * m + r) * k..][..k];
                        let xr = &xv[(b * n + col) * k..][..k];
                        want.push(wr.iter().zip(xr).map(|(&p, &q)| p as f64 * q as f64).sum::<f64>() as f32);
                    }
                }
            }
            assert_close(&format!("MUL_MAT {dtype} n={n}"), &h.read(y), &want, 1e-3, 1e-4);
            let mut rows = Vec::new();
            for (b, picks) in [[36, 0, 17], [5, 5, 1]].iter().enumerate() {
                for &r in picks {
                    rows.extend_from_slice(&deq[(b * m + r) * k..][..k]);
                }
            }
            assert_close(&format!("GET_ROWS {dtype}"), &h.read(g), &rows, 1e-6, 1e-6);
        }
    }
}

/// The device's quantizing copy writes the engine quantizer's bytes.
#[test]
fn wgpu_quantizing_copy_matches_the_engine_quantizer() {
    use gantry_engine::quant::quantize_row;
    let dev = device_or_skip!();
    for dtype in [DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0] {
        let (k, rows) = (160, 7);
        let x = values(k * rows, 400 + dtype as u64, -3.0, 3.0);
        let row = dtype.row_size(k).unwrap();
        let mut want = vec![0u8; row * rows];
        for r in 0..rows {
            quantize_row(dtype, &x[r * k..(r + 1) * k], &mut want[r * row..(r + 1) * row]).unwrap();
        }
        let mut h = Harness::new(dev);
        let a = h.input(DType::F32, &[k, rows], &x);
        let q = h.input_bytes(dtype, &[k, rows], vec![0; row * rows]);
        let y = h.ctx.cpy(a, q).unwrap();
        h.compute(&[y]);
        let got = h.ctx.get_bytes(q).unwrap();
        let size = dtype.bytes_per_block();
        let differing =
            (0..got.len() / size).filter(|&b| got[b * size..(b + 1) * size] != want[b * size..(b + 1) * size]).count();
        assert_eq!(differing, 0, "{dtype}: {differing} of {} blocks differ from the engine's", got.len() / size);
    }
}

/// Seeded blocks of a lookup type (IQ4_NL, IQ4_XS, MXFP4): random nibbles
/// and scale bits, the scales kept where products stay of order one.
fn lookup_blocks(dtype: DType, nbytes: usize, seed: u64) -> Vec<u8> {
    let mut rng = gantry_engine::SplitMix64::new(seed);
    let mut out: Vec<u8> = (0..nbytes).map(|_| rng.next_u64() as u8).collect();
    for block in out.chunks_mut(dtype.bytes_per_block()) {
        if dtype == DType::MXFP4 {
            // Halves of 2^(e - 127) from 2^-14 to 2^1.
            block[0] = 114 + rng.below(16) as u8;
        } else {
            // An f16 d between 2^-8 and 2^-1 of either sign.
            let d = rng.range(1.0, 2.0) * 2f32.powi(rng.below(8) as i32 - 8);
            let d = if rng.next_u64() & 1 == 1 { -d } else { d };
            block[..2].copy_from_slice(&half::f16::from_f32(d).to_le_bytes());
        }
    }
    out
}

/// MXFP4 blocks with every exponent (the two lowest give subnormal
/// scales) and every nibble dequantize bit for bit as in the engine.
#[test]
fn wgpu_mxfp4_every_exponent_dequantizes_like_the_engine() {
    use gantry_engine::quant::dequantize_row;
    let dev = device_or_skip!();
    let blocks: Vec<u8> =
        (0..256u32).flat_map(|e| std::iter::once(e as u8).chain((0..16u8).map(|j| j.wrapping_mul(17)))).collect();
    let mut want = vec![0f32; 256 * 32];
    dequantize_row(DType::MXFP4, &blocks, &mut want).unwrap();
    let mut h = Harness::new(dev);
    let a = h.input_bytes(DType::MXFP4, &[32, 256], blocks);
    let idx = h.input_i32(&[256], &(0..256).collect::<Vec<i32>>());
    let g = h.ctx.get_rows(a, idx).unwrap();
    h.compute(&[g]);
    let got = h.read(g);
    let differing: Vec<usize> = (0..want.len()).filter(|&i| got[i].to_bits() != want[i].to_bits()).collect();
    assert!(differing.is_empty(), "exponents {:?} differ", differing.iter().map(|i| i / 32).collect::<Vec<_>>());
}

/// GET_ROWS of the lookup types gives the engine's dequantization bit for
/// bit (an MXFP4 row of three 17-byte blocks also puts rows at odd bytes);
/// MUL_MAT and MUL_MAT_ID over them match f64 products of those values.
#[test]
fn wgpu_lookup_types_dequantize_like_the_engine() {
    use gantry_engine::quant::dequantize_row;
    let dev = device_or_skip!();
    for dtype in DType::LOOKUP_WEIGHTS {
        let k = if dtype.block_size() == 256 { 512 } else { 96 };
        let (m, experts) = (37, 3);
        let row = dtype.row_size(k).unwrap();
        let blocks = lookup_blocks(dtype, row * m * experts, 500 + dtype as u64);
        let mut deq = vec![0f32; k * m * experts];
        for r in 0..m * experts {
            dequantize_row(dtype, &blocks[r * row..(r + 1) * row], &mut deq[r * k..(r + 1) * k]).unwrap();
        }
        for n in [1usize, 13] {
            let xv = values(k * n * experts, 600 + n as u64, -1.0, 1.0);
            let mut h = Harness::new(dev);
            let a = h.input_bytes(dtype, &[k, m, experts], blocks.clone());
            let x = h.input(DType::F32, &[k, n, experts], &xv);
            let y = h.ctx.mul_mat(a, x).unwrap();
            let idx = h.input_i32(&[3, experts], &[36, 0, 17, 5, 5, 1, 2, 3, 4]);
            let g = h.ctx.get_rows(a, idx).unwrap();
            // Each of n tokens uses experts 2 and 0.
            let ids = h.input_i32(&[2, n], &[2, 0].repeat(n));
            let xs = h.ctx.reshape(x, [k, 1, n * experts, 1]).unwrap();
            let xs = h.ctx.view_3d(xs, [k, 1, n], k * 4, k * 4, 0).unwrap();
            let e = h.ctx.mul_mat_id(a, xs, ids).unwrap();
            h.compute(&[y, g, e]);
            let dot = |w: &[f32], x: &[f32]| w.iter().zip(x).map(|(&p, &q)| p as f64 * q as f64).sum::<f64>() as f32;
            let mut want = Vec::new();
            for b in 0..experts {
                for col in 0..n {
                    for r in 0..m {
                        want.push(dot(&deq[(b * m + r) * k..][..k], &xv[(b * n + col) * k..][..k]));
                    }
                }
            }
            assert_close(&format!("MUL_MAT {dtype} n={n}"), &h.read(y), &want, 1e-3, 1e-4);
            let mut want = Vec::new();
            for t in 0..n {
                for ex in [2, 0] {
                    for r in 0..m {
                        want.push(dot(&deq[(ex * m + r) * k..][..k], &xv[t * k..][..k]));
                    }
                }
            }
            assert_close(&format!("MUL_MAT_ID {dtype} n={n}"), &h.read(e), &want, 1e-3, 1e-4);
            let mut rows = Vec::new();
            for (b, picks) in [[36, 0, 17], [5, 5, 1], [2, 3, 4]].iter().enumerate() {
                for &r in picks {
                    rows.extend_from_slice(&deq[(b * m + r) * k..][..k]);
                }
            }
            let got = h.read(g);
            let differing = got.iter().zip(&rows).filter(|(a, b)| a.to_bits() != b.to_bits()).count();
            assert_eq!(differing, 0, "GET_ROWS {dtype}: {differing} values differ from the engine's dequantization");
        }
    }
}
