//! Every CUDA kernel module compiled by NVRTC, through the backend's own
//! compile path, for the architectures CI checks (sm_80, sm_86, sm_89,
//! sm_90). Needs no GPU and no driver: only libnvrtc (the PyPI wheel
//! `nvidia-cuda-nvrtc-cu12`, or `GANTRY_NVRTC_PATH`). Skips, saying why,
//! only when libnvrtc cannot be found (fails then too with
//! `GANTRY_REQUIRE_NVRTC=1`, as CI sets); any compile error fails.

use gantry_cuda::kernels::Module;
use gantry_cuda::libraries::{self, CudaLibrary};
use gantry_cuda::nvrtc::{self, Arch, ImageKind};

const ARCHS: [Arch; 4] = [Arch::new(8, 0), Arch::new(8, 6), Arch::new(8, 9), Arch::new(9, 0)];

#[test]
fn every_kernel_compiles_for_every_ci_architecture() {
    if let Err(missing) = libraries::ensure(CudaLibrary::Nvrtc) {
        // CI installs NVRTC and sets this, so a lost install fails instead of skipping.
        assert!(std::env::var_os("GANTRY_REQUIRE_NVRTC").is_none(), "GANTRY_REQUIRE_NVRTC is set but {missing}");
        eprintln!("skipped: {missing}; searched {:?}", missing.searched);
        return;
    }
    let (major, minor) = nvrtc::version().unwrap();
    eprintln!("NVRTC {major}.{minor}");
    let mut failures = Vec::new();
    for arch in ARCHS {
        let mut kernels = 0;
        for module in Module::ALL {
            match nvrtc::compile(module.name(), &module.source(), arch) {
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
                Err(e) => failures.push(e),
            }
        }
        eprintln!("{arch}: {} modules, {kernels} kernels compiled", Module::ALL.len());
    }
    assert!(failures.is_empty(), "{} modules failed:\n{}", failures.len(), failures.join("\n\n"));
}
