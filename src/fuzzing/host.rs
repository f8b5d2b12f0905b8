//! What every harness runs against: one CPU backend with one thread, shared
//! by every input (a thread pool per input would dominate the run), and a
//! scratch folder in memory for the files the loaders open by path.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use gantry_backends::cpu::CpuBackend;
use gantry_engine::Backend;

/// The shared one-thread CPU backend.
pub(crate) fn cpu_backend() -> Arc<dyn Backend> {
    static BACKEND: OnceLock<Arc<dyn Backend>> = OnceLock::new();
    BACKEND
        .get_or_init(|| match CpuBackend::with_threads(1) {
            Ok(b) => Arc::new(b),
            Err(e) => panic!("a CPU backend for fuzzing: {e}"),
        })
        .clone()
}

/// A folder for one input's files (under `/dev/shm` where it exists, so
/// nothing touches a disk), removed with everything in it when dropped.
/// Named by process and thread, so that parallel fuzzing jobs and test
/// threads never share one.
pub(crate) struct Scratch {
    dir: PathBuf,
}

impl Scratch {
    /// A new, empty folder for `what`.
    pub(crate) fn new(what: &str) -> Self {
        let shm = Path::new("/dev/shm");
        let base = if shm.is_dir() { shm.to_path_buf() } else { std::env::temp_dir() };
        let thread = format!("{:?}", std::thread::current().id()).replace(|c: char| !c.is_ascii_alphanumeric(), "");
        let dir = base.join(format!("gantry-fuzz-{}-{thread}-{what}", std::process::id()));
        // A folder left by an input that crashed this process's predecessor with the same id.
        let _ = std::fs::remove_dir_all(&dir);
        if let Err(e) = std::fs::create_dir_all(&dir) {
            panic!("scratch folder {}: {e}", dir.display());
        }
        Self { dir }
    }

    /// The folder.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// Writes `bytes` to the file `name` in the folder; its path.
    pub(crate) fn write(&self, name: &str, bytes: &[u8]) -> PathBuf {
        let path = self.dir.join(name);
        // A module's file (`1_Pooling/config.json`) lies in a folder of its own.
        if let Some(parent) = path.parent()
            && let Err(e) = std::fs::create_dir_all(parent)
        {
            panic!("scratch folder {}: {e}", parent.display());
        }
        if let Err(e) = std::fs::write(&path, bytes) {
            panic!("writing {}: {e}", path.display());
        }
        path
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
