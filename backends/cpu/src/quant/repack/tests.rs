//! The repacked layout against the plain one: repack then unrepack is the
//! identity, a repacked row dequantizes to the plain row's values, the
//! scalar kernel's product matches the plain product (integer sums exact,
//! float summation order aside), and every SIMD path matches the scalar
//! kernel bit for bit, on odd shapes: rows past whole groups, rows of an odd
//! number of blocks, 1 to 33 columns, strided columns and results.

use gantry_engine::quant::dequantize_row;
use gantry_engine::{DType, SplitMix64};

use super::*;
use crate::quant::tests::{dot_f64, pool, weights};
use crate::quant::{Columns, ColumnsMut, Isa, QuantMatrix, quant_mul_mat_on, quant_mul_mat_scratch_size};

pub(crate) const TYPES: [DType; 5] = [DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0];
/// The K-quants with a repacked layout (rows of whole 256-value super-blocks).
pub(crate) const K_TYPES: [DType; 5] = [DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K];

fn random_bytes(n: usize, seed: u64) -> Vec<u8> {
    let mut rng = SplitMix64::new(seed);
    (0..n).map(|_| rng.next_u64() as u8).collect()
}

#[test]
fn repack_then_unrepack_is_the_identity() {
    let small = [(32, 1), (96, 15), (96, 16), (64, 17), (576, 33), (224, 48)];
    let k_shapes = [(256, 1), (256, 15), (512, 16), (768, 17), (1536, 33)];
    let cases =
        TYPES.iter().flat_map(|&t| small.map(|s| (t, s))).chain(K_TYPES.iter().flat_map(|&t| k_shapes.map(|s| (t, s))));
    for (dtype, (k, m)) in cases {
        {
            // Any bytes at all, f16 NaNs and Q8_0's −128 included.
            let plain = random_bytes(dtype.row_size(k).unwrap() * m, (k * m) as u64);
            let mut repacked = vec![0xEEu8; repacked_size(dtype, k, m).unwrap()];
            repack_matrix(dtype, k, m, &plain, &mut repacked).unwrap();
            let mut back = vec![0u8; plain.len()];
            unrepack_matrix(dtype, k, m, &repacked, &mut back).unwrap();
            assert_eq!(back, plain, "{dtype} k={k} m={m}");
            let row_bytes = dtype.row_size(k).unwrap();
            let group_bytes = repacked_size(dtype, k, 1).unwrap();
            for r in [0, m / 2, m - 1] {
                let mut want = vec![0f32; k];
                dequantize_row(dtype, &plain[r * row_bytes..(r + 1) * row_bytes], &mut want).unwrap();
                let mut got = vec![1f32; k];
                let group = &repacked[r / GROUP_ROWS * group_bytes..];
                dequantize_repacked_row(dtype, k, group, r % GROUP_ROWS, &mut got).unwrap();
                let same = want.iter().zip(&got).all(|(a, b)| a.to_bits() == b.to_bits());
                assert!(same, "{dtype} k={k} row {r} dequantizes differently");
            }
        }
    }
}

#[test]
fn repacking_refuses_what_it_cannot_hold() {
    assert!(!repacks(DType::Q8_K) && repacked_size(DType::Q8_K, 256, 16).is_none());
    assert!(repacked_size(DType::Q4_K, 576, 16).is_none(), "Q4_K rows of k not a multiple of 256");
    // A Q4_K super-block of 16 rows: 37 cache lines, 148 bytes a row.
    assert_eq!(repacked_size(DType::Q4_K, 512, 17), Some(2 * 2 * 2368));
    // Q2_K's: 25 lines, 100 bytes a row; Q3_K's: 29 lines, 116 bytes a row.
    assert_eq!(repacked_size(DType::Q2_K, 768, 16), Some(3 * 1600));
    assert_eq!(repacked_size(DType::Q3_K, 256, 33), Some(3 * 1856));
    assert!(repacked_size(DType::Q3_K, 384, 16).is_none(), "Q3_K rows of k not a multiple of 256");
    for dtype in DType::LOOKUP_WEIGHTS {
        assert!(!repacks(dtype) && repacked_size(dtype, 256, 16).is_none(), "{dtype} keeps its plain layout");
    }
    assert!(repacked_size(DType::Q4_0, 48, 16).is_none(), "k not a multiple of 32");
    assert!(repacked_size(DType::Q4_0, 0, 16).is_none());
    // SmolLM2's shapes take exactly the plain bytes (no scale padding at 18 blocks).
    assert_eq!(repacked_size(DType::Q4_1, 576, 1536), DType::Q4_1.row_size(576).map(|r| r * 1536));
    // So do Q5_0's (its fifth bits one 64-byte chunk a block of 16 rows).
    assert_eq!(repacked_size(DType::Q5_0, 576, 1536), DType::Q5_0.row_size(576).map(|r| r * 1536));
    // An odd number of blocks pads each group's Q4_0 scale area by 32 bytes.
    assert_eq!(repacked_size(DType::Q4_0, 96, 16), Some(16 * 54 + 32));
    let mut out = vec![0u8; 10];
    let err = repack_matrix(DType::Q4_0, 32, 1, &[0; 18], &mut out).unwrap_err().to_string();
    assert!(err.contains("repacked bytes"), "{err}");
    assert!(repack_group(DType::Q4_0, 32, 17, &[0; 18 * 17], &mut [0; 1024]).is_err(), "17 rows in a group");
    assert!(dequantize_repacked_row(DType::Q8_0, 32, &[0; 10], 0, &mut [0.0; 32]).is_err());
}

/// The plain product of `w` on `isa`.
fn plain_product(isa: Isa, w: &QuantMatrix<'_>, src1: Columns<'_>, dst: ColumnsMut<'_>) {
    let mut scratch = vec![0u8; quant_mul_mat_scratch_size(w.dtype, w.k, src1.n, 2).unwrap()];
    quant_mul_mat_on(isa, w, src1, dst, &mut scratch, &pool(2)).unwrap();
}

/// The repacked product of `w` on `isa` on `threads` threads.
fn repacked_product(isa: Isa, w: RepackedMatrix<'_>, src1: Columns<'_>, dst: ColumnsMut<'_>, threads: usize) {
    let mut scratch = vec![0u8; repacked_scratch_size(w.dtype, w.k, src1.n).unwrap()];
    repacked_mul_mat_on(isa, &[w], src1, &mut [dst], &mut scratch, &pool(threads)).unwrap();
}

/// `n` columns of `k` values, `stride` apart (9.0 in between), that every
/// path's activation quantizer quantizes alike: each 32-value block is
/// whole steps of 0.01 from −1.27 to 1.27 with 1.27 in it, so no value is
/// a rounding tie (where the scalar quantizer rounds away from zero and the
/// SIMD ones to even), and every path multiplies the same integers.
fn exact_columns(k: usize, n: usize, stride: usize) -> Vec<f32> {
    let mut rng = SplitMix64::new((k * n) as u64);
    (0..n * stride)
        .map(|i| match i % stride {
            t if t >= k => 9.0,
            t if t % 32 == (i / stride) % 32 => 1.27,
            _ => (rng.next_u64() % 255) as f32 * 0.01 - 1.27,
        })
        .collect()
}

/// Checks the repacked product of one shape on every path.
pub(crate) fn check_shape(dtype: DType, k: usize, m: usize, ns: &[usize], threads: usize) {
    let (plain, stride, deq) = weights(dtype, k, m, 0, (k + m) as u32);
    check_weights(dtype, k, m, (&plain, stride, &deq), ns, threads);
}

/// Checks the repacked product of the plain weights `(bytes, row stride,
/// dequantized values)` on every path.
fn check_weights(dtype: DType, k: usize, m: usize, w: (&[u8], usize, &[f32]), ns: &[usize], threads: usize) {
    let (plain, stride, deq) = w;
    let mut repacked = vec![0u8; repacked_size(dtype, k, m).unwrap()];
    repack_matrix(dtype, k, m, plain, &mut repacked).unwrap();
    let w = RepackedMatrix { dtype, data: &repacked, k, m };
    let pw = QuantMatrix { dtype, data: plain, row_stride: stride, k, m };
    for &n in ns {
        // Strided columns and results: the padding must stay untouched.
        let (s1, sd) = (k + 3, m + 2);
        let src1 = exact_columns(k, n, s1);
        let columns = Columns { data: &src1, stride: s1, n };
        let mut scalar = vec![f32::NAN; n * sd];
        repacked_product(Isa::Scalar, w, columns, ColumnsMut { data: &mut scalar, stride: sd }, threads);
        let mut want = vec![f32::NAN; n * sd];
        plain_product(Isa::Scalar, &pw, columns, ColumnsMut { data: &mut want, stride: sd });
        for j in 0..n {
            for r in 0..sd {
                let (got, plain) = (scalar[j * sd + r], want[j * sd + r]);
                if r >= m {
                    assert!(got.is_nan(), "{dtype} k={k} m={m} n={n}: wrote past row {m} of column {j}");
                    continue;
                }
                let (_, magnitude) = dot_f64(&deq[r * k..(r + 1) * k], &src1[j * s1..j * s1 + k]);
                let tol = 2e-6 * magnitude + 1e-6;
                assert!(
                    (got - plain).abs() as f64 <= tol,
                    "{dtype} k={k} m={m} n={n} [{j}][{r}]: repacked {got} vs plain {plain} (magnitude {magnitude})"
                );
            }
        }
        for isa in Isa::available().filter(|&i| i != Isa::Scalar) {
            let mut got = vec![f32::NAN; n * sd];
            repacked_product(isa, w, columns, ColumnsMut { data: &mut got, stride: sd }, threads);
            for (i, (g, s)) in got.iter().zip(&scalar).enumerate() {
                assert!(
                    g.to_bits() == s.to_bits() || (g.is_nan() && s.is_nan()),
                    "{dtype} {isa:?} k={k} m={m} n={n} [{}][{}]: {g} vs scalar {s}",
                    i / sd,
                    i % sd
                );
            }
        }
    }
}

#[test]
fn repacked_products_match_the_plain_product_and_every_path_the_scalar_kernel() {
    let all: Vec<usize> = (1..=33).collect();
    for dtype in TYPES {
        check_shape(dtype, 96, 17, &all, 2);
        check_shape(dtype, 576, 40, &[1, 2, 5, 9, 16, 33], 2);
        check_shape(dtype, 32, 1, &[1, 3, 8], 1);
        check_shape(dtype, 224, 48, &[1, 7, 12], 2);
    }
}

#[test]
fn repacked_k_products_match_the_plain_product_and_every_path_the_scalar_kernel() {
    // Every column count of one pass (1..=8) and of two; several
    // super-blocks and groups; one row; small, for the emulated AVX-512 run.
    let all: Vec<usize> = (1..=10).collect();
    for dtype in K_TYPES {
        check_shape(dtype, 256, 17, &all, 2);
        check_shape(dtype, 768, 40, &[1, 5, 17], 2);
        check_shape(dtype, 256, 1, &[1, 3, 8], 1);
        check_shape(dtype, 512, 48, &[2, 12], 2);
    }
}

/// Q2_K and Q3_K blocks of random bits (every quant, high bit, scale and
/// min value) but for finite, moderate `d` and `dmin`.
fn random_q23k_rows(dtype: DType, k: usize, m: usize, seed: u64) -> (Vec<u8>, Vec<f32>) {
    use gantry_engine::quant::{BlockQ2K, BlockQ3K, F16Bits};
    let mut bytes = random_bytes(dtype.row_size(k).unwrap() * m, seed);
    let mut rng = SplitMix64::new(seed ^ 0x5EED);
    let mut half = || F16Bits(half::f16::from_f32((rng.next_u64() % 1000) as f32 * 1e-4 - 0.05).to_le_bytes());
    if dtype == DType::Q2_K {
        for b in bytemuck::cast_slice_mut::<u8, BlockQ2K>(&mut bytes) {
            (b.d, b.dmin) = (half(), half());
        }
    } else {
        for b in bytemuck::cast_slice_mut::<u8, BlockQ3K>(&mut bytes) {
            b.d = half();
        }
    }
    let row = dtype.row_size(k).unwrap();
    let mut deq = vec![0f32; k * m];
    for (r, out) in deq.chunks_exact_mut(k).enumerate() {
        dequantize_row(dtype, &bytes[r * row..(r + 1) * row], out).unwrap();
    }
    (bytes, deq)
}

#[test]
fn repacked_q2k_q3k_products_of_random_blocks_match_on_every_path() {
    for dtype in [DType::Q2_K, DType::Q3_K] {
        for (k, m, ns) in [(256, 17, &[1, 2, 3, 4, 5, 8, 9][..]), (768, 32, &[1, 6, 11][..])] {
            let (plain, deq) = random_q23k_rows(dtype, k, m, (k * m) as u64);
            check_weights(dtype, k, m, (&plain, dtype.row_size(k).unwrap(), &deq), ns, 2);
        }
    }
}

#[test]
fn shared_products_match_single_ones() {
    let p = pool(2);
    let k = 128;
    for dtype in TYPES.into_iter().chain(K_TYPES) {
        let k = if K_TYPES.contains(&dtype) { 512 } else { k };
        let ms = [40, 16, 7];
        let packed: Vec<Vec<u8>> = ms
            .iter()
            .map(|&m| {
                let (plain, _, _) = weights(dtype, k, m, 0, m as u32);
                let mut out = vec![0u8; repacked_size(dtype, k, m).unwrap()];
                repack_matrix(dtype, k, m, &plain, &mut out).unwrap();
                out
            })
            .collect();
        let ws: Vec<RepackedMatrix<'_>> =
            packed.iter().zip(ms).map(|(data, m)| RepackedMatrix { dtype, data, k, m }).collect();
        for n in [1, 3] {
            let src1: Vec<f32> = (0..n * k).map(|i| ((i * 31) % 97) as f32 / 50.0 - 1.0).collect();
            let columns = Columns { data: &src1, stride: k, n };
            let mut outs: Vec<Vec<f32>> = ms.iter().map(|&m| vec![0f32; m * n]).collect();
            let mut dsts: Vec<ColumnsMut<'_>> =
                outs.iter_mut().zip(ms).map(|(o, m)| ColumnsMut { data: o, stride: m }).collect();
            let mut scratch = vec![0u8; repacked_scratch_size(dtype, k, n).unwrap()];
            repacked_mul_mat(&ws, columns, &mut dsts, &mut scratch, &p).unwrap();
            for (i, w) in ws.iter().enumerate() {
                let mut alone = vec![0f32; w.m * n];
                repacked_mul_mat(&[*w], columns, &mut [ColumnsMut { data: &mut alone, stride: w.m }], &mut scratch, &p)
                    .unwrap();
                assert_eq!(outs[i], alone, "{dtype} matrix {i} n={n}: shared differs from alone");
            }
        }
    }
}

#[test]
fn repacked_products_refuse_bad_operands() {
    let p = pool(1);
    let (k, m) = (64, 16);
    let data = vec![0u8; repacked_size(DType::Q4_0, k, m).unwrap()];
    let w = RepackedMatrix { dtype: DType::Q4_0, data: &data, k, m };
    let src1 = vec![0f32; k * 2];
    let mut dst = vec![0f32; m * 2];
    let mut scratch = vec![0u8; repacked_scratch_size(DType::Q4_0, k, 2).unwrap()];
    let columns = Columns { data: &src1, stride: k, n: 2 };
    let short = RepackedMatrix { data: &data[..data.len() - 1], ..w };
    let err = repacked_mul_mat(&[short], columns, &mut [ColumnsMut { data: &mut dst, stride: m }], &mut scratch, &p)
        .unwrap_err()
        .to_string();
    assert!(err.contains("do not fit"), "{err}");
    let err = repacked_mul_mat(&[w], columns, &mut [ColumnsMut { data: &mut dst[..m], stride: m }], &mut scratch, &p)
        .unwrap_err()
        .to_string();
    assert!(err.contains("result columns"), "{err}");
    let err = repacked_mul_mat(&[w], columns, &mut [ColumnsMut { data: &mut dst, stride: m }], &mut scratch[..8], &p)
        .unwrap_err()
        .to_string();
    assert!(err.contains("scratch"), "{err}");
    let lookup = RepackedMatrix { dtype: DType::IQ4_NL, ..w };
    assert!(
        repacked_mul_mat(&[lookup], columns, &mut [ColumnsMut { data: &mut dst, stride: m }], &mut scratch, &p)
            .is_err()
    );
}
