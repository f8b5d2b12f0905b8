//! One body, two compilations: the portable one and one with AVX2 + FMA,
//! picked per call by what the CPU has.

/// Defines a function twice: a portable body, and the same body compiled
/// with AVX2 + FMA enabled; calls pick the second when the CPU has them.
/// Inside the body, the const `FMA` says which one is being compiled, so
/// [`madd`] can fuse only where that is one instruction (without FMA,
/// `f32::mul_add` is a slow library call).
macro_rules! multiversion {
    ($(#[$meta:meta])* $vis:vis fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)? $body:block) => {
        $(#[$meta])*
        $vis fn $name($($arg: $ty),*) $(-> $ret)? {
            #[inline(always)]
            fn imp<const FMA: bool>($($arg: $ty),*) $(-> $ret)? $body
            #[cfg(target_arch = "x86_64")]
            {
                $crate::isa::avx2_fma_fn! {
                    fn avx2($($arg: $ty),*) $(-> $ret)? { imp::<true>($($arg),*) }
                }
                if $crate::simd::has_avx2_fma() {
                    // SAFETY: the CPU supports AVX2 and FMA (checked just above).
                    return unsafe { avx2($($arg),*) };
                }
            }
            imp::<false>($($arg),*)
        }
    };
}
pub(crate) use multiversion;

/// `a * b + c`, fused into one instruction when `FMA` (see [`multiversion!`]).
#[inline(always)]
pub fn madd<const FMA: bool>(a: f32, b: f32, c: f32) -> f32 {
    if FMA { a.mul_add(b, c) } else { a * b + c }
}
