//! Row functions made of comparisons, clamps and roundings (no
//! transcendental): HARDSWISH, HARDSIGMOID, STEP, SGN, the four roundings
//! and LEAKY_RELU. Each is a plain loop that the AVX2 compilation turns into
//! blends, min/max and `vroundps`; the baseline one still gets SSE2 for all
//! but the roundings.

use super::multiversion::multiversion;

/// `min(1, max(0, (x + 3) / 6))`, ggml's hard sigmoid. NaN gives 0, as
/// C's `fminf(1, fmaxf(0, NaN))` does (each ignores a NaN operand).
#[inline(always)]
#[expect(clippy::manual_clamp, reason = "clamp keeps a NaN; ggml's fmaxf/fminf (and max/min here) give 0")]
fn hard_gate(x: f32) -> f32 {
    ((x + 3.0) / 6.0).max(0.0).min(1.0)
}

multiversion! {
    /// `x[i] = x[i] * min(1, max(0, (x[i] + 3) / 6))`, in place.
    pub fn hardswish_in_place(x: &mut [f32]) {
        for v in x.iter_mut() {
            *v *= hard_gate(*v);
        }
    }
}

multiversion! {
    /// `x[i] = min(1, max(0, (x[i] + 3) / 6))`, in place.
    pub fn hardsigmoid_in_place(x: &mut [f32]) {
        for v in x.iter_mut() {
            *v = hard_gate(*v);
        }
    }
}

multiversion! {
    /// `x[i] = 1` where `x[i] > 0`, else 0 (NaN too), in place.
    pub fn step_in_place(x: &mut [f32]) {
        for v in x.iter_mut() {
            *v = if *v > 0.0 { 1.0 } else { 0.0 };
        }
    }
}

multiversion! {
    /// `x[i]`'s sign, -1, 0 or 1 (NaN and -0 give 0), in place.
    pub fn sgn_in_place(x: &mut [f32]) {
        for v in x.iter_mut() {
            *v = if *v > 0.0 {
                1.0
            } else if *v < 0.0 {
                -1.0
            } else {
                0.0
            };
        }
    }
}

multiversion! {
    /// `x[i] = floor(x[i])`, in place.
    pub fn floor_in_place(x: &mut [f32]) {
        for v in x.iter_mut() {
            *v = v.floor();
        }
    }
}

multiversion! {
    /// `x[i] = ceil(x[i])`, in place.
    pub fn ceil_in_place(x: &mut [f32]) {
        for v in x.iter_mut() {
            *v = v.ceil();
        }
    }
}

multiversion! {
    /// `x[i] = trunc(x[i])` (towards zero), in place.
    pub fn trunc_in_place(x: &mut [f32]) {
        for v in x.iter_mut() {
            *v = v.trunc();
        }
    }
}

multiversion! {
    /// `x[i]` rounded to the nearest integer with halves away from zero
    /// (C's `roundf`, which ggml's ROUND calls), in place: the truncation,
    /// moved one away from zero when the dropped fraction is at least a
    /// half. `x - trunc(x)` is exact in f32, so no `x + 0.5` rounding
    /// (0.49999997 + 0.5 is 1.0) can push a value over.
    pub fn round_in_place(x: &mut [f32]) {
        for v in x.iter_mut() {
            let t = v.trunc();
            let away = if (*v - t).abs() >= 0.5 { 1.0f32.copysign(*v) } else { 0.0 };
            *v = t + away;
        }
    }
}

multiversion! {
    /// `x[i] = max(x[i], 0) + slope * min(x[i], 0)` (ggml's leaky ReLU), in place.
    pub fn leaky_relu_in_place(x: &mut [f32], slope: f32) {
        for v in x.iter_mut() {
            let pos = if *v > 0.0 { *v } else { 0.0 };
            let neg = if *v < 0.0 { *v } else { 0.0 };
            *v = pos + slope * neg;
        }
    }
}
