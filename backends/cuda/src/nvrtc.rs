//! Compiling a module's source with NVRTC: to a CUBIN for the device's exact
//! architecture when this NVRTC knows it (nothing left for the driver to do,
//! and no dependence on the driver's PTX version), else to PTX for the
//! newest virtual architecture not above the device's, which the driver
//! compiles when the module is loaded.
//!
//! NVRTC is called through a function table of its own ([`Nvrtc`]), loaded
//! from whichever library [`crate::libraries`] chose: CUDA 12's
//! `libnvrtc.so.12` and CUDA 13's `libnvrtc.so.13` have the same functions
//! for what is done here (CUDA 13 dropped architectures older than sm_75 and
//! the NVVM output, neither used). Status codes stay plain integers, named
//! by NVRTC's own `nvrtcGetErrorString`, so a code a newer NVRTC adds is
//! still just a number.

use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::path::Path;
use std::sync::OnceLock;

use super::libraries::{self, CudaLibrary, LoadedLibrary, MissingLibrary};

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

/// `nvrtcProgram`.
type Prog = *mut c_void;
/// `nvrtcResult`: 0 is success.
type Status = c_int;

/// The NVRTC functions called here, as declared in `nvrtc.h` (CUDA 12 and 13).
#[derive(Clone, Copy)]
struct Functions {
    version: unsafe extern "C" fn(*mut c_int, *mut c_int) -> Status,
    num_supported_archs: unsafe extern "C" fn(*mut c_int) -> Status,
    supported_archs: unsafe extern "C" fn(*mut c_int) -> Status,
    create_program: unsafe extern "C" fn(
        *mut Prog,
        *const c_char,
        *const c_char,
        c_int,
        *const *const c_char,
        *const *const c_char,
    ) -> Status,
    destroy_program: unsafe extern "C" fn(*mut Prog) -> Status,
    compile_program: unsafe extern "C" fn(Prog, c_int, *const *const c_char) -> Status,
    program_log_size: unsafe extern "C" fn(Prog, *mut usize) -> Status,
    program_log: unsafe extern "C" fn(Prog, *mut c_char) -> Status,
    ptx_size: unsafe extern "C" fn(Prog, *mut usize) -> Status,
    ptx: unsafe extern "C" fn(Prog, *mut c_char) -> Status,
    cubin_size: unsafe extern "C" fn(Prog, *mut usize) -> Status,
    cubin: unsafe extern "C" fn(Prog, *mut c_char) -> Status,
    error_string: unsafe extern "C" fn(Status) -> *const c_char,
}

/// One NVRTC library, loaded, with its version and the real architectures it
/// compiles for. Any number can be open at once (the kernel compile test
/// compiles through every one it finds); the backend uses [`global`].
pub struct Nvrtc {
    functions: Functions,
    version: (i32, i32),
    archs: Vec<u32>,
    // Last: the function pointers above point into it.
    library: LoadedLibrary,
}

impl std::fmt::Debug for Nvrtc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Nvrtc").field("version", &self.version).field("path", &self.library.path()).finish()
    }
}

impl Nvrtc {
    /// Loads the NVRTC in `path` (a file, or a name the system's loader finds).
    pub fn open(path: &Path) -> Result<Self, String> {
        // A bare name is the loader's to find (and a message then names the file it found).
        let origin = if path.components().count() > 1 { libraries::Origin::EnvVar } else { libraries::Origin::Loader };
        let candidate = libraries::Candidate { path: path.to_path_buf(), major: None, origin };
        Self::from_library(LoadedLibrary::open(CudaLibrary::Nvrtc, &candidate)?)
    }

    /// Resolves NVRTC's functions in `library` and asks its version and
    /// architectures.
    pub fn from_library(library: LoadedLibrary) -> Result<Self, String> {
        // SAFETY: each type is the C declaration of the function named (nvrtc.h
        // of CUDA 12 and 13); the pointers live in `Self` beside the library
        // that holds them, and are dropped before it.
        let functions = unsafe {
            Functions {
                version: library.function("nvrtcVersion")?,
                num_supported_archs: library.function("nvrtcGetNumSupportedArchs")?,
                supported_archs: library.function("nvrtcGetSupportedArchs")?,
                create_program: library.function("nvrtcCreateProgram")?,
                destroy_program: library.function("nvrtcDestroyProgram")?,
                compile_program: library.function("nvrtcCompileProgram")?,
                program_log_size: library.function("nvrtcGetProgramLogSize")?,
                program_log: library.function("nvrtcGetProgramLog")?,
                ptx_size: library.function("nvrtcGetPTXSize")?,
                ptx: library.function("nvrtcGetPTX")?,
                cubin_size: library.function("nvrtcGetCUBINSize")?,
                cubin: library.function("nvrtcGetCUBIN")?,
                error_string: library.function("nvrtcGetErrorString")?,
            }
        };
        let mut me = Self { functions, version: (0, 0), archs: Vec::new(), library };
        let (mut major, mut minor): (c_int, c_int) = (0, 0);
        // SAFETY: the pointers are to locals.
        me.check("nvrtcVersion", unsafe { (me.functions.version)(&mut major, &mut minor) })?;
        me.version = (major, minor);
        let mut n: c_int = 0;
        // SAFETY: `n` is a local.
        me.check("nvrtcGetNumSupportedArchs", unsafe { (me.functions.num_supported_archs)(&mut n) })?;
        let mut archs = vec![0 as c_int; usize::try_from(n).unwrap_or(0)];
        // SAFETY: `archs` holds the `n` ints NVRTC writes.
        me.check("nvrtcGetSupportedArchs", unsafe { (me.functions.supported_archs)(archs.as_mut_ptr()) })?;
        me.archs = archs.into_iter().filter_map(|a| u32::try_from(a).ok()).collect();
        Ok(me)
    }

    /// Its version as `(major, minor)`.
    pub fn version(&self) -> (i32, i32) {
        self.version
    }

    /// The real architectures it compiles for (`nvrtcGetSupportedArchs`: 86 for sm_86).
    pub fn supported_archs(&self) -> &[u32] {
        &self.archs
    }

    /// The file it was loaded from.
    pub fn path(&self) -> &Path {
        self.library.path()
    }

    /// `Ok` for success, else `what` failed with NVRTC's name for `status`.
    fn check(&self, what: &str, status: Status) -> Result<(), String> {
        if status == 0 {
            return Ok(());
        }
        // SAFETY: nvrtcGetErrorString takes any code and returns a static
        // NUL-terminated string (or null).
        let text = unsafe { (self.functions.error_string)(status) };
        let name = if text.is_null() {
            format!("NVRTC error {status}")
        } else {
            // SAFETY: non-null, NUL-terminated, static in the library.
            unsafe { CStr::from_ptr(text) }.to_string_lossy().into_owned()
        };
        Err(format!("{what}: {name}"))
    }

    /// Compiles `source` (named `name` in messages) for `arch`. The error is
    /// NVRTC's log, naming the module and the architecture.
    pub fn compile(&self, name: &str, source: &str, arch: Arch) -> Result<Image, String> {
        let (kind, target) = target_for(arch, &self.archs).ok_or_else(|| {
            format!("NVRTC {}.{} cannot compile for {arch} (it knows {:?})", self.version.0, self.version.1, self.archs)
        })?;
        let src = CString::new(source).map_err(|_| format!("{name}: the source holds a NUL byte"))?;
        let file = CString::new(format!("{name}.cu")).map_err(|_| format!("{name}: bad module name"))?;
        let mut raw: Prog = std::ptr::null_mut();
        // SAFETY: the strings are NUL-terminated and outlive the call; no headers.
        let created = unsafe {
            (self.functions.create_program)(
                &mut raw,
                src.as_ptr(),
                file.as_ptr(),
                0,
                std::ptr::null(),
                std::ptr::null(),
            )
        };
        self.check("nvrtcCreateProgram", created).map_err(|e| format!("{name}: {e}"))?;
        let prog = Program { nvrtc: self, raw };
        let arch_option = match kind {
            ImageKind::Cubin => format!("--gpu-architecture=sm_{}", target.code()),
            ImageKind::Ptx => format!("--gpu-architecture=compute_{}", target.code()),
        };
        let options: Vec<CString> = OPTIONS
            .iter()
            .map(|o| (*o).to_owned())
            .chain([arch_option])
            .map(|o| CString::new(o).map_err(|_| format!("{name}: an option holds a NUL byte")))
            .collect::<Result<_, _>>()?;
        let pointers: Vec<*const c_char> = options.iter().map(|o| o.as_ptr()).collect();
        let n_options = c_int::try_from(pointers.len()).map_err(|_| format!("{name}: too many options"))?;
        // SAFETY: `prog` is live; `pointers` holds `n_options` NUL-terminated
        // strings that outlive the call.
        let compiled = unsafe { (self.functions.compile_program)(prog.raw, n_options, pointers.as_ptr()) };
        let log = prog.read(self.functions.program_log_size, self.functions.program_log, true).unwrap_or_default();
        let log = String::from_utf8_lossy(&log).into_owned();
        if let Err(e) = self.check("nvrtcCompileProgram", compiled) {
            return Err(format!("{name} for {arch}: {e}\n{log}"));
        }
        let bytes = match kind {
            ImageKind::Cubin => {
                let bytes = prog.read(self.functions.cubin_size, self.functions.cubin, false);
                let bytes = bytes.map_err(|e| format!("{name} for {arch}: {e}"))?;
                if bytes.is_empty() {
                    return Err(format!("{name} for {arch}: NVRTC produced an empty CUBIN"));
                }
                bytes
            }
            ImageKind::Ptx => {
                let mut bytes = prog
                    .read(self.functions.ptx_size, self.functions.ptx, true)
                    .map_err(|e| format!("{name} for {arch}: {e}"))?;
                // cuModuleLoadData reads PTX up to its NUL.
                bytes.push(0);
                bytes
            }
        };
        Ok(Image { kind, target, bytes, log })
    }
}

/// The NVRTC the backend uses, loaded once per process (see
/// [`crate::libraries`] for which).
pub fn global() -> Result<&'static Nvrtc, MissingLibrary> {
    static GLOBAL: OnceLock<Result<Nvrtc, MissingLibrary>> = OnceLock::new();
    GLOBAL.get_or_init(|| libraries::choose(CudaLibrary::Nvrtc, Nvrtc::from_library)).as_ref().map_err(Clone::clone)
}

/// The backend's NVRTC's version as `(major, minor)`.
pub fn version() -> Result<(i32, i32), String> {
    global().map(Nvrtc::version).map_err(|e| e.to_string())
}

/// The real architectures the backend's NVRTC compiles for.
pub fn supported_archs() -> Result<Vec<u32>, String> {
    global().map(|n| n.supported_archs().to_vec()).map_err(|e| e.to_string())
}

/// How `arch` is compiled by an NVRTC that knows the real architectures
/// `supported`: its own CUBIN, or PTX of the newest virtual architecture
/// below it; `None` when NVRTC knows nothing as old.
pub fn target_for(arch: Arch, supported: &[u32]) -> Option<(ImageKind, Arch)> {
    if supported.contains(&arch.code()) {
        return Some((ImageKind::Cubin, arch));
    }
    let best = supported.iter().copied().filter(|&c| c <= arch.code()).max()?;
    Some((ImageKind::Ptx, Arch::new(best / 10, best % 10)))
}

/// Compiles `source` (named `name` in messages) for `arch` with the
/// backend's NVRTC ([`Nvrtc::compile`]).
pub fn compile(name: &str, source: &str, arch: Arch) -> Result<Image, String> {
    global().map_err(|e| e.to_string())?.compile(name, source, arch)
}

/// A program, destroyed when dropped.
struct Program<'a> {
    nvrtc: &'a Nvrtc,
    raw: Prog,
}

impl Program<'_> {
    /// One of the program's outputs (log, PTX, CUBIN): its size, then its
    /// bytes; a `text` output without its trailing NUL.
    fn read(
        &self,
        size_of: unsafe extern "C" fn(Prog, *mut usize) -> Status,
        read: unsafe extern "C" fn(Prog, *mut c_char) -> Status,
        text: bool,
    ) -> Result<Vec<u8>, String> {
        let mut size = 0usize;
        // SAFETY: the program is live; `size` is a local.
        self.nvrtc.check("reading the program's output size", unsafe { size_of(self.raw, &mut size) })?;
        let mut bytes = vec![0u8; size];
        if size > 0 {
            // SAFETY: `bytes` holds the `size` bytes NVRTC writes.
            self.nvrtc.check("reading the program's output", unsafe { read(self.raw, bytes.as_mut_ptr().cast()) })?;
        }
        while text && bytes.last() == Some(&0) {
            bytes.pop();
        }
        Ok(bytes)
    }
}

impl Drop for Program<'_> {
    fn drop(&mut self) {
        // SAFETY: the program was created by nvrtcCreateProgram and is destroyed once.
        let _ = unsafe { (self.nvrtc.functions.destroy_program)(&mut self.raw) };
    }
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
