//! The CPU features the primitives choose between at run time.

/// Whether this CPU has AVX2 and FMA (cached by std after the first query)
/// and `GANTRY_CPU_ISA` does not cap the kernels at `scalar`.
#[inline]
pub fn has_avx2_fma() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("fma")
            && crate::isa::cap_allows_simd()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Whether this CPU has AVX2, FMA and F16C.
#[inline]
pub fn has_f16c() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        has_avx2_fma() && std::arch::is_x86_feature_detected!("f16c")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}
