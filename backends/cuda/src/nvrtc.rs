//! Compiling a module's source with NVRTC: to a CUBIN for the device's exact
//! architecture when this NVRTC knows it (nothing left for the driver to do,
//! and no dependence on the driver's PTX version), else to PTX for the
//! newest virtual architecture not above the device's, which the driver
//! compiles when the module is loaded.

use std::ffi::{CString, c_char, c_int};

use cudarc::nvrtc::{result, sys};

use super::libraries::{self, CudaLibrary};

/// A compute capability (`8.6` is `Arch { major: 8, minor: 6 }`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Arch {
    /// Major version.
    pub major: u32,
    /// Minor version.
    pub minor: u32,
}

impl Arch {
    /// The architecture `major.minor`.
    pub const fn new(major: u32, minor: u32) -> Self {
        Self { major, minor }
    }

    /// NVRTC's number for it (86 for 8.6).
    pub const fn code(self) -> u32 {
        self.major * 10 + self.minor
    }
}

impl std::fmt::Display for Arch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "sm_{}", self.code())
    }
}

/// What a compile produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageKind {
    /// Machine code for one architecture.
    Cubin,
    /// PTX, compiled by the driver at load time.
    Ptx,
}

/// A compiled module, ready for `cuModuleLoadData` (PTX ends with a NUL).
#[derive(Debug, Clone)]
pub struct Image {
    /// Machine code or PTX.
    pub kind: ImageKind,
    /// The architecture compiled for (for PTX, a virtual one).
    pub target: Arch,
    /// The bytes.
    pub bytes: Vec<u8>,
    /// NVRTC's log (warnings), usually empty.
    pub log: String,
}

/// The options every module is compiled with, besides the architecture.
pub const OPTIONS: [&str; 2] = ["--std=c++17", "--fmad=true"];

/// NVRTC's version as `(major, minor)`.
pub fn version() -> Result<(i32, i32), String> {
    libraries::ensure(CudaLibrary::Nvrtc).map_err(|e| e.to_string())?;
    let (mut major, mut minor): (c_int, c_int) = (0, 0);
    // SAFETY: NVRTC is loaded (checked above); the pointers are to locals.
    unsafe { sys::nvrtcVersion(&mut major, &mut minor) }.result().map_err(|e| format!("nvrtcVersion: {e:?}"))?;
    Ok((major, minor))
}

/// The real architectures this NVRTC compiles for (`nvrtcGetSupportedArchs`).
pub fn supported_archs() -> Result<Vec<u32>, String> {
    libraries::ensure(CudaLibrary::Nvrtc).map_err(|e| e.to_string())?;
    let mut n: c_int = 0;
    // SAFETY: NVRTC is loaded; `n` is a local.
    unsafe { sys::nvrtcGetNumSupportedArchs(&mut n) }
        .result()
        .map_err(|e| format!("nvrtcGetNumSupportedArchs: {e:?}"))?;
    let mut archs = vec![0 as c_int; usize::try_from(n).unwrap_or(0)];
    // SAFETY: `archs` holds the `n` ints NVRTC writes.
    unsafe { sys::nvrtcGetSupportedArchs(archs.as_mut_ptr()) }
        .result()
        .map_err(|e| format!("nvrtcGetSupportedArchs: {e:?}"))?;
    Ok(archs.into_iter().filter_map(|a| u32::try_from(a).ok()).collect())
}

/// How `arch` is compiled by this NVRTC: its own CUBIN, or PTX of the newest
/// virtual architecture below it; `None` when NVRTC knows nothing as old.
pub fn target_for(arch: Arch, supported: &[u32]) -> Option<(ImageKind, Arch)> {
    if supported.contains(&arch.code()) {
        return Some((ImageKind::Cubin, arch));
    }
    let best = supported.iter().copied().filter(|&c| c <= arch.code()).max()?;
    Some((ImageKind::Ptx, Arch::new(best / 10, best % 10)))
}

/// A program, destroyed when dropped.
struct Program(sys::nvrtcProgram);

impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: the program was created by nvrtcCreateProgram and is destroyed once.
        let _ = unsafe { result::destroy_program(self.0) };
    }
}

fn c_chars_to_string(chars: &[c_char]) -> String {
    let bytes: Vec<u8> = chars.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Compiles `source` (named `name` in messages) for `arch`. The error is
/// NVRTC's log, naming the module and the architecture.
pub fn compile(name: &str, source: &str, arch: Arch) -> Result<Image, String> {
    let supported = supported_archs()?;
    let (kind, target) = target_for(arch, &supported)
        .ok_or_else(|| format!("NVRTC {:?} cannot compile for {arch} (it knows {supported:?})", version()))?;
    let src = CString::new(source).map_err(|_| format!("{name}: the source holds a NUL byte"))?;
    let file = CString::new(format!("{name}.cu")).map_err(|_| format!("{name}: bad module name"))?;
    let prog =
        Program(result::create_program(&src, Some(&file)).map_err(|e| format!("{name}: nvrtcCreateProgram: {e:?}"))?);
    let arch_option = match kind {
        ImageKind::Cubin => format!("--gpu-architecture=sm_{}", target.code()),
        ImageKind::Ptx => format!("--gpu-architecture=compute_{}", target.code()),
    };
    let mut options: Vec<String> = OPTIONS.iter().map(|o| (*o).to_owned()).collect();
    options.push(arch_option);
    // SAFETY: `prog` is live; the options are NUL-free strings.
    let compiled = unsafe { result::compile_program(prog.0, &options) };
    // SAFETY: `prog` is live.
    let log = unsafe { result::get_program_log(prog.0) }.map(|l| c_chars_to_string(&l)).unwrap_or_default();
    if let Err(e) = compiled {
        return Err(format!("{name} for {arch}: {e:?}\n{log}"));
    }
    let bytes = match kind {
        ImageKind::Cubin => cubin(&prog).map_err(|e| format!("{name} for {arch}: {e}"))?,
        ImageKind::Ptx => {
            // SAFETY: `prog` is live and compiled.
            let ptx =
                unsafe { result::get_ptx(prog.0) }.map_err(|e| format!("{name} for {arch}: nvrtcGetPTX: {e:?}"))?;
            let mut bytes: Vec<u8> = ptx.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
            bytes.push(0);
            bytes
        }
    };
    Ok(Image { kind, target, bytes, log })
}

fn cubin(prog: &Program) -> Result<Vec<u8>, String> {
    let mut size = 0usize;
    // SAFETY: `prog` is live and compiled for a real architecture.
    unsafe { sys::nvrtcGetCUBINSize(prog.0, &mut size) }.result().map_err(|e| format!("nvrtcGetCUBINSize: {e:?}"))?;
    let mut bytes = vec![0u8; size];
    // SAFETY: `bytes` holds the `size` bytes NVRTC writes.
    unsafe { sys::nvrtcGetCUBIN(prog.0, bytes.as_mut_ptr().cast::<c_char>()) }
        .result()
        .map_err(|e| format!("nvrtcGetCUBIN: {e:?}"))?;
    if bytes.is_empty() {
        return Err("NVRTC produced an empty CUBIN".into());
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_architectures_get_a_cubin_and_newer_ones_ptx() {
        let supported = [75, 80, 86, 89, 90];
        assert_eq!(target_for(Arch::new(8, 6), &supported), Some((ImageKind::Cubin, Arch::new(8, 6))));
        assert_eq!(target_for(Arch::new(8, 7), &supported), Some((ImageKind::Ptx, Arch::new(8, 6))));
        assert_eq!(target_for(Arch::new(12, 0), &supported), Some((ImageKind::Ptx, Arch::new(9, 0))));
        assert_eq!(target_for(Arch::new(6, 1), &supported), None);
        assert_eq!(Arch::new(8, 9).to_string(), "sm_89");
    }
}
