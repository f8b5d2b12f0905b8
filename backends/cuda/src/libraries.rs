//! Finding the CUDA libraries before cudarc is asked for them: cudarc loads
//! each library on first use and panics when it is missing, so every entry
//! point of the backend checks here first and turns a missing library into
//! an error naming it.
//!
//! - The driver (`libcuda.so`) comes with the NVIDIA driver; it is only
//!   looked for where the system's loader looks.
//! - NVRTC (`libnvrtc.so.12`) and cuBLAS (`libcublas.so.12`) come with a
//!   CUDA toolkit or from PyPI (`nvidia-cuda-nvrtc-cu12`, `nvidia-cublas-cu12`,
//!   no GPU or driver needed). When the system's loader does not find them,
//!   `GANTRY_NVRTC_PATH` / `GANTRY_CUBLAS_PATH` (the library file, or the
//!   folder holding it) are tried, then the wheels' folders in Python's
//!   site-packages (`nvidia/cuda_nvrtc/lib`, `nvidia/cublas/lib`). A library
//!   found that way is loaded once, by its full path, and kept loaded; the
//!   loader then hands it to cudarc when cudarc asks for it by its soname.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// One of the libraries the backend needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CudaLibrary {
    /// The driver API, `libcuda.so`.
    Driver,
    /// The run-time compiler, `libnvrtc.so.12`.
    Nvrtc,
    /// BLAS, `libcublas.so.12` (with `libcublasLt.so.12`).
    Cublas,
}

impl CudaLibrary {
    /// The file name users know it by.
    pub const fn file_name(self) -> &'static str {
        match self {
            CudaLibrary::Driver => "libcuda.so",
            CudaLibrary::Nvrtc => "libnvrtc.so",
            CudaLibrary::Cublas => "libcublas.so",
        }
    }

    /// The environment variable naming it (none for the driver).
    pub const fn env_var(self) -> Option<&'static str> {
        match self {
            CudaLibrary::Driver => None,
            CudaLibrary::Nvrtc => Some("GANTRY_NVRTC_PATH"),
            CudaLibrary::Cublas => Some("GANTRY_CUBLAS_PATH"),
        }
    }

    /// Where the PyPI wheel puts it, under site-packages, and its soname.
    const fn wheel(self) -> Option<(&'static str, &'static str)> {
        match self {
            CudaLibrary::Driver => None,
            CudaLibrary::Nvrtc => Some(("nvidia/cuda_nvrtc/lib", "libnvrtc.so.12")),
            CudaLibrary::Cublas => Some(("nvidia/cublas/lib", "libcublas.so.12")),
        }
    }

    /// How to get it, for messages.
    pub const fn hint(self) -> &'static str {
        match self {
            CudaLibrary::Driver => "install the NVIDIA driver",
            CudaLibrary::Nvrtc => "pip install nvidia-cuda-nvrtc-cu12, or set GANTRY_NVRTC_PATH",
            CudaLibrary::Cublas => "pip install nvidia-cublas-cu12, or set GANTRY_CUBLAS_PATH",
        }
    }

    /// Whether cudarc can load it now (after [`ensure`] found it).
    fn loadable_by_cudarc(self) -> bool {
        // SAFETY: is_culib_present only tries to dlopen the library's
        // candidate names; it calls nothing in them.
        unsafe {
            match self {
                CudaLibrary::Driver => cudarc::driver::sys::is_culib_present(),
                CudaLibrary::Nvrtc => cudarc::nvrtc::sys::is_culib_present(),
                CudaLibrary::Cublas => cudarc::cublas::sys::is_culib_present(),
            }
        }
    }
}

/// Why a library cannot be used: its name, and how to get it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingLibrary {
    /// The library.
    pub library: CudaLibrary,
    /// Where it was looked for beyond the system's loader.
    pub searched: Vec<PathBuf>,
}

impl std::fmt::Display for MissingLibrary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} not found ({})", self.library.file_name(), self.library.hint())
    }
}

/// Libraries loaded by full path, kept for the life of the process.
static PRELOADED: OnceLock<std::sync::Mutex<Vec<libloading::Library>>> = OnceLock::new();

fn found_once(library: CudaLibrary) -> &'static OnceLock<Result<(), MissingLibrary>> {
    static DRIVER: OnceLock<Result<(), MissingLibrary>> = OnceLock::new();
    static NVRTC: OnceLock<Result<(), MissingLibrary>> = OnceLock::new();
    static CUBLAS: OnceLock<Result<(), MissingLibrary>> = OnceLock::new();
    match library {
        CudaLibrary::Driver => &DRIVER,
        CudaLibrary::Nvrtc => &NVRTC,
        CudaLibrary::Cublas => &CUBLAS,
    }
}

/// Makes sure cudarc will find `library` (searching and preloading it when
/// the system's loader does not), or says why not. Decided once per process.
pub fn ensure(library: CudaLibrary) -> Result<(), MissingLibrary> {
    found_once(library).get_or_init(|| find(library)).clone()
}

fn find(library: CudaLibrary) -> Result<(), MissingLibrary> {
    if library.loadable_by_cudarc() {
        return Ok(());
    }
    let candidates = candidate_files(library);
    for path in &candidates {
        if path.is_file() && preload(path) && library.loadable_by_cudarc() {
            return Ok(());
        }
    }
    Err(MissingLibrary { library, searched: candidates })
}

/// Loads `path` and keeps it loaded; `false` when it does not load.
fn preload(path: &Path) -> bool {
    // SAFETY: loading a CUDA library runs only its initializers, which set
    // up its own state; nothing of it is called here.
    match unsafe { libloading::Library::new(path) } {
        Ok(lib) => {
            let kept = PRELOADED.get_or_init(Default::default);
            kept.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(lib);
            true
        }
        Err(_) => false,
    }
}

/// The files to try for `library`, in order: its environment variable
/// (a file, or a folder holding the soname), then the wheel's folder in each
/// site-packages folder found.
pub fn candidate_files(library: CudaLibrary) -> Vec<PathBuf> {
    let Some((wheel_dir, soname)) = library.wheel() else { return Vec::new() };
    let mut out = Vec::new();
    if let Some(var) = library.env_var()
        && let Some(value) = std::env::var_os(var)
    {
        let p = PathBuf::from(value);
        out.push(if p.is_dir() { p.join(soname) } else { p });
    }
    for site in site_packages() {
        out.push(site.join(wheel_dir).join(soname));
    }
    out
}

/// Python's site-packages folders: the ones `python3` reports (asked once),
/// then the usual places of virtual environments, pyenv, the user's and the
/// system's installs.
fn site_packages() -> &'static [PathBuf] {
    static DIRS: OnceLock<Vec<PathBuf>> = OnceLock::new();
    DIRS.get_or_init(|| {
        let mut dirs = python_reported_site_packages();
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let mut roots: Vec<PathBuf> = Vec::new();
        if let Some(venv) = std::env::var_os("VIRTUAL_ENV") {
            roots.push(PathBuf::from(venv).join("lib"));
        }
        if let Some(home) = &home {
            roots.push(home.join(".local/lib"));
            if let Ok(versions) = std::fs::read_dir(home.join(".pyenv/versions")) {
                roots.extend(versions.flatten().map(|v| v.path().join("lib")));
            }
        }
        roots.extend(["/usr/local/lib", "/usr/lib", "/opt/conda/lib"].map(PathBuf::from));
        for root in roots {
            let Ok(entries) = std::fs::read_dir(&root) else { continue };
            for entry in entries.flatten() {
                let name = entry.file_name();
                if name.to_string_lossy().starts_with("python3") {
                    dirs.push(entry.path().join("site-packages"));
                    dirs.push(entry.path().join("dist-packages"));
                }
            }
        }
        dirs.dedup();
        dirs
    })
}

fn python_reported_site_packages() -> Vec<PathBuf> {
    let script = "import site,sys\nfor p in site.getsitepackages()+[site.getusersitepackages()]+sys.path: print(p)";
    let Ok(out) = std::process::Command::new("python3").args(["-c", script]).output() else { return Vec::new() };
    if !out.status.success() {
        return Vec::new();
    }
    String::from_utf8_lossy(&out.stdout).lines().filter(|l| !l.is_empty()).map(PathBuf::from).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidates_are_the_wheels_folders_and_messages_say_how_to_get_a_library() {
        let from_wheels = candidate_files(CudaLibrary::Cublas);
        assert!(from_wheels.iter().all(|p| p.ends_with("nvidia/cublas/lib/libcublas.so.12")), "{from_wheels:?}");
        assert!(candidate_files(CudaLibrary::Driver).is_empty(), "the driver is the system loader's business");
        let msg = MissingLibrary { library: CudaLibrary::Nvrtc, searched: Vec::new() }.to_string();
        assert!(msg.contains("libnvrtc.so") && msg.contains("GANTRY_NVRTC_PATH"), "{msg}");
    }
}
