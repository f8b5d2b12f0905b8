//! Every available path against the scalar one and against f64 arithmetic on
//! the dequantized values (the engine's dequantizers, themselves checked bit
//! for bit against ggml).

use gantry_engine::DType;
use gantry_engine::quant::{
    BlockIQ4NL, BlockIQ4XS, BlockMXFP4, BlockQ2K, BlockQ3K, BlockQ4_0, BlockQ4_1, BlockQ4K, BlockQ5_0, BlockQ5_1,
    BlockQ5K, BlockQ6K, BlockQ8_0, BlockQ8_1, BlockQ8K, QuantBlock, QuantizeBlock, dequantize_blocks, dequantize_row,
    quantize_blocks, quantize_row,
};

use bytemuck::Zeroable;

use super::*;

pub(super) fn quantized<B: QuantizeBlock>(x: &[f32]) -> Vec<B> {
    let mut b = vec![B::zeroed(); x.len() / B::ELEMS];
    quantize_blocks(x, &mut b);
    b
}

pub(super) fn dequantized<B: QuantBlock>(b: &[B]) -> Vec<f32> {
    let mut y = vec![0f32; b.len() * B::ELEMS];
    dequantize_blocks(b, &mut y);
    y
}

pub(super) fn dot_f64(a: &[f32], b: &[f32]) -> (f64, f64) {
    let exact = a.iter().zip(b).map(|(&x, &y)| x as f64 * y as f64).sum();
    let magnitude = a.iter().zip(b).map(|(&x, &y)| (x as f64 * y as f64).abs()).sum();
    (exact, magnitude)
}

#[test]
fn activation_quantizers_agree_with_the_reference() {
    let x = test_signal(4096, 21);
    let want0: Vec<BlockQ8_0> = quantized(&x);
    let want1: Vec<BlockQ8_1> = quantized(&x);
    let wantk: Vec<BlockQ8K> = quantized(&x);
    for isa in Isa::available() {
        let mut got0 = vec![BlockQ8_0::zeroed(); want0.len()];
        quantize_row_q8_0(isa, &x, &mut got0);
        let mut got1 = vec![BlockQ8_1::zeroed(); want1.len()];
        quantize_row_q8_1(isa, &x, &mut got1);
        let mut gotk = vec![BlockQ8K::zeroed(); wantk.len()];
        quantize_row_q8_k(isa, &x, &mut gotk);
        let mut differing = 0;
        for (i, ((g0, w0), (g1, w1))) in got0.iter().zip(&want0).zip(got1.iter().zip(&want1)).enumerate() {
            assert_eq!(g0.d, w0.d, "{isa:?} Q8_0 block {i}");
            assert_eq!(g1.d, w1.d, "{isa:?} Q8_1 block {i}");
            let d_exact = x_absmax(&x[32 * i..32 * i + 32]) / 127.0;
            for j in 0..32 {
                // Ties may round differently (even vs away from zero), by one step at most.
                let v = x[32 * i + j] * (1.0 / d_exact);
                for (g, w) in [(g0.qs[j], w0.qs[j]), (g1.qs[j], w1.qs[j])] {
                    if g != w {
                        assert!((g as i32 - w as i32).abs() == 1, "{isa:?} block {i} value {j}: {g} vs {w}");
                        assert!((v.abs().fract() - 0.5).abs() < 1e-3, "{isa:?}: {g} vs {w} is not a tie ({v})");
                        differing += 1;
                    }
                }
            }
            let sum: i32 = g1.qs.iter().map(|&q| q as i32).sum();
            assert_eq!(
                g1.s,
                gantry_engine::quant::F16Bits::from_f32(sum as f32 * (x_absmax(&x[32 * i..32 * i + 32]) / 127.0))
            );
        }
        assert!(differing <= 8, "{isa:?}: {differing} quants differ from the reference");
        for (i, (g, w)) in gotk.iter().zip(&wantk).enumerate() {
            assert_eq!(g.d.abs(), w.d.abs(), "{isa:?} Q8_K block {i}");
            let flip = if g.d == w.d { 1 } else { -1 };
            for j in 0..256 {
                assert_eq!(g.qs[j] as i32, flip * w.qs[j] as i32, "{isa:?} Q8_K block {i} value {j}");
            }
            for s in 0..16 {
                assert_eq!(g.bsums[s] as i32, flip * w.bsums[s] as i32);
            }
        }
    }
}

fn x_absmax(x: &[f32]) -> f32 {
    x.iter().fold(0f32, |a, v| a.max(v.abs()))
}

/// Checks `dot_on` on every path against f64 on the dequantized blocks and
/// against the scalar path. `rounding(x, y)` bounds what the format itself
/// rounds beyond the dequantized values (Q8_1's f16 block sum `s`).
fn check_dot<X: QuantBlock, Y: QuantizeBlock>(
    dot_on: fn(Isa, usize, &[X], &[Y]) -> f32,
    rounding: fn(&[X], &[Y]) -> f64,
) {
    for (n, seed) in [(X::ELEMS.max(Y::ELEMS), 1), (4096, 2), (1024, 3)] {
        let (data, _, _) = weights(X::DTYPE, n, 1, 0, seed);
        let x: Vec<X> = data.chunks_exact(size_of::<X>()).map(bytemuck::pod_read_unaligned).collect();
        let y: Vec<Y> = quantized(&test_signal(n, seed + 100));
        let (exact, magnitude) = dot_f64(&dequantized(&x), &dequantized(&y));
        let scalar = dot_on(Isa::Scalar, n, &x, &y);
        for isa in Isa::available() {
            let got = dot_on(isa, n, &x, &y);
            // Integer sums are exact; only the f32 scale products and the
            // accumulation round, well under 1e-5 of the magnitude.
            let tol = 1e-5 * magnitude + 1e-6 + rounding(&x, &y);
            assert!(
                (got as f64 - exact).abs() <= tol,
                "{}·{} n={n} {isa:?}: {got} vs f64 {exact} (magnitude {magnitude})",
                X::DTYPE,
                Y::DTYPE
            );
            assert!((got - scalar).abs() as f64 <= tol, "{} {isa:?}: {got} vs scalar {scalar}", X::DTYPE);
        }
    }
}

#[test]
fn dot_products_match_f64_on_every_path() {
    fn exact<X, Y>(_: &[X], _: &[Y]) -> f64 {
        0.0
    }
    // m·s stands for m·d·Σq with s rounded to f16: half an f16 step, 2^-11 relative.
    fn q4_1_sums(x: &[BlockQ4_1], y: &[BlockQ8_1]) -> f64 {
        x.iter().zip(y).map(|(a, b)| (a.m.to_f32() * b.s.to_f32()).abs() as f64 / 2048.0).sum()
    }
    fn q5_1_sums(x: &[BlockQ5_1], y: &[BlockQ8_1]) -> f64 {
        x.iter().zip(y).map(|(a, b)| (a.m.to_f32() * b.s.to_f32()).abs() as f64 / 2048.0).sum()
    }
    check_dot::<BlockQ4_0, BlockQ8_0>(vec_dot_q4_0_q8_0_on, exact);
    check_dot::<BlockQ4_1, BlockQ8_1>(vec_dot_q4_1_q8_1_on, q4_1_sums);
    check_dot::<BlockQ5_0, BlockQ8_0>(vec_dot_q5_0_q8_0_on, exact);
    check_dot::<BlockQ5_1, BlockQ8_1>(vec_dot_q5_1_q8_1_on, q5_1_sums);
    check_dot::<BlockQ8_0, BlockQ8_0>(vec_dot_q8_0_q8_0_on, exact);
    check_dot::<BlockQ2K, BlockQ8K>(vec_dot_q2_k_q8_k_on, exact);
    check_dot::<BlockQ3K, BlockQ8K>(vec_dot_q3_k_q8_k_on, exact);
    check_dot::<BlockQ4K, BlockQ8K>(vec_dot_q4_k_q8_k_on, exact);
    check_dot::<BlockQ5K, BlockQ8K>(vec_dot_q5_k_q8_k_on, exact);
    check_dot::<BlockQ6K, BlockQ8K>(vec_dot_q6_k_q8_k_on, exact);
    check_dot::<BlockIQ4NL, BlockQ8_0>(vec_dot_iq4_nl_q8_0_on, exact);
    check_dot::<BlockMXFP4, BlockQ8_0>(vec_dot_mxfp4_q8_0_on, exact);
    check_dot::<BlockIQ4XS, BlockQ8K>(vec_dot_iq4_xs_q8_k_on, exact);
}

#[test]
fn dot_products_stop_at_whole_blocks_and_the_shorter_slice() {
    let x: Vec<BlockQ4_0> = quantized(&test_signal(128, 4));
    let y: Vec<BlockQ8_0> = quantized(&test_signal(128, 5));
    let two = vec_dot_q4_0_q8_0(64, &x, &y);
    assert_eq!(vec_dot_q4_0_q8_0(64 + 31, &x, &y), two);
    assert_eq!(vec_dot_q4_0_q8_0(128, &x[..2], &y), two);
    assert_eq!(vec_dot_q4_0_q8_0(0, &x, &y), 0.0);
}

/// Every weight type of the quantized product: the ones Gantry quantizes,
/// then the read-only lookup types (seeded random blocks, see [`weights`]).
const WEIGHT_TYPES: [DType; 13] = {
    let mut all = [DType::F32; 13];
    let mut i = 0;
    while i < 13 {
        all[i] = if i < 10 { DType::QUANTIZED_WEIGHTS[i] } else { DType::LOOKUP_WEIGHTS[i - 10] };
        i += 1;
    }
    all
};

pub(super) fn pool(threads: usize) -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap()
}

/// A weight matrix of `m` rows of `k` values, rows `stride` bytes apart, and
/// its dequantized values: quantized test signals, or for the read-only
/// lookup types (no quantizer) seeded random blocks.
pub(super) fn weights(dtype: DType, k: usize, m: usize, pad: usize, seed: u32) -> (Vec<u8>, usize, Vec<f32>) {
    let row = dtype.row_size(k).unwrap();
    let stride = row + pad;
    let lookup = gantry_engine::testing::lookup_rows(dtype, k, m, stride, u64::from(seed));
    let quantize = lookup.is_none();
    let mut data = lookup.unwrap_or_else(|| vec![0xAAu8; stride * m]);
    let mut deq = vec![0f32; k * m];
    for r in 0..m {
        if quantize {
            let x = test_signal(k, seed + r as u32);
            quantize_row(dtype, &x, &mut data[r * stride..r * stride + row]).unwrap();
        }
        dequantize_row(dtype, &data[r * stride..r * stride + row], &mut deq[r * k..(r + 1) * k]).unwrap();
    }
    (data, stride, deq)
}

#[test]
fn mul_mat_matches_the_f64_product_of_the_dequantized_weights() {
    let (k, m) = (512, 37);
    let p = pool(2);
    for dtype in WEIGHT_TYPES {
        let (data, stride, deq) = weights(dtype, k, m, 3, 17);
        let w = QuantMatrix { dtype, data: &data, row_stride: stride, k, m };
        for n in [1, 3, 8, 9] {
            let (s1, sd) = (k + 5, m + 2);
            let src1: Vec<f32> = (0..n)
                .flat_map(|j| {
                    let mut row = test_signal(k, 900 + j as u32);
                    row.extend([7.0; 5]); // padding the stride skips
                    row
                })
                .collect();
            for isa in Isa::available() {
                let mut dst = vec![f32::NAN; n * sd];
                let mut scratch = vec![0u8; quant_mul_mat_scratch_size(dtype, k, n, 2).unwrap()];
                quant_mul_mat_on(
                    isa,
                    &w,
                    Columns { data: &src1, stride: s1, n },
                    ColumnsMut { data: &mut dst, stride: sd },
                    &mut scratch,
                    &p,
                )
                .unwrap();
                let (mut err, mut norm) = (0f64, 0f64);
                for j in 0..n {
                    for r in 0..m {
                        let (want, _) = dot_f64(&deq[r * k..(r + 1) * k], &src1[j * s1..j * s1 + k]);
                        let got = dst[j * sd + r] as f64;
                        assert!(got.is_finite(), "{dtype} {isa:?} n={n}: dst[{j}][{r}] not written");
                        err += (got - want) * (got - want);
                        norm += want * want;
                    }
                    for r in m..sd {
                        assert!(dst[j * sd + r].is_nan(), "{dtype} {isa:?}: wrote past row {m} of dst row {j}");
                    }
                }
                let nmse = err / norm;
                // The error is the activations' 8-bit rounding. The lookup
                // types' random-bit rows do not follow the signal, so their
                // products are smaller against that rounding: a looser bound
                // (measured: IQ4_XS 5.6e-4).
                let bound = if DType::LOOKUP_WEIGHTS.contains(&dtype) { 1e-3 } else { 5e-4 };
                assert!(nmse <= bound, "{dtype} {isa:?} n={n}: NMSE {nmse:e}");
            }
        }
    }
}

#[test]
fn tiled_and_dot_paths_agree_with_the_scalar_dots() {
    // The tiled path (n ≥ 8, AVX2) and the per-row dots must give the same
    // numbers as the scalar dot of each row with the quantized activations.
    // n = 11: whole groups of 4 columns and a remainder of 3.
    let (k, m, n) = (1024, 21, 11);
    let p = pool(2);
    for dtype in WEIGHT_TYPES {
        let (data, stride, _) = weights(dtype, k, m, 0, 3);
        let w = QuantMatrix { dtype, data: &data, row_stride: stride, k, m };
        let src1: Vec<f32> = (0..n).flat_map(|j| test_signal(k, 50 + j as u32)).collect();
        let mut dst = vec![0f32; n * m];
        let mut scratch = vec![0u8; quant_mul_mat_scratch_size(dtype, k, n, 2).unwrap()];
        quant_mul_mat(
            &w,
            Columns { data: &src1, stride: k, n },
            ColumnsMut { data: &mut dst, stride: m },
            &mut scratch,
            &p,
        )
        .unwrap();
        assert_matches_dequantized_dots(dtype, k, &data, stride, &src1, &dst, m, &format!("{dtype}"));
    }
}

/// Every weight type's several-row dot (`WeightType::dot_rows`) on every
/// path against the scalar single-row dot of each row.
pub(super) fn check_dot_rows<W: weight::WeightType>(k: usize) {
    use weight::ROWS;
    let dtype = <W::Block as QuantBlock>::DTYPE;
    let (data, stride, _) = weights(dtype, k, ROWS, 0, 40);
    let row_bytes = dtype.row_size(k).unwrap();
    let rows: Vec<&[W::Block]> =
        (0..ROWS).map(|r| bytemuck::cast_slice(&data[r * stride..r * stride + row_bytes])).collect();
    let x = test_signal(k, 41);
    let mut act = vec![W::Act::zeroed(); k / <W::Act as QuantBlock>::ELEMS];
    quantize_blocks(&x, &mut act);
    let scalar: Vec<f32> = rows.iter().map(|r| W::dot(Isa::Scalar, r, &act)).collect();
    for isa in Isa::available() {
        let got = W::dot_rows(isa, std::array::from_fn(|r| rows[r]), &act);
        for r in 0..ROWS {
            let magnitude: f64 = {
                let mut wd = vec![0f32; k];
                dequantize_row(dtype, &data[r * stride..r * stride + row_bytes], &mut wd).unwrap();
                let mut yd = vec![0f32; k];
                dequantize_blocks(&act, &mut yd);
                dot_f64(&wd, &yd).1
            };
            let tol = 1e-5 * magnitude + 1e-6;
            assert!(
                (got[r] - scalar[r]).abs() as f64 <= tol,
                "{dtype} k={k} {isa:?} row {r}: {} vs {}",
                got[r],
                scalar[r]
            );
        }
    }
}

#[test]
fn several_row_dots_match_the_scalar_dots() {
    // 19 and 7 blocks of 32: remainders after the kernel's steps of 4 blocks.
    for k in [608, 224, 4096] {
        check_dot_rows::<weight::WQ4_0>(k);
        check_dot_rows::<weight::WQ4_1>(k);
        check_dot_rows::<weight::WQ5_0>(k);
        check_dot_rows::<weight::WQ5_1>(k);
        check_dot_rows::<weight::WQ8_0>(k);
    }
    for k in [256, 768, 4096] {
        check_dot_rows::<weight::WQ2K>(k);
        check_dot_rows::<weight::WQ3K>(k);
        check_dot_rows::<weight::WQ4K>(k);
        check_dot_rows::<weight::WQ5K>(k);
        check_dot_rows::<weight::WQ6K>(k);
        check_dot_rows::<weight::WIQ4XS>(k);
    }
    for k in [608, 224, 32] {
        check_dot_rows::<weight::WIQ4NL>(k);
        check_dot_rows::<weight::WMXFP4>(k);
    }
}

#[test]
fn matrix_vector_products_match_the_scalar_dots() {
    // The dot path (few columns) for odd row counts, rows left over after the
    // groups of `weight::ROWS`, K not a multiple of 256 where the type allows,
    // on one and two threads.
    for threads in [1, 2] {
        let p = pool(threads);
        for dtype in WEIGHT_TYPES {
            let k = if dtype.block_size() == 256 { 768 } else { 608 };
            for (m, n) in [(37, 1), (23, 3), (4, 1), (3, 2)] {
                let (data, stride, _) = weights(dtype, k, m, 5, 60);
                let w = QuantMatrix { dtype, data: &data, row_stride: stride, k, m };
                let src1: Vec<f32> = (0..n).flat_map(|j| test_signal(k, 70 + j as u32)).collect();
                for isa in Isa::available() {
                    let mut dst = vec![f32::NAN; n * m];
                    let mut scratch = vec![0u8; quant_mul_mat_scratch_size(dtype, k, n, threads).unwrap()];
                    quant_mul_mat_on(
                        isa,
                        &w,
                        Columns { data: &src1, stride: k, n },
                        ColumnsMut { data: &mut dst, stride: m },
                        &mut scratch,
                        &p,
                    )
                    .unwrap();
                    let what = format!("{dtype} {isa:?} {threads} threads m={m} n={n}");
                    assert_matches_dequantized_dots(dtype, k, &data, stride, &src1, &dst, m, &what);
                }
            }
        }
    }
}

#[test]
fn mul_mat_rejects_bad_shapes_and_short_buffers() {
    let p = pool(1);
    let (data, stride, _) = weights(DType::Q4_0, 64, 4, 0, 1);
    let src1 = vec![0.5f32; 64 * 2];
    let mut dst = vec![0f32; 8];
    let size = quant_mul_mat_scratch_size(DType::Q4_0, 64, 2, 1).unwrap();
    let mut scratch = vec![0u8; size];
    let w = QuantMatrix { dtype: DType::Q4_0, data: &data, row_stride: stride, k: 64, m: 4 };
    assert!(
        quant_mul_mat(
            &w,
            Columns { data: &src1, stride: 64, n: 2 },
            ColumnsMut { data: &mut dst, stride: 4 },
            &mut scratch,
            &p
        )
        .is_ok()
    );
    // K not a whole number of blocks.
    let bad_k = QuantMatrix { k: 48, ..w };
    assert!(
        quant_mul_mat(
            &bad_k,
            Columns { data: &src1, stride: 64, n: 2 },
            ColumnsMut { data: &mut dst, stride: 4 },
            &mut scratch,
            &p
        )
        .is_err()
    );
    // Truncated weights.
    let short = QuantMatrix { data: &data[..data.len() - 1], ..w };
    assert!(
        quant_mul_mat(
            &short,
            Columns { data: &src1, stride: 64, n: 2 },
            ColumnsMut { data: &mut dst, stride: 4 },
            &mut scratch,
            &p
        )
        .is_err()
    );
    // src1, dst and scratch too short.
    assert!(
        quant_mul_mat(
            &w,
            Columns { data: &src1[..100], stride: 64, n: 2 },
            ColumnsMut { data: &mut dst, stride: 4 },
            &mut scratch,
            &p
        )
        .is_err()
    );
    assert!(
        quant_mul_mat(
            &w,
            Columns { data: &src1, stride: 64, n: 2 },
            ColumnsMut { data: &mut dst[..7], stride: 4 },
            &mut scratch,
            &p
        )
        .is_err()
    );
    assert!(
        quant_mul_mat(
            &w,
            Columns { data: &src1, stride: 64, n: 2 },
            ColumnsMut { data: &mut dst, stride: 4 },
            &mut scratch[..size - 1],
            &p
        )
        .is_err()
    );
    // Not a quantized weight type.
    let f32w = QuantMatrix { dtype: DType::F32, ..w };
    assert!(
        quant_mul_mat(
            &f32w,
            Columns { data: &src1, stride: 64, n: 2 },
            ColumnsMut { data: &mut dst, stride: 4 },
            &mut scratch,
            &p
        )
        .is_err()
    );
    assert!(quant_mul_mat_scratch_size(DType::F16, 64, 1, 1).is_err());
    // K = 0: empty dot products, zeros.
    let empty = QuantMatrix { data: &[], row_stride: 0, k: 0, ..w };
    let mut scratch0 = vec![0u8; quant_mul_mat_scratch_size(DType::Q4_0, 0, 2, 1).unwrap()];
    dst.fill(1.0);
    quant_mul_mat(
        &empty,
        Columns { data: &[], stride: 0, n: 2 },
        ColumnsMut { data: &mut dst, stride: 4 },
        &mut scratch0,
        &p,
    )
    .unwrap();
    assert!(dst.iter().all(|&v| v == 0.0));
}

#[test]
fn get_rows_dequantizes_exactly_and_set_rows_writes_reference_bytes() {
    for dtype in WEIGHT_TYPES {
        let k = 512;
        let (data, stride, deq) = weights(dtype, k, 5, 2, 40);
        let mut out = vec![0f32; 3 * k];
        dequantize_rows(dtype, &data, stride, k, [4, 0, 4], &mut out, k).unwrap();
        for (i, r) in [4usize, 0, 4].into_iter().enumerate() {
            assert_eq!(&out[i * k..(i + 1) * k], &deq[r * k..(r + 1) * k], "{dtype} row {r}");
        }
        assert!(dequantize_rows(dtype, &data, stride, k, [5], &mut out, k).is_err(), "{dtype}: row past the end");
        assert!(dequantize_rows(dtype, &data, stride, k + 1, [0], &mut out, k).is_err());
        assert!(dequantize_rows(dtype, &data, stride, k, [0, 1, 2, 3], &mut out, k).is_err(), "dst too short");
    }
    for dtype in [DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0] {
        let k = 64;
        let row = dtype.row_size(k).unwrap();
        let src: Vec<f32> = test_signal(2 * k, 77);
        let mut dst = vec![0u8; 4 * row];
        quantize_rows_ref(dtype, &src, k, k, [3, 1], &mut dst, row).unwrap();
        let mut want = vec![0u8; row];
        quantize_row(dtype, &src[..k], &mut want).unwrap();
        assert_eq!(&dst[3 * row..4 * row], &want[..], "{dtype}");
        quantize_row(dtype, &src[k..], &mut want).unwrap();
        assert_eq!(&dst[row..2 * row], &want[..], "{dtype}");
        assert!(dst[..row].iter().all(|&b| b == 0), "{dtype}: untouched rows stay");
        assert!(quantize_rows_ref(dtype, &src, k, k, [4], &mut dst, row).is_err());
        assert!(quantize_rows_ref(dtype, &src, k, k - 1, [0], &mut dst, row).is_err());
        assert!(quantize_rows_ref(DType::F32, &src, k, k, [0], &mut dst, row).is_err());
    }
}

/// Asserts that `dst` (`n` columns of `m` results) holds, for every weight
/// row and activation column, the f64 dot of the dequantized row with the
/// dequantized quantized activations (what the integer dots compute).
#[expect(
    clippy::too_many_arguments,
    reason = "a product's weights, activations and result, with their strides and shapes"
)]
pub(super) fn assert_matches_dequantized_dots(
    dtype: DType,
    k: usize,
    data: &[u8],
    stride: usize,
    src1: &[f32],
    dst: &[f32],
    m: usize,
    what: &str,
) {
    let partner = dot_partner(dtype).unwrap();
    for (j, column) in src1.chunks_exact(k).enumerate() {
        let mut act = vec![0u8; partner.row_size(k).unwrap()];
        quantize_row(partner, column, &mut act).unwrap();
        let mut act_deq = vec![0f32; k];
        dequantize_row(partner, &act, &mut act_deq).unwrap();
        for r in 0..m {
            let mut wd = vec![0f32; k];
            dequantize_row(dtype, &data[r * stride..r * stride + dtype.row_size(k).unwrap()], &mut wd).unwrap();
            let (want, magnitude) = dot_f64(&wd, &act_deq);
            let got = dst[j * m + r] as f64;
            // The AVX2 activation quantizer may round a tie the other way: one step of one value.
            let act_step = x_absmax(column) as f64 / 127.0;
            let tol = 2e-5 * magnitude + 2.0 * x_absmax(&wd) as f64 * act_step;
            assert!((got - want).abs() <= tol, "{what} [{j}][{r}]: {got} vs {want}");
        }
    }
}

/// A weight type's row unpacking (`WeightType::unpack_row`) on every path
/// against its block-by-block scalar form, bit for bit.
fn check_unpack_row<W: weight::WeightType>(k: usize) {
    let dtype = <W::Block as QuantBlock>::DTYPE;
    let (data, _, _) = weights(dtype, k, 1, 0, 60);
    let row: &[W::Block] = bytemuck::cast_slice(&data[..dtype.row_size(k).unwrap()]);
    let n_mins = k.checked_div(W::MIN_GROUP).unwrap_or(0);
    let unpack = |isa: Isa| {
        let (mut q, mut s, mut m) = (vec![0i8; k], vec![0f32; k / 16], vec![0f32; n_mins]);
        W::unpack_row(isa, row, &mut q, &mut s, &mut m);
        (q, s, m)
    };
    let want = unpack(Isa::Scalar);
    for isa in Isa::available() {
        assert_eq!(unpack(isa), want, "{dtype} k={k} {isa:?}");
    }
}

#[test]
fn row_unpacking_matches_the_scalar_form() {
    for k in [32, 608, 4096] {
        check_unpack_row::<weight::WQ4_0>(k);
        check_unpack_row::<weight::WQ4_1>(k);
        check_unpack_row::<weight::WQ5_0>(k);
        check_unpack_row::<weight::WQ5_1>(k);
        check_unpack_row::<weight::WQ8_0>(k);
        check_unpack_row::<weight::WIQ4NL>(k);
        check_unpack_row::<weight::WMXFP4>(k);
    }
    for k in [256, 768] {
        check_unpack_row::<weight::WIQ4XS>(k);
    }
}

#[test]
fn a_shared_product_equals_the_products_one_by_one() {
    let k = 256;
    let p = pool(2);
    for dtype in WEIGHT_TYPES {
        let mats: Vec<(Vec<u8>, usize)> = [40, 17, 33]
            .iter()
            .enumerate()
            .map(|(i, &m)| {
                let (d, s, _) = weights(dtype, k, m, 2, 31 + i as u32);
                (d, s)
            })
            .collect();
        let ms = [40, 17, 33];
        let ws: Vec<QuantMatrix<'_>> =
            mats.iter().zip(ms).map(|((d, s), m)| QuantMatrix { dtype, data: d, row_stride: *s, k, m }).collect();
        for n in [1, 2, 7] {
            let src1: Vec<f32> = (0..n).flat_map(|j| test_signal(k, 700 + j as u32)).collect();
            let columns = Columns { data: &src1, stride: k, n };
            let mut scratch = vec![0u8; quant_mul_mat_scratch_size(dtype, k, n, 2).unwrap()];
            let mut one_by_one: Vec<Vec<f32>> = ms.iter().map(|&m| vec![f32::NAN; n * m]).collect();
            for (w, dst) in ws.iter().zip(one_by_one.iter_mut()) {
                quant_mul_mat(w, columns, ColumnsMut { data: dst, stride: w.m }, &mut scratch, &p).unwrap();
            }
            let mut shared: Vec<Vec<f32>> = ms.iter().map(|&m| vec![f32::NAN; n * m]).collect();
            let mut dsts: Vec<ColumnsMut<'_>> =
                shared.iter_mut().zip(ms).map(|(d, m)| ColumnsMut { data: d, stride: m }).collect();
            quant_mul_mat_shared(&ws, columns, &mut dsts, &mut scratch, &p).unwrap();
            assert_eq!(shared, one_by_one, "{dtype} n={n}");
            // Every path this CPU has, against the same path's products one by one.
            for isa in Isa::available() {
                let mut by_isa: Vec<Vec<f32>> = ms.iter().map(|&m| vec![f32::NAN; n * m]).collect();
                for (w, dst) in ws.iter().zip(by_isa.iter_mut()) {
                    let out = ColumnsMut { data: dst, stride: w.m };
                    quant_mul_mat_on(isa, w, columns, out, &mut scratch, &p).unwrap();
                }
                let mut shared: Vec<Vec<f32>> = ms.iter().map(|&m| vec![f32::NAN; n * m]).collect();
                let mut dsts: Vec<ColumnsMut<'_>> =
                    shared.iter_mut().zip(ms).map(|(d, m)| ColumnsMut { data: d, stride: m }).collect();
                quant_mul_mat_shared_on(isa, &ws, columns, &mut dsts, &mut scratch, &p).unwrap();
                assert_eq!(shared, by_isa, "{dtype} n={n} on {isa:?}");
            }
        }
        // What it refuses: prompt-sized batches, mixed row lengths.
        let src1 = vec![0.5f32; k * 8];
        let mut out = vec![0f32; 40 * 8];
        let mut dsts = [ColumnsMut { data: &mut out, stride: 40 }];
        let mut scratch = vec![0u8; quant_mul_mat_scratch_size(dtype, k, 8, 2).unwrap()];
        assert!(
            quant_mul_mat_shared(&ws[..1], Columns { data: &src1, stride: k, n: 8 }, &mut dsts, &mut scratch, &p)
                .is_err()
        );
    }
}
