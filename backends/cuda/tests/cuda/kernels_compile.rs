//! Every CUDA kernel module compiled through every NVRTC found (CUDA 12's
//! `libnvrtc.so.12` and CUDA 13's `libnvrtc.so.13`: the PyPI wheels
//! `nvidia-cuda-nvrtc-cu12` and `nvidia-cuda-nvrtc`, a toolkit, or
//! `GANTRY_NVRTC_PATH`), with the backend's own compile path, for the
//! architectures CI checks (sm_80, sm_86, sm_89, sm_90). Needs no GPU and
//! no driver. Skips, saying why, only when no NVRTC can be found; fails then
//! too with `GANTRY_REQUIRE_NVRTC=1`, and with `GANTRY_REQUIRE_NVRTC=12,13`
//! (as CI sets) when an NVRTC of each major version listed is not found.
//! Any compile error fails.

use gantry_cuda::kernels::Module;
use gantry_cuda::libraries::{self, CudaLibrary};
use gantry_cuda::nvrtc::{self, Arch, ImageKind, Nvrtc};

const ARCHS: [Arch; 4] = [Arch::new(8, 0), Arch::new(8, 6), Arch::new(8, 9), Arch::new(9, 0)];

/// One NVRTC per version among the candidates the backend would consider.
fn every_nvrtc() -> Vec<Nvrtc> {
    let mut found: Vec<Nvrtc> = Vec::new();
    for candidate in libraries::candidates(CudaLibrary::Nvrtc) {
        match Nvrtc::open(&candidate.path) {
            Ok(n) if found.iter().all(|f| f.version() != n.version()) => found.push(n),
            Ok(n) => eprintln!("NVRTC {:?} again at {} (not compiled twice)", n.version(), candidate.path.display()),
            // The loader's names are tried blindly; a missing one is no news.
            Err(_) if candidate.origin == libraries::Origin::Loader => {}
            Err(e) => eprintln!("NVRTC at {} does not load: {e}", candidate.path.display()),
        }
    }
    found
}

/// The major versions `GANTRY_REQUIRE_NVRTC` asks for (`12,13`), or `Some`
/// of none for `1` (any), or `None` when it is unset.
fn required_majors() -> Option<Vec<i32>> {
    let value = std::env::var("GANTRY_REQUIRE_NVRTC").ok()?;
    Some(value.split(',').filter_map(|v| v.trim().parse().ok()).filter(|&m| m != 1).collect())
}

#[test]
fn every_kernel_compiles_for_every_ci_architecture_with_every_nvrtc() {
    let compilers = every_nvrtc();
    let required = required_majors();
    if compilers.is_empty() {
        // CI installs NVRTC and sets this, so a lost install fails instead of skipping.
        let searched = libraries::candidates(CudaLibrary::Nvrtc);
        assert!(required.is_none(), "GANTRY_REQUIRE_NVRTC is set but no NVRTC was found; searched {searched:?}");
        eprintln!("skipped: no NVRTC found ({}); searched {searched:?}", CudaLibrary::Nvrtc.hint());
        return;
    }
    for major in required.unwrap_or_default() {
        let have: Vec<_> = compilers.iter().map(Nvrtc::version).collect();
        assert!(have.iter().any(|v| v.0 == major), "GANTRY_REQUIRE_NVRTC asks for NVRTC {major}, found only {have:?}");
    }
    if let Ok(backend) = nvrtc::global() {
        eprintln!("the backend would use NVRTC {:?} ({})", backend.version(), backend.path().display());
    }
    let mut failures = Vec::new();
    for compiler in &compilers {
        let (major, minor) = compiler.version();
        eprintln!("NVRTC {major}.{minor} from {}", compiler.path().display());
        for arch in ARCHS {
            let mut kernels = 0;
            for module in Module::ALL {
                match compiler.compile(module.name(), &module.source(), arch) {
                    Ok(image) => {
                        assert_eq!(
                            image.kind,
                            ImageKind::Cubin,
                            "{} for {arch}: NVRTC {major}.{minor} knows {arch}",
                            module.name()
                        );
                        assert!(!image.bytes.is_empty());
                        if !image.log.trim().is_empty() {
                            eprintln!("{} for {arch}: {}", module.name(), image.log.trim());
                        }
                        kernels += module.entry_points().len();
                    }
                    Err(e) => failures.push(format!("NVRTC {major}.{minor}: {e}")),
                }
            }
            eprintln!("  {arch}: {} modules, {kernels} kernels compiled", Module::ALL.len());
        }
    }
    assert!(failures.is_empty(), "{} modules failed:\n{}", failures.len(), failures.join("\n\n"));
}
