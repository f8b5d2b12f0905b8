//! Status codes and the thread's last error message.

use std::cell::RefCell;
use std::ffi::{CString, c_char};

/// What a call returned. Every function of the C API returns one; on
/// anything but `GANTRY_OK` [`gantry_last_error`] says what went wrong.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GantryStatus {
    /// The call did what it says.
    GantryOk = 0,
    /// A null pointer, a string that is not UTF-8, a value out of range, or
    /// an op whose operands do not fit (wrong shapes, wrong dtypes).
    GantryErrorInvalidArgument = 1,
    /// A null handle, a freed handle, a handle of another kind, or a tensor
    /// that is not (or no longer) in the context.
    GantryErrorInvalidHandle = 2,
    /// Not supported by this build, device or backend.
    GantryErrorUnsupported = 3,
    /// A buffer could not be allocated, or a memory budget would be exceeded.
    GantryErrorOutOfMemory = 4,
    /// No device, backend or file of that name.
    GantryErrorNotFound = 5,
    /// A backend failed in a way none of the more precise backend codes
    /// below names (a driver call failed for another reason, a bug).
    GantryErrorBackend = 6,
    /// The call does not fit the object's state (a tensor read before it was
    /// allocated, a scheduler asked to compute what it cannot place, a
    /// scheduler given a context other than the one it is bound to).
    GantryErrorState = 7,
    /// The abort callback stopped the compute.
    GantryErrorAborted = 8,
    /// A model file could not be read or is malformed.
    GantryErrorModel = 9,
    /// The caller's buffer is too small; the size needed was written where the
    /// function says.
    GantryErrorBufferTooSmall = 10,
    /// An asynchronous compute is still running on this object.
    GantryErrorBusy = 11,
    /// A bug inside Gantry: a panic was caught at the boundary. The handle it
    /// happened on may be unusable (later calls on it return this code too).
    GantryErrorPanic = 12,
    /// The device's driver is not installed or cannot be loaded (no
    /// `libcuda.so`): use another device.
    GantryErrorDriverMissing = 13,
    /// A library the backend needs besides the driver is missing (NVRTC,
    /// cuBLAS): install it, or use another device.
    GantryErrorLibraryMissing = 14,
    /// The driver is there but no usable device is (none present, too old,
    /// busy, or it refused to open).
    GantryErrorDeviceUnavailable = 15,
    /// A kernel or shader did not compile, or its image did not load on the
    /// device.
    GantryErrorKernelCompile = 16,
    /// The device ran out of memory while working (a buffer Gantry could not
    /// allocate in the first place is `GANTRY_ERROR_OUT_OF_MEMORY`).
    GantryErrorDeviceOom = 17,
    /// The device was lost, reset or faulted: what was made on it is gone;
    /// open it again.
    GantryErrorDeviceLost = 18,
    /// The connection to a remote device failed (address, dialling, TLS, a
    /// timeout, a lost connection): objects made on it are gone.
    GantryErrorTransport = 19,
    /// A remote server answered what this client does not speak or expect
    /// (another protocol version, a reply of the wrong kind).
    GantryErrorProtocol = 20,
    /// Called from inside a callback Gantry was running on this thread (the
    /// abort callback, the token callback, a job system's `run`), where the
    /// call could wait for a lock its own thread holds: nothing was done.
    /// Only `gantry_last_error` and `gantry_status_name` may be called there.
    GantryErrorReentrant = 21,
}

impl GantryStatus {
    /// Every status, in order.
    pub const ALL: [Self; 22] = [
        Self::GantryOk,
        Self::GantryErrorInvalidArgument,
        Self::GantryErrorInvalidHandle,
        Self::GantryErrorUnsupported,
        Self::GantryErrorOutOfMemory,
        Self::GantryErrorNotFound,
        Self::GantryErrorBackend,
        Self::GantryErrorState,
        Self::GantryErrorAborted,
        Self::GantryErrorModel,
        Self::GantryErrorBufferTooSmall,
        Self::GantryErrorBusy,
        Self::GantryErrorPanic,
        Self::GantryErrorDriverMissing,
        Self::GantryErrorLibraryMissing,
        Self::GantryErrorDeviceUnavailable,
        Self::GantryErrorKernelCompile,
        Self::GantryErrorDeviceOom,
        Self::GantryErrorDeviceLost,
        Self::GantryErrorTransport,
        Self::GantryErrorProtocol,
        Self::GantryErrorReentrant,
    ];
}

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

/// Remembers `message` as this thread's last error (interior NULs become spaces).
pub(crate) fn set_last_error(message: &str) {
    let bytes: Vec<u8> = message.bytes().map(|b| if b == 0 { b' ' } else { b }).collect();
    let message = CString::new(bytes).unwrap_or_default();
    LAST_ERROR.with(|slot| *slot.borrow_mut() = message);
}

/// Clears this thread's last error.
pub(crate) fn clear_last_error() {
    LAST_ERROR.with(|slot| {
        let mut slot = slot.borrow_mut();
        if !slot.as_bytes().is_empty() {
            *slot = CString::default();
        }
    });
}

/// The message of the last call on this thread, or `""` when it succeeded.
///
/// Threading: per thread. The pointer stays valid, and the text unchanged,
/// until the next call of this API on the same thread; copy it to keep it.
/// Never null.
///
/// Callbacks: may be called from inside one of Gantry's callbacks (it takes
/// no lock).
#[unsafe(no_mangle)]
pub extern "C" fn gantry_last_error() -> *const c_char {
    LAST_ERROR.with(|slot| slot.borrow().as_ptr())
}

/// A static name of the status value `status` (`"GANTRY_ERROR_INVALID_HANDLE"`;
/// `"GANTRY_STATUS_UNKNOWN"` for a value that is none).
///
/// Threading: any thread. Never null.
///
/// Callbacks: may be called from inside one of Gantry's callbacks (it takes
/// no lock).
#[unsafe(no_mangle)]
pub extern "C" fn gantry_status_name(status: i32) -> *const c_char {
    // C may pass any integer: match on the values, not on the enum.
    let status = GantryStatus::ALL.into_iter().find(|s| *s as i32 == status);
    let name: &'static [u8] = match status {
        None => b"GANTRY_STATUS_UNKNOWN\0",
        Some(status) => match status {
            GantryStatus::GantryOk => b"GANTRY_OK\0",
            GantryStatus::GantryErrorInvalidArgument => b"GANTRY_ERROR_INVALID_ARGUMENT\0",
            GantryStatus::GantryErrorInvalidHandle => b"GANTRY_ERROR_INVALID_HANDLE\0",
            GantryStatus::GantryErrorUnsupported => b"GANTRY_ERROR_UNSUPPORTED\0",
            GantryStatus::GantryErrorOutOfMemory => b"GANTRY_ERROR_OUT_OF_MEMORY\0",
            GantryStatus::GantryErrorNotFound => b"GANTRY_ERROR_NOT_FOUND\0",
            GantryStatus::GantryErrorBackend => b"GANTRY_ERROR_BACKEND\0",
            GantryStatus::GantryErrorState => b"GANTRY_ERROR_STATE\0",
            GantryStatus::GantryErrorAborted => b"GANTRY_ERROR_ABORTED\0",
            GantryStatus::GantryErrorModel => b"GANTRY_ERROR_MODEL\0",
            GantryStatus::GantryErrorBufferTooSmall => b"GANTRY_ERROR_BUFFER_TOO_SMALL\0",
            GantryStatus::GantryErrorBusy => b"GANTRY_ERROR_BUSY\0",
            GantryStatus::GantryErrorPanic => b"GANTRY_ERROR_PANIC\0",
            GantryStatus::GantryErrorDriverMissing => b"GANTRY_ERROR_DRIVER_MISSING\0",
            GantryStatus::GantryErrorLibraryMissing => b"GANTRY_ERROR_LIBRARY_MISSING\0",
            GantryStatus::GantryErrorDeviceUnavailable => b"GANTRY_ERROR_DEVICE_UNAVAILABLE\0",
            GantryStatus::GantryErrorKernelCompile => b"GANTRY_ERROR_KERNEL_COMPILE\0",
            GantryStatus::GantryErrorDeviceOom => b"GANTRY_ERROR_DEVICE_OOM\0",
            GantryStatus::GantryErrorDeviceLost => b"GANTRY_ERROR_DEVICE_LOST\0",
            GantryStatus::GantryErrorTransport => b"GANTRY_ERROR_TRANSPORT\0",
            GantryStatus::GantryErrorProtocol => b"GANTRY_ERROR_PROTOCOL\0",
            GantryStatus::GantryErrorReentrant => b"GANTRY_ERROR_REENTRANT\0",
        },
    };
    name.as_ptr().cast()
}
