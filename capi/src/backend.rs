//! Backends (streams on a device): names, threads, the abort callback.

use std::ffi::{c_char, c_void};
use std::sync::{Arc, LazyLock};

use gantry::{AbortCallback, Backend, SetAbortCallback, SetThreadCount};

use crate::entry::{Failure, entry};
use crate::handles::{Table, lock};
use crate::ptr::write_string;
use crate::reentry::in_callback;
use crate::status::GantryStatus;

/// A backend: a stream of work on one device, from
/// `gantry_registry_backend` or `gantry_registry_backends_by_priority`.
///
/// A zero-initialized value (`{0}`) is the null handle.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GantryBackend {
    /// The handle's number (0 = null). Opaque: only copy or compare it.
    pub id: u64,
}

/// A backend and the optional features of its platform.
pub(crate) struct BackendEntry {
    pub(crate) backend: Arc<dyn Backend>,
    pub(crate) set_abort: Option<SetAbortCallback>,
    pub(crate) set_threads: Option<SetThreadCount>,
}

pub(crate) static BACKENDS: LazyLock<Table<BackendEntry>> = LazyLock::new(|| Table::new("backend", 0x424b));

/// The backend behind `handle`.
pub(crate) fn backend_of(handle: GantryBackend) -> Result<Arc<dyn Backend>, Failure> {
    let entry = BACKENDS.get(handle.id)?;
    Ok(lock(&entry, "backend")?.backend.clone())
}

/// Frees a backend handle. Schedulers and models made with it keep the
/// backend alive until they are freed.
///
/// Threading: any thread.
///
/// Callbacks: not from inside one of Gantry's callbacks on its thread
/// (`GANTRY_ERROR_REENTRANT`, nothing done).
#[unsafe(no_mangle)]
pub extern "C" fn gantry_backend_free(backend: GantryBackend) -> GantryStatus {
    entry("gantry_backend_free", || BACKENDS.remove(backend.id).map(drop))
}

/// The backend's name into `name` (`cap` bytes, NUL-terminated; the length to
/// `len` when not null).
///
/// Threading: any thread.
///
/// Callbacks: not from inside one of Gantry's callbacks on its thread
/// (`GANTRY_ERROR_REENTRANT`, nothing done).
///
/// # Safety
/// `name` is null or valid for `cap` bytes; `len` is null or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gantry_backend_name(
    backend: GantryBackend,
    name: *mut c_char,
    cap: usize,
    len: *mut usize,
) -> GantryStatus {
    entry("gantry_backend_name", || {
        let backend = backend_of(backend)?;
        // SAFETY: the caller's contract.
        unsafe { write_string(name, cap, len, backend.name()) }
    })
}

/// Sets how many threads the backend computes with (CPU backends;
/// `GANTRY_ERROR_UNSUPPORTED` elsewhere).
///
/// Threading: any thread; computes that start later use the new count.
///
/// Callbacks: not from inside one of Gantry's callbacks on its thread
/// (`GANTRY_ERROR_REENTRANT`, nothing done).
#[unsafe(no_mangle)]
pub extern "C" fn gantry_backend_set_n_threads(backend: GantryBackend, n_threads: usize) -> GantryStatus {
    entry("gantry_backend_set_n_threads", || {
        let entry = BACKENDS.get(backend.id)?;
        let entry = lock(&entry, "backend")?;
        let set = entry.set_threads.ok_or_else(|| {
            Failure::new(
                GantryStatus::GantryErrorUnsupported,
                format!("backend {} has no thread count", entry.backend.name()),
            )
        })?;
        Ok((set.0)(entry.backend.as_ref(), n_threads)?)
    })
}

/// A callback polled between nodes of a compute; returning `true` stops it
/// (the compute then fails with `GANTRY_ERROR_ABORTED`). It runs while the
/// compute holds its scheduler, graph and context: a call into the API from
/// inside it returns `GANTRY_ERROR_REENTRANT` (only `gantry_last_error` and
/// `gantry_status_name` answer there).
pub type GantryAbortCallback = Option<unsafe extern "C" fn(user_data: *mut c_void) -> bool>;

/// The C callback and its pointer, called from whichever thread computes.
struct CAbort {
    callback: unsafe extern "C" fn(*mut c_void) -> bool,
    user_data: *mut c_void,
}

// SAFETY: `gantry_backend_set_abort_callback` documents that the callback may
// be called from any thread, concurrently, for as long as it is installed;
// the caller promises `user_data` is usable that way.
unsafe impl Send for CAbort {}
// SAFETY: as above.
unsafe impl Sync for CAbort {}

impl CAbort {
    fn poll(&self) -> bool {
        // The compute that polls holds its scheduler, graph and context:
        // calls back into the API from here are refused, not deadlocked.
        in_callback("the abort callback", || {
            // SAFETY: the caller installed a valid function with this signature
            // and promised `user_data` stays valid while it is installed.
            unsafe { (self.callback)(self.user_data) }
        })
    }
}

/// Installs `callback` (or removes it, when null) as the backend's abort
/// callback: each compute that starts later calls it before every node,
/// and stops when it returns `true`. The usual callback reads a flag another
/// thread (a frame loop) raises.
///
/// Backends without an abort hook answer `GANTRY_ERROR_UNSUPPORTED`.
///
/// Threading: any thread. The callback is called from the threads that
/// compute (not necessarily the caller's), possibly concurrently; it must be
/// quick. A call into Gantry from inside it returns `GANTRY_ERROR_REENTRANT`
/// (it could wait for the locks the compute holds) and does nothing; the
/// compute goes on. Other threads may call Gantry meanwhile, as at any time.
///
/// Callbacks: not from inside one of Gantry's callbacks on its thread
/// (`GANTRY_ERROR_REENTRANT`, nothing done).
///
/// # Safety
/// `callback` is null or a function of this signature that stays callable,
/// with `user_data`, until it is removed or the backend and everything made
/// with it are freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gantry_backend_set_abort_callback(
    backend: GantryBackend,
    callback: GantryAbortCallback,
    user_data: *mut c_void,
) -> GantryStatus {
    entry("gantry_backend_set_abort_callback", || {
        let entry = BACKENDS.get(backend.id)?;
        let entry = lock(&entry, "backend")?;
        let set = entry.set_abort.ok_or_else(|| {
            Failure::new(
                GantryStatus::GantryErrorUnsupported,
                format!("backend {} has no abort callback", entry.backend.name()),
            )
        })?;
        let hook: Option<AbortCallback> = callback.map(|callback| {
            let c = CAbort { callback, user_data };
            Arc::new(move || c.poll()) as AbortCallback
        });
        Ok((set.0)(entry.backend.as_ref(), hook)?)
    })
}
