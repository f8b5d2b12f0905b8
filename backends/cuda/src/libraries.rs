//! Finding the CUDA libraries, of CUDA 12 or 13, before anything calls them.
//!
//! - The driver (`libcuda.so.1`) comes with the NVIDIA driver; it is only
//!   looked for where the system's loader looks, and cudarc loads and calls
//!   it (cudarc panics when it is missing, so every entry point of the
//!   backend checks [`ensure`] first and turns a missing driver into an
//!   error naming it).
//! - NVRTC (`libnvrtc.so.13` or `.12`) and cuBLAS (`libcublas.so.13` or
//!   `.12`, with its `libcublasLt` beside it) come with a CUDA toolkit or
//!   from PyPI, no GPU or driver needed: the CUDA 13 wheels `nvidia-cuda-nvrtc`
//!   and `nvidia-cublas` put them in `nvidia/cu13/lib`, the CUDA 12 wheels
//!   `nvidia-cuda-nvrtc-cu12` and `nvidia-cublas-cu12` in
//!   `nvidia/cuda_nvrtc/lib` and `nvidia/cublas/lib`. The backend loads them
//!   itself, by full path where it found a file ([`crate::nvrtc`] and the
//!   cuBLAS calls have their own function tables): cudarc 0.19, built for
//!   the CUDA 12.0 API, only ever asks the loader for `.so.12` and older
//!   names, and would not see a CUDA 13 library.
//!
//! Where they are looked for ([`candidates`]), in order: the file or folder
//! `GANTRY_NVRTC_PATH` / `GANTRY_CUBLAS_PATH` names; the system's loader
//! (`LD_LIBRARY_PATH`, `ldconfig`'s cache); the toolkits' folders
//! (`CUDA_HOME`, `CUDA_PATH`, `/usr/local/cuda*`: `lib64`,
//! `targets/x86_64-linux/lib`); the wheels' folders in every Python
//! site-packages found (`python3`'s own, `VIRTUAL_ENV`, pyenv's, the
//! user's and the system's). Which one is used ([`choose`]): the
//! variable's when it loads; else the newest major version the driver runs
//! (a CUDA 13 cuBLAS needs a CUDA 13 driver), or the newest of all without
//! a driver (compiling only); the search order breaks ties. Decided once
//! per process.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// One of the libraries the backend needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CudaLibrary {
    /// The driver API, `libcuda.so.1`.
    Driver,
    /// The run-time compiler, `libnvrtc.so.13` or `libnvrtc.so.12`.
    Nvrtc,
    /// BLAS, `libcublas.so.13` or `libcublas.so.12` (with its `libcublasLt`).
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

    /// The names it is looked for by, newest major version first, with that
    /// version (`None` for an unversioned name, whatever it links to).
    pub const fn sonames(self) -> &'static [(&'static str, Option<u32>)] {
        match self {
            CudaLibrary::Driver => &[("libcuda.so.1", None)],
            CudaLibrary::Nvrtc => &[("libnvrtc.so.13", Some(13)), ("libnvrtc.so.12", Some(12)), ("libnvrtc.so", None)],
            CudaLibrary::Cublas => {
                &[("libcublas.so.13", Some(13)), ("libcublas.so.12", Some(12)), ("libcublas.so", None)]
            }
        }
    }

    /// The folders the PyPI wheels put it in, under site-packages: CUDA 13's,
    /// then CUDA 12's.
    const fn wheel_dirs(self) -> &'static [&'static str] {
        match self {
            CudaLibrary::Driver => &[],
            CudaLibrary::Nvrtc => &["nvidia/cu13/lib", "nvidia/cuda_nvrtc/lib"],
            CudaLibrary::Cublas => &["nvidia/cu13/lib", "nvidia/cublas/lib"],
        }
    }

    /// How to get it, for messages.
    pub const fn hint(self) -> &'static str {
        match self {
            CudaLibrary::Driver => "install the NVIDIA driver",
            CudaLibrary::Nvrtc => {
                "pip install nvidia-cuda-nvrtc (CUDA 13) or nvidia-cuda-nvrtc-cu12 (CUDA 12), or set GANTRY_NVRTC_PATH"
            }
            CudaLibrary::Cublas => {
                "pip install nvidia-cublas (CUDA 13) or nvidia-cublas-cu12 (CUDA 12), or set GANTRY_CUBLAS_PATH"
            }
        }
    }
}

/// Why a library cannot be used: its name, and how to get it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingLibrary {
    /// The library.
    pub library: CudaLibrary,
    /// Where it was looked for: files, and names given to the system's loader.
    pub searched: Vec<PathBuf>,
}

impl std::fmt::Display for MissingLibrary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} not found ({})", self.library.file_name(), self.library.hint())
    }
}

impl std::error::Error for MissingLibrary {}

/// Where a candidate was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// The library's environment variable ([`CudaLibrary::env_var`]).
    EnvVar,
    /// The system's loader, by name.
    Loader,
    /// A CUDA toolkit's folder.
    Toolkit,
    /// A PyPI wheel's folder in site-packages.
    Wheel,
}

/// A file (or, for [`Origin::Loader`], a name) that may hold the library.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// The file, or the bare name the system's loader is asked for.
    pub path: PathBuf,
    /// Its CUDA major version, where its name (or the file a link leads to) says.
    pub major: Option<u32>,
    /// Where it was found.
    pub origin: Origin,
}

/// The places to try for `library`, in the search order of the module's
/// description; files that exist only (names for the loader always).
pub fn candidates(library: CudaLibrary) -> Vec<Candidate> {
    let mut out = Vec::new();
    if let Some(var) = library.env_var()
        && let Some(value) = std::env::var_os(var).filter(|v| !v.is_empty())
    {
        let p = PathBuf::from(value);
        if p.is_dir() {
            push_files_in(&mut out, library, &p, Origin::EnvVar);
        } else {
            // Named as is, even when missing: the error then lists it.
            let major = major_of(&p);
            out.push(Candidate { path: p, major, origin: Origin::EnvVar });
        }
    }
    for &(soname, major) in library.sonames() {
        out.push(Candidate { path: PathBuf::from(soname), major, origin: Origin::Loader });
    }
    if library != CudaLibrary::Driver {
        for dir in toolkit_dirs() {
            push_files_in(&mut out, library, &dir, Origin::Toolkit);
        }
        for site in site_packages() {
            for wheel_dir in library.wheel_dirs() {
                push_files_in(&mut out, library, &site.join(wheel_dir), Origin::Wheel);
            }
        }
    }
    // The same file reached twice (a folder named twice, links): its first place.
    let mut seen = Vec::new();
    out.retain(|c| {
        if c.origin == Origin::Loader {
            return true;
        }
        let key = std::fs::canonicalize(&c.path).unwrap_or_else(|_| c.path.clone());
        let fresh = !seen.contains(&key);
        seen.push(key);
        fresh
    });
    out
}

/// The library's files in `dir`, newest major version first.
fn push_files_in(out: &mut Vec<Candidate>, library: CudaLibrary, dir: &Path, origin: Origin) {
    for &(soname, major) in library.sonames() {
        let path = dir.join(soname);
        if path.is_file() {
            let major = major.or_else(|| major_of(&path));
            out.push(Candidate { path, major, origin });
        }
    }
}

/// The major version in a library's file name (`libnvrtc.so.13` → 13), or in
/// the name of the file a link leads to (`libnvrtc.so` → `libnvrtc.so.12.9.86`).
fn major_of(path: &Path) -> Option<u32> {
    let from_name = |p: &Path| {
        let name = p.file_name()?.to_str()?;
        let (_, versions) = name.split_once(".so.")?;
        versions.split('.').next()?.parse().ok()
    };
    from_name(path).or_else(|| from_name(&std::fs::canonicalize(path).ok()?))
}

/// The CUDA toolkits' library folders that exist: `CUDA_HOME`, `CUDA_PATH`,
/// `/usr/local/cuda`, then `/usr/local/cuda-*` newest first.
fn toolkit_dirs() -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> =
        ["CUDA_HOME", "CUDA_PATH"].iter().filter_map(std::env::var_os).map(PathBuf::from).collect();
    roots.push(PathBuf::from("/usr/local/cuda"));
    if let Ok(entries) = std::fs::read_dir("/usr/local") {
        let mut versioned: Vec<(Vec<u32>, PathBuf)> = entries
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                let version = name.strip_prefix("cuda-")?;
                Some((version.split('.').filter_map(|n| n.parse().ok()).collect(), e.path()))
            })
            .collect();
        versioned.sort_by(|a, b| b.0.cmp(&a.0));
        roots.extend(versioned.into_iter().map(|(_, p)| p));
    }
    roots.iter().flat_map(|r| [r.join("lib64"), r.join("targets/x86_64-linux/lib")]).filter(|d| d.is_dir()).collect()
}

/// A library loaded by the backend, kept loaded while this value lives.
#[derive(Debug)]
pub struct LoadedLibrary {
    library: CudaLibrary,
    path: PathBuf,
    major: Option<u32>,
    handle: libloading::Library,
}

impl LoadedLibrary {
    /// Loads `candidate` (a file, or a name the system's loader finds).
    pub fn open(library: CudaLibrary, candidate: &Candidate) -> Result<Self, String> {
        // SAFETY: loading a CUDA library runs only its initializers, which set
        // up its own state; nothing of it is called here.
        let handle = unsafe { libloading::Library::new(&candidate.path) }
            .map_err(|e| format!("{}: {e}", candidate.path.display()))?;
        let path = match candidate.origin {
            Origin::Loader => mapped_file(&candidate.path).unwrap_or_else(|| candidate.path.clone()),
            _ => candidate.path.clone(),
        };
        Ok(Self { library, path, major: candidate.major, handle })
    }

    /// Which library it is.
    pub fn library(&self) -> CudaLibrary {
        self.library
    }

    /// The file it was loaded from (or the name the loader was given).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Its CUDA major version, where its name says.
    pub fn major(&self) -> Option<u32> {
        self.major
    }

    /// The function `name`, as a pointer of type `F`.
    ///
    /// # Safety
    ///
    /// `F` must be an `unsafe extern "C" fn` type matching the C declaration
    /// of `name`, and the pointer must not be called after this value is
    /// dropped.
    pub unsafe fn function<F: Copy>(&self, name: &str) -> Result<F, String> {
        // SAFETY: the caller vouches for the type; the pointer is copied out
        // of the symbol and its validity is tied to `self` by the contract.
        unsafe { self.handle.get::<F>(name.as_bytes()) }
            .map(|symbol| *symbol)
            .map_err(|e| format!("{} has no {name}: {e}", self.path.display()))
    }
}

/// The file the loader mapped for the bare name `soname` (`libnvrtc.so.13`
/// → `/usr/local/cuda-13.0/lib64/libnvrtc.so.13.0.48`), from
/// `/proc/self/maps`: what a message should name.
fn mapped_file(soname: &Path) -> Option<PathBuf> {
    let soname = soname.to_str()?;
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    maps.lines()
        .filter_map(|line| line.split_whitespace().nth(5))
        .map(Path::new)
        .find(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with(soname)))
        .map(Path::to_path_buf)
}

/// Loads the library to use (the module's description says which): the
/// first candidate, in the order of preference, that loads and that `make`
/// accepts (it resolves the functions it needs, say). Without one, the
/// error lists where it looked.
pub fn choose<T>(library: CudaLibrary, make: impl Fn(LoadedLibrary) -> Result<T, String>) -> Result<T, MissingLibrary> {
    let all = candidates(library);
    let driver_major = if library == CudaLibrary::Driver { None } else { driver_cuda_major() };
    let mut ranked: Vec<&Candidate> = all.iter().collect();
    // Stable: the search order stays among equals.
    ranked.sort_by_key(|c| {
        let too_new = matches!((c.major, driver_major), (Some(m), Some(d)) if m > d);
        (c.origin != Origin::EnvVar, too_new, std::cmp::Reverse(c.major.unwrap_or(0)))
    });
    for candidate in ranked {
        if let Ok(made) = LoadedLibrary::open(library, candidate).and_then(&make) {
            return Ok(made);
        }
    }
    Err(MissingLibrary { library, searched: all.into_iter().map(|c| c.path).collect() })
}

/// The CUDA version the driver runs, as the driver gives it (13000 for
/// 13.0), when the driver is there.
pub fn driver_version() -> Option<i32> {
    ensure(CudaLibrary::Driver).ok()?;
    let mut version = 0;
    // SAFETY: the driver is loadable (checked above); cuDriverGetVersion
    // needs no cuInit and writes one int, a local.
    let status = unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut version) };
    (status == cudarc::driver::sys::cudaError_enum::CUDA_SUCCESS).then_some(version)
}

/// The CUDA major version the driver runs (13 for a 580 driver), when the
/// driver is there.
pub fn driver_cuda_major() -> Option<u32> {
    u32::try_from(driver_version()? / 1000).ok()
}

/// Makes sure `library` can be used, or says why not: the driver is
/// loadable by cudarc; NVRTC and cuBLAS are loaded (once per process, see
/// [`choose`]) with every function the backend calls.
pub fn ensure(library: CudaLibrary) -> Result<(), MissingLibrary> {
    match library {
        CudaLibrary::Driver => {
            static DRIVER: OnceLock<Result<(), MissingLibrary>> = OnceLock::new();
            DRIVER
                .get_or_init(|| {
                    // SAFETY: is_culib_present only tries to dlopen the
                    // driver's candidate names; it calls nothing in them.
                    if unsafe { cudarc::driver::sys::is_culib_present() } {
                        Ok(())
                    } else {
                        let searched = candidates(library).into_iter().map(|c| c.path).collect();
                        Err(MissingLibrary { library, searched })
                    }
                })
                .clone()
        }
        CudaLibrary::Nvrtc => crate::nvrtc::global().map(|_| ()),
        CudaLibrary::Cublas => crate::cublas::api().map(|_| ()),
    }
}

/// The driver's CUDA version and NVRTC's and cuBLAS's, in a few words
/// (`driver CUDA 13.0, NVRTC 13.0, cuBLAS 13.1.0`): the CUDA devices'
/// description. A library missing is left out.
pub fn versions() -> String {
    let mut parts = Vec::new();
    if let Some(version) = driver_version() {
        parts.push(format!("driver CUDA {}.{}", version / 1000, version % 1000 / 10));
    }
    if let Ok(n) = crate::nvrtc::global() {
        parts.push(format!("NVRTC {}.{}", n.version().0, n.version().1));
    }
    if let Ok(b) = crate::cublas::api() {
        parts.push(format!("cuBLAS {}", b.version()));
    }
    parts.join(", ")
}

/// Where NVRTC and cuBLAS were loaded from, with their versions (for
/// logs), or why not.
pub fn describe() -> String {
    let nvrtc = match crate::nvrtc::global() {
        Ok(n) => format!("NVRTC {}.{} ({})", n.version().0, n.version().1, n.path().display()),
        Err(e) => e.to_string(),
    };
    let cublas = match crate::cublas::api() {
        Ok(b) => format!("cuBLAS {} ({})", b.version(), b.path().display()),
        Err(e) => e.to_string(),
    };
    format!("{nvrtc}; {cublas}")
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
        let mut seen = Vec::new();
        dirs.retain(|d| {
            d.is_dir() && !seen.contains(d) && {
                seen.push(d.clone());
                true
            }
        });
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
    fn versions_come_from_file_names_and_messages_say_how_to_get_a_library() {
        assert_eq!(major_of(Path::new("/x/nvidia/cu13/lib/libnvrtc.so.13")), Some(13));
        assert_eq!(major_of(Path::new("/x/libcublas.so.12.9.1.4")), Some(12));
        assert_eq!(major_of(Path::new("/nowhere/libnvrtc.so")), None);
        let msg = MissingLibrary { library: CudaLibrary::Nvrtc, searched: Vec::new() }.to_string();
        assert!(msg.contains("libnvrtc.so") && msg.contains("GANTRY_NVRTC_PATH"), "{msg}");
        assert!(msg.contains("nvidia-cuda-nvrtc-cu12") && msg.contains("nvidia-cuda-nvrtc "), "{msg}");
    }

    #[test]
    fn the_loader_is_asked_for_the_newest_version_first_and_the_driver_only_there() {
        let names: Vec<_> = candidates(CudaLibrary::Cublas)
            .into_iter()
            .filter(|c| c.origin == Origin::Loader)
            .map(|c| c.path.display().to_string())
            .collect();
        assert_eq!(names, ["libcublas.so.13", "libcublas.so.12", "libcublas.so"]);
        let driver = candidates(CudaLibrary::Driver);
        assert!(driver.iter().all(|c| c.origin == Origin::Loader), "{driver:?}");
        for c in candidates(CudaLibrary::Nvrtc).iter().filter(|c| c.origin == Origin::Wheel) {
            let dir = c.path.parent().unwrap();
            assert!(dir.ends_with("nvidia/cu13/lib") || dir.ends_with("nvidia/cuda_nvrtc/lib"), "{c:?}");
        }
    }

    #[test]
    fn a_folder_in_the_variable_is_searched_for_every_version() {
        let scratch = tempfile::Builder::new().prefix("gantry-libraries-").tempdir().unwrap();
        let dir = scratch.path().to_owned();
        for name in ["libnvrtc.so.12", "libnvrtc.so.13"] {
            std::fs::write(dir.join(name), b"").unwrap();
        }
        let mut found = Vec::new();
        push_files_in(&mut found, CudaLibrary::Nvrtc, &dir, Origin::EnvVar);
        let majors: Vec<_> = found.iter().map(|c| c.major).collect();
        assert_eq!(majors, [Some(13), Some(12)]);
    }
}
