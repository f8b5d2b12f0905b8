//! The instruction-set paths of the CPU's hand-written SIMD kernels:
//! [`Isa`], what this CPU can run (chosen at run time), and the target
//! features each path's functions are compiled with, one macro per feature
//! set, so that each set is spelled once.
//!
//! A kernel function of a path is written inside its macro:
//!
//! ```text
//! avx2_fn! {
//!     /// Docs and other attributes stay on the function.
//!     #[inline]
//!     pub(crate) fn hsum_ps(v: __m256) -> f32 { ... }
//! }
//! ```
//!
//! which adds `#[target_feature(enable = "avx2,fma,f16c")]` to it. The
//! macros take one function each (safe or `unsafe`, with any visibility,
//! generics and attributes), in free, inherent and trait-impl position.
//!
//! | macro | features | for |
//! |---|---|---|
//! | `avx2_fn!` | `avx2,fma,f16c` | [`Isa::Avx2`] (and the AVX2 code the AVX-512 paths share) |
//! | `avx512_fn!` | the above + `avx512f,avx512bw,avx512vl,avx512dq` | [`Isa::Avx512`] |
//! | `avx512_vnni_fn!` | the above + `avx512vnni` | [`Isa::Avx512Vnni`] |
//! | `avx2_only_fn!` | `avx2` | integer helpers of the AVX2 dots that need nothing else |
//! | `avx2_fma_fn!` | `avx2,fma` | the AVX2 copy of `simd::multiversion!` bodies (checked by `simd::has_avx2_fma`) |
//!
//! A function with fewer features inlines into one with more, never the
//! other way round: the AVX-512 bodies inline only into AVX-512 entry points,
//! and a body that is to use `vpdpbusd` inlines only into `avx512_vnni_fn!`
//! ones (see `quant::dot_avx512`).
//!
//! `GANTRY_CPU_ISA` ([`ISA_CAP_ENV`]) caps the path taken at run time.

use std::sync::OnceLock;

/// An instruction-set path of the CPU's hand-written SIMD kernels (the
/// quantized kernels of [`crate::quant`], the float mat-vec of
/// [`crate::float_matvec`], the F32 GEMM of `crate::sgemm`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Isa {
    /// Portable Rust, no SIMD intrinsics.
    Scalar,
    /// x86-64 AVX2 with FMA and F16C. Constructed only by [`Isa::available`]
    /// and [`Isa::best`], which check the CPU first (so for every variant below).
    #[cfg(target_arch = "x86_64")]
    Avx2,
    /// x86-64 AVX-512 F, BW, VL and DQ, with AVX2, FMA and F16C: byte
    /// products by `vpmaddubsw` + `vpmaddwd`.
    #[cfg(target_arch = "x86_64")]
    Avx512,
    /// [`Isa::Avx512`] plus AVX512_VNNI: byte products by `vpdpbusd`.
    #[cfg(target_arch = "x86_64")]
    Avx512Vnni,
}

impl Isa {
    /// Every path this CPU can run, slowest first (the scalar path is always there).
    pub fn available() -> impl Iterator<Item = Isa> {
        std::iter::once(Isa::Scalar).chain(Self::simd())
    }

    /// The fastest path this CPU can run, at most the one `GANTRY_CPU_ISA`
    /// names (see [`isa_cap`]).
    pub fn best() -> Isa {
        let cap = isa_cap().ok().flatten().map_or(u8::MAX, IsaCap::level);
        Self::available().filter(|isa| isa.level() <= cap).last().unwrap_or(Isa::Scalar)
    }

    /// The path's place in the order `Scalar < Avx2 < Avx512 < Avx512Vnni`.
    const fn level(self) -> u8 {
        match self {
            Isa::Scalar => 0,
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => 1,
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => 2,
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512Vnni => 3,
        }
    }

    /// The SIMD paths this CPU can run, slowest first. Each needs the
    /// features of the one before it (the AVX-512 kernels call AVX2 helpers).
    #[cfg(target_arch = "x86_64")]
    fn simd() -> impl Iterator<Item = Isa> {
        let avx2 =
            is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") && is_x86_feature_detected!("f16c");
        let avx512 = avx2
            && is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx512bw")
            && is_x86_feature_detected!("avx512vl")
            && is_x86_feature_detected!("avx512dq");
        let vnni = avx512 && is_x86_feature_detected!("avx512vnni");
        [(avx2, Isa::Avx2), (avx512, Isa::Avx512), (vnni, Isa::Avx512Vnni)]
            .into_iter()
            .filter_map(|(ok, isa)| ok.then_some(isa))
    }

    #[cfg(not(target_arch = "x86_64"))]
    fn simd() -> impl Iterator<Item = Isa> {
        std::iter::empty()
    }

    /// The path's name as users know it (`gantry devices` prints it).
    pub const fn name(self) -> &'static str {
        match self {
            Isa::Scalar => "portable (no SIMD)",
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => "AVX2",
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => "AVX-512",
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512Vnni => "AVX-512 VNNI",
        }
    }
}

/// The environment variable that caps the kernels' instruction-set path:
/// `scalar` (or `portable`), `avx2`, `avx512` or `avx512vnni` (case and `-`
/// or `_` ignored). Kernels then take the fastest path this CPU runs that is
/// no faster than the one named: to compare the paths on one machine, or to
/// keep AVX-512 off where it lowers the clock. Unset or empty: no cap.
pub const ISA_CAP_ENV: &str = "GANTRY_CPU_ISA";

/// The slowest-to-fastest names [`ISA_CAP_ENV`] takes, as users write them.
const CAP_NAMES: [&str; 4] = ["scalar", "avx2", "avx512", "avx512vnni"];

/// A cap on the kernel path, as [`ISA_CAP_ENV`] names it (`None` for no
/// cap), or a message naming the variable, the value and the ones it takes.
pub fn parse_isa_cap(value: &str) -> Result<Option<IsaCap>, String> {
    let key: String = value.trim().chars().filter(|c| !matches!(c, '-' | '_')).collect::<String>().to_lowercase();
    if key.is_empty() {
        return Ok(None);
    }
    let key = if key == "portable" { "scalar" } else { key.as_str() };
    CAP_NAMES.iter().position(|&name| name == key).map(|level| Some(IsaCap(level as u8))).ok_or_else(|| {
        format!("{ISA_CAP_ENV}={value:?} names no kernel path: expected one of {}", CAP_NAMES.join(", "))
    })
}

/// The fastest kernel path allowed: paths above it are not taken even where
/// the CPU has them (a level, not an [`Isa`], which exists only for paths
/// the CPU runs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IsaCap(u8);

impl IsaCap {
    /// The name [`ISA_CAP_ENV`] gives this cap.
    pub fn name(self) -> &'static str {
        CAP_NAMES[usize::from(self.0)]
    }

    fn level(self) -> u8 {
        self.0
    }
}

/// The cap [`ISA_CAP_ENV`] sets, read once per process: `Ok(None)` when it
/// is unset or empty, an error naming the variable for a value that names
/// no path (kernels then take the fastest path; [`crate::CpuBackend`]'s
/// fallible constructors and `gantry devices` report the error).
pub fn isa_cap() -> Result<Option<IsaCap>, &'static str> {
    static CAP: OnceLock<Result<Option<IsaCap>, String>> = OnceLock::new();
    let cap = CAP.get_or_init(|| match std::env::var(ISA_CAP_ENV) {
        Ok(value) => parse_isa_cap(&value),
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(value)) => Err(format!("{ISA_CAP_ENV}={value:?} is not UTF-8")),
    });
    cap.as_ref().map(|c| *c).map_err(String::as_str)
}

/// Whether the cap lets compiler-vectorized row functions use AVX2 (any
/// cap but `scalar`).
pub(crate) fn cap_allows_simd() -> bool {
    isa_cap().ok().flatten().is_none_or(|cap| cap.level() > 0)
}

/// The SIMD features of this CPU that a kernel path could use, as
/// `is_x86_feature_detected!` names them (empty off x86-64).
pub fn cpu_features() -> Vec<&'static str> {
    #[cfg(target_arch = "x86_64")]
    {
        macro_rules! detected {
            ($($f:tt),*) => { [$((is_x86_feature_detected!($f), $f)),*] };
        }
        let all = detected!(
            "sse4.2",
            "avx",
            "avx2",
            "fma",
            "f16c",
            "bmi2",
            "avx512f",
            "avx512bw",
            "avx512vl",
            "avx512dq",
            "avx512vnni",
            "avx512bf16",
            "avx512fp16",
            "avxvnni"
        );
        all.into_iter().filter_map(|(on, name)| on.then_some(name)).collect()
    }
    #[cfg(not(target_arch = "x86_64"))]
    Vec::new()
}

/// Adds `#[target_feature(enable = $features)]` to one function, after its
/// own attributes (docs, `#[inline]`, ...) and before its visibility. The
/// per-ISA macros below are this with their feature set.
macro_rules! target_feature_fn {
    ($features:literal; $(#[$meta:meta])* $vis:vis fn $($rest:tt)*) => {
        $(#[$meta])*
        #[target_feature(enable = $features)]
        $vis fn $($rest)*
    };
    ($features:literal; $(#[$meta:meta])* $vis:vis unsafe fn $($rest:tt)*) => {
        $(#[$meta])*
        #[target_feature(enable = $features)]
        $vis unsafe fn $($rest)*
    };
}

/// One function of the [`Isa::Avx2`] path: AVX2, FMA and F16C.
macro_rules! avx2_fn {
    ($($item:tt)*) => { $crate::isa::target_feature_fn! { "avx2,fma,f16c"; $($item)* } };
}

/// One function of the [`Isa::Avx512`] path: AVX-512 F, BW, VL and DQ, with
/// AVX2, FMA and F16C (the AVX-512 kernels call AVX2 helpers).
macro_rules! avx512_fn {
    ($($item:tt)*) => {
        $crate::isa::target_feature_fn! { "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq"; $($item)* }
    };
}

/// One function of the [`Isa::Avx512Vnni`] path: [`avx512_fn!`]'s features
/// and AVX512_VNNI.
macro_rules! avx512_vnni_fn {
    ($($item:tt)*) => {
        $crate::isa::target_feature_fn! {
            "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni"; $($item)*
        }
    };
}

/// One function that needs AVX2 alone: integer helpers of the AVX2 dots,
/// callable (and inlined) from every x86-64 SIMD path.
macro_rules! avx2_only_fn {
    ($($item:tt)*) => { $crate::isa::target_feature_fn! { "avx2"; $($item)* } };
}

/// One function with AVX2 and FMA: the fast copy of a
/// `simd::multiversion!` body, called after `simd::has_avx2_fma`.
macro_rules! avx2_fma_fn {
    ($($item:tt)*) => { $crate::isa::target_feature_fn! { "avx2,fma"; $($item)* } };
}

pub(crate) use {avx2_fma_fn, avx2_fn, avx2_only_fn, avx512_fn, avx512_vnni_fn, target_feature_fn};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_parse_as_users_write_them() {
        let level = |v: &str| parse_isa_cap(v).map(|c| c.map(IsaCap::name));
        assert_eq!(level(""), Ok(None));
        assert_eq!(level("  "), Ok(None));
        assert_eq!(level("scalar"), Ok(Some("scalar")));
        assert_eq!(level("Portable"), Ok(Some("scalar")));
        assert_eq!(level("AVX2"), Ok(Some("avx2")));
        assert_eq!(level("avx-512"), Ok(Some("avx512")));
        assert_eq!(level("AVX512_VNNI"), Ok(Some("avx512vnni")));
        let err = parse_isa_cap("sse4").unwrap_err();
        assert!(err.contains("GANTRY_CPU_ISA=\"sse4\"") && err.contains("scalar, avx2, avx512, avx512vnni"), "{err}");
    }

    #[test]
    fn levels_follow_the_paths_order() {
        let levels: Vec<u8> = Isa::available().map(Isa::level).collect();
        assert!(levels.windows(2).all(|w| w[0] < w[1]), "{levels:?}");
        assert_eq!(Isa::Scalar.level(), 0);
    }
}
