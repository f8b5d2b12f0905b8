//! The primitives against f64 and against each other, over lengths that
//! reach every remainder of the SIMD loops.

use half::{bf16, f16};

use super::exp::{exp_fast, gelu};
use super::*;

fn data(n: usize, seed: u32) -> Vec<f32> {
    (0..n).map(|i| (((i as u32).wrapping_mul(2_654_435_761) ^ seed) % 2001) as f32 / 1000.0 - 1.0).collect()
}

#[test]
fn dots_match_f64_for_every_length() {
    for n in [0, 1, 7, 8, 31, 32, 33, 100, 1000] {
        let (a, b) = (data(n, 1), data(n, 2));
        let exact: f64 = a.iter().zip(&b).map(|(x, y)| *x as f64 * *y as f64).sum();
        assert!((dot_f32(&a, &b) as f64 - exact).abs() < 1e-4, "f32 n={n}");
        let ah: Vec<f16> = a.iter().map(|&v| f16::from_f32(v)).collect();
        let exact_h: f64 = ah.iter().zip(&b).map(|(x, y)| x.to_f64() * *y as f64).sum();
        assert!((dot_f16(&ah, &b) as f64 - exact_h).abs() < 1e-4, "f16 n={n}");
        let ab: Vec<bf16> = a.iter().map(|&v| bf16::from_f32(v)).collect();
        let exact_b: f64 = ab.iter().zip(&b).map(|(x, y)| x.to_f64() * *y as f64).sum();
        assert!((dot_bf16(&ab, &b) as f64 - exact_b).abs() < 1e-4, "bf16 n={n}");
    }
}

#[test]
fn four_column_dots_match_single_dots() {
    for n in [0, 3, 8, 37, 300] {
        let a = data(n, 9);
        let cols: Vec<Vec<f32>> = (0..4).map(|j| data(n, 20 + j)).collect();
        let c = [&cols[0][..], &cols[1][..], &cols[2][..], &cols[3][..]];
        let ah: Vec<f16> = a.iter().map(|&v| f16::from_f32(v)).collect();
        let ab: Vec<bf16> = a.iter().map(|&v| bf16::from_f32(v)).collect();
        for j in 0..4 {
            assert!((dot4_f32(&a, c)[j] - dot_f32(&a, c[j])).abs() < 1e-4, "n={n}");
            assert!((dot4_f16(&ah, c)[j] - dot_f16(&ah, c[j])).abs() < 1e-4, "n={n}");
            assert!((dot4_bf16(&ab, c)[j] - dot_bf16(&ab, c[j])).abs() < 1e-4, "n={n}");
        }
    }
}

/// The shared-row dots and axpys give each row's bits exactly, whatever
/// the length (main loop, 8-wide loop, scalar tail) and row count.
#[test]
fn each_row_of_a_shared_dot_or_axpy_has_its_own_bits() {
    fn check<const R: usize>(n: usize) {
        let a: Vec<f16> = data(n, 5).iter().map(|&v| f16::from_f32(v)).collect();
        let bs: Vec<Vec<f32>> = (0..R).map(|r| data(n, 40 + r as u32)).collect();
        let refs: [&[f32]; R] = std::array::from_fn(|r| &bs[r][..]);
        let each = dot_f16_each(&a, refs);
        for r in 0..R {
            assert_eq!(each[r].to_bits(), dot_f16(&a, refs[r]).to_bits(), "dot n={n} R={R} row {r}");
        }
        let alphas: [f32; R] = std::array::from_fn(|r| 0.3 - 0.7 * r as f32);
        let mut ys = bs.clone();
        let mut alone = bs.clone();
        let mut it = ys.iter_mut();
        let slices: [&mut [f32]; R] = std::array::from_fn(|_| it.next().map(|y| &mut y[..]).unwrap_or_default());
        axpy_f16_each(slices, alphas, &a);
        for (y, alpha) in alone.iter_mut().zip(alphas) {
            axpy_f16(y, alpha, &a);
        }
        assert_eq!(ys, alone, "axpy n={n} R={R}");
        assert!(ys.iter().zip(&bs).all(|(y, b)| n == 0 || y != b), "axpy n={n} R={R} changed nothing");
    }
    for n in [0, 5, 8, 37, 64, 100] {
        check::<1>(n);
        check::<2>(n);
        check::<3>(n);
        check::<4>(n);
    }
}

#[test]
fn exp_fast_is_accurate_and_handles_the_edges() {
    let mut worst = 0f64;
    let mut x = -87.3f32;
    while x < 88.3 {
        let rel = ((exp_fast(x) as f64 - (x as f64).exp()) / (x as f64).exp()).abs();
        worst = worst.max(rel);
        x += 0.0137;
    }
    assert!(worst < 4e-7, "worst relative error {worst}");
    assert_eq!(exp_fast(f32::NEG_INFINITY), 0.0);
    assert_eq!(exp_fast(-100.0), 0.0);
    assert_eq!(exp_fast(100.0), f32::INFINITY);
    assert!(exp_fast(88.3).is_finite() && exp_fast(-87.3) > 0.0);
    assert!(exp_fast(f32::NAN).is_nan());
    assert_eq!(exp_fast(0.0), 1.0);
    for x in [-20.0f32, -3.0, -0.5, -1e-3, 0.0, 1e-3, 0.7, 2.5, 9.0, 60.0] {
        let xd = x as f64;
        let exact = 0.5 * xd * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (xd + 0.044715 * xd * xd * xd)).tanh());
        assert!((gelu(x) as f64 - exact).abs() <= 1e-6 * exact.abs().max(1e-3), "gelu({x})");
    }
}

#[test]
fn reductions_and_updates() {
    let x = data(37, 3);
    let s: f64 = x.iter().map(|&v| v as f64).sum();
    assert!((sum_f64(&x) - s).abs() < 1e-9);
    let ss: f64 = x.iter().map(|&v| ((v - 0.5) as f64).powi(2)).sum();
    assert!((sum_sq_f64(&x, 0.5) - ss).abs() < 1e-9);
    assert_eq!(max(&x), x.iter().cloned().fold(f32::NEG_INFINITY, f32::max));
    assert_eq!(max(&[]), f32::NEG_INFINITY);
    let mut y = vec![1.0; 37];
    axpy(&mut y, 2.0, &x);
    assert!(y.iter().zip(&x).all(|(y, x)| (*y - (1.0 + 2.0 * x)).abs() < 1e-6));
    let xh: Vec<f16> = x.iter().map(|&v| f16::from_f32(v)).collect();
    let mut yh = vec![1.0; 37];
    axpy_f16(&mut yh, -0.5, &xh);
    assert!(yh.iter().zip(&xh).all(|(y, x)| (*y - (1.0 - 0.5 * x.to_f32())).abs() < 1e-6));
    let mut e = vec![0.0; 37];
    let total = exp_shifted(&mut e, &x, 1.0);
    let expect: f64 = x.iter().map(|&v| ((v - 1.0) as f64).exp()).sum();
    assert!((total - expect).abs() < 1e-5);
}
