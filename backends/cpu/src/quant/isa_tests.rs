//! Small-shape checks of every [`Isa`] path against the scalar one, for
//! running under an emulator (the AVX-512 paths on a CPU without AVX-512):
//! `cargo test -p gantry-backends --release --lib quant::isa_tests -- --nocapture`.
//!
//! Shapes are a few blocks to a few dozen rows, chosen to reach every
//! remainder: odd block counts (the AVX-512 kernels pair blocks), counts
//! past the unrolled steps, row counts past the groups of four, K not a
//! multiple of 256 where the type allows it. Besides quantized signals, the
//! dots and row kernels run on blocks of random bits, which reach every
//! quant value (the extremes where `vpmaddubsw` could saturate included)
//! and every nibble and high-bit position.
//!
//! `isa_report_prints_the_paths` prints the paths found (read it with
//! `--nocapture`); with `GANTRY_EXPECT_ISA=<name>` set (e.g. `Avx512Vnni`) it
//! fails unless that is the best path, so a run that silently fell back to
//! AVX2 shows.

use gantry_engine::DType;
use gantry_engine::quant::{
    BlockIQ4NL, BlockIQ4XS, BlockMXFP4, BlockQ2K, BlockQ3K, BlockQ4_0, BlockQ4_1, BlockQ4K, BlockQ5_0, BlockQ5_1,
    BlockQ5K, BlockQ6K, BlockQ8_0, BlockQ8_1, BlockQ8K, F16Bits, QuantBlock, QuantizeBlock,
};

use super::tests::{assert_matches_dequantized_dots, check_dot_rows, dequantized, pool, quantized, weights};
use super::*;

#[test]
fn isa_report_prints_the_paths() {
    let paths: Vec<Isa> = Isa::available().collect();
    println!("gantry cpu::quant: Isa::available() = {paths:?}, Isa::best() = {:?}", Isa::best());
    assert_eq!(paths.first(), Some(&Isa::Scalar));
    assert_eq!(paths.last(), Some(&Isa::best()));
    if let Ok(want) = std::env::var("GANTRY_EXPECT_ISA") {
        assert_eq!(format!("{:?}", Isa::best()), want, "GANTRY_EXPECT_ISA: the best path is not the expected one");
    }
}

/// The paths the CPU's own CPUID and XCR0 bits allow, read here without
/// `is_x86_feature_detected!`: AVX2 needs AVX, AVX2, FMA, F16C and the OS
/// saving YMM state; AVX-512 needs F, BW, VL, DQ and the OS saving the opmask
/// and ZMM state; VNNI its bit on top.
#[cfg(target_arch = "x86_64")]
fn paths_from_cpuid() -> Vec<Isa> {
    use std::arch::x86_64::{__cpuid, __cpuid_count, _xgetbv};
    let bit = |reg: u32, b: u32| reg >> b & 1 == 1;
    let max_leaf = __cpuid(0).eax;
    let l1 = __cpuid(1);
    let (ebx7, ecx7) = if max_leaf >= 7 {
        let l7 = __cpuid_count(7, 0);
        (l7.ebx, l7.ecx)
    } else {
        (0, 0)
    };
    let xcr0 = if bit(l1.ecx, 27) {
        // SAFETY: OSXSAVE (CPUID.1:ECX[27]) is set, so XGETBV is enabled.
        unsafe { _xgetbv(0) }
    } else {
        0
    };
    let os_ymm = xcr0 & 0b110 == 0b110;
    let os_zmm = os_ymm && xcr0 & 0b1110_0000 == 0b1110_0000;
    let avx2 = os_ymm && bit(l1.ecx, 28) && bit(l1.ecx, 12) && bit(l1.ecx, 29) && bit(ebx7, 5);
    let avx512 = avx2 && os_zmm && [16, 17, 30, 31].iter().all(|&b| bit(ebx7, b));
    let vnni = avx512 && bit(ecx7, 11);
    println!(
        "CPUID: avx2+fma+f16c {avx2}, avx512 f/dq/bw/vl {}/{}/{}/{}, vnni {}, XCR0 {xcr0:#x}",
        bit(ebx7, 16),
        bit(ebx7, 17),
        bit(ebx7, 30),
        bit(ebx7, 31),
        bit(ecx7, 11)
    );
    let mut paths = vec![Isa::Scalar];
    paths.extend(
        [(avx2, Isa::Avx2), (avx512, Isa::Avx512), (vnni, Isa::Avx512Vnni)]
            .into_iter()
            .filter_map(|(ok, isa)| ok.then_some(isa)),
    );
    paths
}

#[test]
#[cfg(target_arch = "x86_64")]
fn isa_detection_matches_cpuid() {
    assert_eq!(Isa::available().collect::<Vec<_>>(), paths_from_cpuid());
}

/// xorshift64: random bits for random blocks.
struct Rng(gantry_engine::SplitMix64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0.next_u64()
    }
    fn bytes<const N: usize>(&mut self) -> [u8; N] {
        self.0.bytes()
    }
    /// Activation quants: −127..=127, as every quantizer writes them.
    fn quants<const N: usize>(&mut self) -> [i8; N] {
        std::array::from_fn(|_| (self.next() as u8 as i8).max(-127))
    }
    /// A scale of either sign, 2^-12 to 2^-4 in magnitude.
    fn scale(&mut self) -> f32 {
        let r = self.next();
        let v = (1.0 + (r >> 40) as f32 / (1u64 << 24) as f32) * (2f32).powi(-12 + (r % 9) as i32);
        if r >> 39 & 1 == 1 { -v } else { v }
    }
    fn half(&mut self) -> F16Bits {
        F16Bits::from_f32(self.scale())
    }
}

/// Blocks made of random bits (with sane scales).
trait RandomBlock: QuantBlock {
    fn random(r: &mut Rng) -> Self;
}

impl RandomBlock for BlockQ4_0 {
    fn random(r: &mut Rng) -> Self {
        BlockQ4_0 { d: r.half(), qs: r.bytes() }
    }
}
impl RandomBlock for BlockQ4_1 {
    fn random(r: &mut Rng) -> Self {
        BlockQ4_1 { d: r.half(), m: r.half(), qs: r.bytes() }
    }
}
impl RandomBlock for BlockQ5_0 {
    fn random(r: &mut Rng) -> Self {
        BlockQ5_0 { d: r.half(), qh: r.bytes(), qs: r.bytes() }
    }
}
impl RandomBlock for BlockQ5_1 {
    fn random(r: &mut Rng) -> Self {
        BlockQ5_1 { d: r.half(), m: r.half(), qh: r.bytes(), qs: r.bytes() }
    }
}
impl RandomBlock for BlockQ8_0 {
    fn random(r: &mut Rng) -> Self {
        BlockQ8_0 { d: r.half(), qs: r.quants() }
    }
}
impl RandomBlock for BlockQ8_1 {
    fn random(r: &mut Rng) -> Self {
        let (d, qs) = (r.half(), r.quants::<32>());
        let sum: i32 = qs.iter().map(|&q| q as i32).sum();
        BlockQ8_1 { d, s: F16Bits::from_f32(d.to_f32() * sum as f32), qs }
    }
}
impl RandomBlock for BlockQ8K {
    fn random(r: &mut Rng) -> Self {
        let qs = r.quants::<256>();
        let bsums = std::array::from_fn(|g| qs[16 * g..16 * g + 16].iter().map(|&q| q as i16).sum());
        BlockQ8K { d: r.scale(), qs, bsums }
    }
}
impl RandomBlock for BlockQ2K {
    fn random(r: &mut Rng) -> Self {
        BlockQ2K { scales: r.bytes(), qs: r.bytes(), d: r.half(), dmin: r.half() }
    }
}
impl RandomBlock for BlockQ3K {
    fn random(r: &mut Rng) -> Self {
        BlockQ3K { hmask: r.bytes(), qs: r.bytes(), scales: r.bytes(), d: r.half() }
    }
}
impl RandomBlock for BlockQ4K {
    fn random(r: &mut Rng) -> Self {
        BlockQ4K { d: r.half(), dmin: r.half(), scales: r.bytes(), qs: r.bytes() }
    }
}
impl RandomBlock for BlockQ5K {
    fn random(r: &mut Rng) -> Self {
        BlockQ5K { d: r.half(), dmin: r.half(), scales: r.bytes(), qh: r.bytes(), qs: r.bytes() }
    }
}
impl RandomBlock for BlockQ6K {
    fn random(r: &mut Rng) -> Self {
        // Every i8 scale, −128 included (ggml's quantizer can write it).
        BlockQ6K { ql: r.bytes(), qh: r.bytes(), scales: r.bytes::<16>().map(|b| b as i8), d: r.half() }
    }
}

impl RandomBlock for BlockIQ4NL {
    fn random(r: &mut Rng) -> Self {
        BlockIQ4NL { d: r.half(), qs: r.bytes() }
    }
}
impl RandomBlock for BlockIQ4XS {
    fn random(r: &mut Rng) -> Self {
        BlockIQ4XS { d: r.half(), scales_h: r.bytes(), scales_l: r.bytes(), qs: r.bytes() }
    }
}
impl RandomBlock for BlockMXFP4 {
    fn random(r: &mut Rng) -> Self {
        // Exponents 2^-10 to 2^5 (random bits would reach infinity).
        BlockMXFP4 { e: 118 + (r.next() % 16) as u8, qs: r.bytes() }
    }
}

fn random_blocks<B: RandomBlock>(n: usize, seed: u64) -> Vec<B> {
    let mut r = Rng(gantry_engine::SplitMix64::new(seed));
    (0..n).map(|_| B::random(&mut r)).collect()
}

/// The part of a dot's magnitude the dequantized values do not show (see [`magnitude`]).
type Extra<X, Y> = fn(&[X], &[Y]) -> f64;

/// Σ|x·y| over the dequantized values, plus `extra` (the `m·s` terms of the
/// `_1` types, which the activations' `s` carries rather than their quants).
fn magnitude<X: QuantBlock, Y: QuantBlock>(x: &[X], y: &[Y], extra: Extra<X, Y>) -> f64 {
    let (xd, yd) = (dequantized(x), dequantized(y));
    xd.iter().zip(&yd).map(|(&a, &b)| (a as f64 * b as f64).abs()).sum::<f64>() + extra(x, y)
}

fn no_extra<X, Y>(_: &[X], _: &[Y]) -> f64 {
    0.0
}

fn min_terms<X: MinBlock>(x: &[X], y: &[BlockQ8_1]) -> f64 {
    x.iter().zip(y).map(|(a, b)| (a.min().to_f32() * b.s.to_f32()).abs() as f64).sum()
}

/// The `_1` blocks' min.
trait MinBlock {
    fn min(&self) -> F16Bits;
}
impl MinBlock for BlockQ4_1 {
    fn min(&self) -> F16Bits {
        self.m
    }
}
impl MinBlock for BlockQ5_1 {
    fn min(&self) -> F16Bits {
        self.m
    }
}

/// `dot_on` on every path against the scalar path, for `counts` blocks of
/// random bits and of quantized signals.
fn check_dot<X: RandomBlock + QuantizeBlock, Y: RandomBlock + QuantizeBlock>(
    dot_on: fn(Isa, usize, &[X], &[Y]) -> f32,
    extra: Extra<X, Y>,
    counts: &[usize],
) {
    let elems = X::ELEMS.max(Y::ELEMS);
    for &nb in counts {
        let n = nb * elems;
        let inputs: [(Vec<X>, Vec<Y>); 2] = [
            (random_blocks(n / X::ELEMS, nb as u64), random_blocks(n / Y::ELEMS, 1000 + nb as u64)),
            (quantized(&test_signal(n, nb as u32)), quantized(&test_signal(n, 500 + nb as u32))),
        ];
        for (kind, (x, y)) in ["random bits", "signal"].iter().zip(&inputs) {
            let scalar = dot_on(Isa::Scalar, n, x, y);
            let tol = 1e-5 * magnitude(x, y, extra) + 1e-6;
            for isa in Isa::available() {
                let got = dot_on(isa, n, x, y);
                assert!(
                    (got - scalar).abs() as f64 <= tol,
                    "{}·{} {kind}, {nb} blocks, {isa:?}: {got} vs scalar {scalar} (tolerance {tol})",
                    X::DTYPE,
                    Y::DTYPE
                );
            }
        }
    }
}

/// Block counts of the 32-value types: one, odd, even, past the unrolled
/// steps of 8 with every remainder kind.
const SMALL_COUNTS: &[usize] = &[1, 2, 3, 7, 8, 9, 11, 14, 17];
/// Super-block counts of the K-quants.
const K_COUNTS: &[usize] = &[1, 2, 3];

#[test]
fn isa_dots_match_the_scalar_path() {
    check_dot::<BlockQ4_0, BlockQ8_0>(vec_dot_q4_0_q8_0_on, no_extra, SMALL_COUNTS);
    check_dot::<BlockQ4_1, BlockQ8_1>(vec_dot_q4_1_q8_1_on, min_terms, SMALL_COUNTS);
    check_dot::<BlockQ5_0, BlockQ8_0>(vec_dot_q5_0_q8_0_on, no_extra, SMALL_COUNTS);
    check_dot::<BlockQ5_1, BlockQ8_1>(vec_dot_q5_1_q8_1_on, min_terms, SMALL_COUNTS);
    check_dot::<BlockQ8_0, BlockQ8_0>(vec_dot_q8_0_q8_0_on, no_extra, SMALL_COUNTS);
    check_dot::<BlockQ2K, BlockQ8K>(vec_dot_q2_k_q8_k_on, no_extra, K_COUNTS);
    check_dot::<BlockQ3K, BlockQ8K>(vec_dot_q3_k_q8_k_on, no_extra, K_COUNTS);
    check_dot::<BlockQ4K, BlockQ8K>(vec_dot_q4_k_q8_k_on, no_extra, K_COUNTS);
    check_dot::<BlockQ5K, BlockQ8K>(vec_dot_q5_k_q8_k_on, no_extra, K_COUNTS);
    check_dot::<BlockQ6K, BlockQ8K>(vec_dot_q6_k_q8_k_on, no_extra, K_COUNTS);
    check_random_dot::<BlockIQ4NL, BlockQ8_0>(vec_dot_iq4_nl_q8_0_on, SMALL_COUNTS);
    check_random_dot::<BlockMXFP4, BlockQ8_0>(vec_dot_mxfp4_q8_0_on, SMALL_COUNTS);
    check_random_dot::<BlockIQ4XS, BlockQ8K>(vec_dot_iq4_xs_q8_k_on, K_COUNTS);
}

/// `dot_on` on every path against the scalar path, for `counts` blocks of
/// random bits (the read-only lookup types: no quantized signals).
fn check_random_dot<X: RandomBlock, Y: RandomBlock>(dot_on: fn(Isa, usize, &[X], &[Y]) -> f32, counts: &[usize]) {
    for &nb in counts {
        let n = nb * X::ELEMS.max(Y::ELEMS);
        let x: Vec<X> = random_blocks(n / X::ELEMS, nb as u64);
        let y: Vec<Y> = random_blocks(n / Y::ELEMS, 1000 + nb as u64);
        let scalar = dot_on(Isa::Scalar, n, &x, &y);
        let tol = 1e-5 * magnitude(&x, &y, no_extra) + 1e-6;
        for isa in Isa::available() {
            let got = dot_on(isa, n, &x, &y);
            assert!(
                (got - scalar).abs() as f64 <= tol,
                "{}·{} random bits, {nb} blocks, {isa:?}: {got} vs scalar {scalar} (tolerance {tol})",
                X::DTYPE,
                Y::DTYPE
            );
        }
    }
}

/// The several-row kernel of `W` on every path against the scalar dot of
/// each row, rows of `nb` random-bit blocks (`extra` as in [`magnitude`]).
fn check_random_rows<W: weight::WeightType>(nb: usize, extra: Extra<W::Block, W::Act>)
where
    W::Block: RandomBlock,
    W::Act: RandomBlock,
{
    use weight::ROWS;
    let rows: Vec<Vec<W::Block>> = (0..ROWS).map(|r| random_blocks(nb, 70 + r as u64)).collect();
    let act: Vec<W::Act> = random_blocks(nb, 99);
    let x: [&[W::Block]; ROWS] = std::array::from_fn(|r| &rows[r][..]);
    for isa in Isa::available() {
        let got = W::dot_rows(isa, x, &act);
        for r in 0..ROWS {
            let scalar = W::dot(Isa::Scalar, &rows[r], &act);
            let tol = 1e-5 * magnitude(&rows[r], &act, extra) + 1e-6;
            assert!(
                (got[r] - scalar).abs() as f64 <= tol,
                "{} rows of {nb} random blocks, {isa:?}, row {r}: {} vs scalar {scalar}",
                <W::Block as QuantBlock>::DTYPE,
                got[r]
            );
        }
    }
}

#[test]
fn isa_row_kernels_match_the_scalar_dots() {
    // 1, 3, 7, 9 blocks: odd counts (a block paired with a zero block), past
    // the steps of 4, a single pair; quantized signals and random bits.
    for nb in [1, 2, 3, 7, 9] {
        check_dot_rows::<weight::WQ4_0>(32 * nb);
        check_dot_rows::<weight::WQ4_1>(32 * nb);
        check_dot_rows::<weight::WQ5_0>(32 * nb);
        check_dot_rows::<weight::WQ5_1>(32 * nb);
        check_random_rows::<weight::WQ4_0>(nb, no_extra);
        check_random_rows::<weight::WQ4_1>(nb, min_terms);
        check_random_rows::<weight::WQ5_0>(nb, no_extra);
        check_random_rows::<weight::WQ5_1>(nb, min_terms);
    }
    // Q8_0 takes the several-row kernel from 4096-byte rows on: 121 blocks
    // and more (123: odd, with a remainder after the steps of 4).
    for nb in [7, 121, 123] {
        check_dot_rows::<weight::WQ8_0>(32 * nb);
        check_random_rows::<weight::WQ8_0>(nb, no_extra);
    }
    // The K-quants go row by row through their dots.
    check_dot_rows::<weight::WQ4K>(256);
    check_random_rows::<weight::WQ6K>(2, no_extra);
    for nb in [1, 3, 9] {
        check_random_rows::<weight::WIQ4NL>(nb, no_extra);
        check_random_rows::<weight::WMXFP4>(nb, no_extra);
    }
    check_random_rows::<weight::WIQ4XS>(3, no_extra);
}

#[test]
fn isa_mul_mat_matches_the_dequantized_dots() {
    // 13 rows: three groups of four and one left; N = 1 and 2 (dot path),
    // N = 9 (tiled path: the AVX2 micro-kernels on every SIMD path); K of 7
    // blocks, and of 3 super-blocks (not a multiple of 512).
    let p = pool(2);
    let m = 13;
    for dtype in DType::QUANTIZED_WEIGHTS.into_iter().chain(DType::LOOKUP_WEIGHTS) {
        let k = if dtype.block_size() == 256 { 768 } else { 224 };
        let (data, stride, _) = weights(dtype, k, m, 3, 11);
        let w = QuantMatrix { dtype, data: &data, row_stride: stride, k, m };
        for n in [1, 2, 9] {
            let src1: Vec<f32> = (0..n).flat_map(|j| test_signal(k, 300 + j as u32)).collect();
            for isa in Isa::available() {
                let mut dst = vec![f32::NAN; n * m];
                let mut scratch = vec![0u8; quant_mul_mat_scratch_size(dtype, k, n, 2).unwrap()];
                quant_mul_mat_on(
                    isa,
                    &w,
                    Columns { data: &src1, stride: k, n },
                    ColumnsMut { data: &mut dst, stride: m },
                    &mut scratch,
                    &p,
                )
                .unwrap();
                let what = format!("{dtype} {isa:?} m={m} n={n} k={k}");
                assert_matches_dequantized_dots(dtype, k, &data, stride, &src1, &dst, m, &what);
            }
        }
    }
}

#[test]
fn isa_float_mat_vecs_match_f64() {
    // Row lengths: under one vector, one vector and a tail, past a step of
    // 32 with a tail; rows past the groups of four; one and two threads.
    for (k, m, stride, threads) in [(5, 3, 7, 1), (37, 7, 40, 1), (100, 6, 100, 2), (64, 5, 67, 1), (16, 4, 16, 2)] {
        crate::float_matvec::tests::check(k, m, stride, threads);
    }
}
