//! Reading and writing through the caller's pointers, each checked for null
//! first. The caller's promise (valid for the length given) is the `# Safety`
//! section of every exported function.

use std::ffi::{CStr, c_char};

use crate::entry::{CallResult, Failure};
use crate::status::GantryStatus;

/// The NUL-terminated UTF-8 string at `p`.
///
/// # Safety
/// `p` is null or points to a NUL-terminated string that outlives `'a`.
pub(crate) unsafe fn read_str<'a>(p: *const c_char, what: &str) -> Result<&'a str, Failure> {
    if p.is_null() {
        return Err(Failure::invalid(format!("{what} is a null pointer")));
    }
    // SAFETY: non-null, and NUL-terminated by the caller's contract.
    let s = unsafe { CStr::from_ptr(p) };
    s.to_str().map_err(|_| Failure::invalid(format!("{what} is not UTF-8")))
}

/// The `n` values at `p` (null is allowed when `n` is 0).
///
/// # Safety
/// `p` is null or valid for reads of `n` values of `T` for `'a`.
pub(crate) unsafe fn slice<'a, T>(p: *const T, n: usize, what: &str) -> Result<&'a [T], Failure> {
    if n == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(Failure::invalid(format!("{what} is a null pointer (length {n})")));
    }
    // SAFETY: non-null, and valid for `n` reads by the caller's contract.
    Ok(unsafe { std::slice::from_raw_parts(p, n) })
}

/// The `n` writable values at `p` (null is allowed when `n` is 0).
///
/// # Safety
/// `p` is null or valid for writes of `n` values of `T` for `'a`, and not
/// read or written by anything else meanwhile.
pub(crate) unsafe fn slice_mut<'a, T>(p: *mut T, n: usize, what: &str) -> Result<&'a mut [T], Failure> {
    if n == 0 {
        return Ok(&mut []);
    }
    if p.is_null() {
        return Err(Failure::invalid(format!("{what} is a null pointer (length {n})")));
    }
    // SAFETY: non-null, and valid and exclusive for `n` values by the caller's contract.
    Ok(unsafe { std::slice::from_raw_parts_mut(p, n) })
}

/// Writes `value` to `*p`.
///
/// # Safety
/// `p` is null or valid for a write of one `T`.
pub(crate) unsafe fn write_out<T>(p: *mut T, value: T, what: &str) -> CallResult {
    if p.is_null() {
        return Err(Failure::invalid(format!("{what} is a null pointer")));
    }
    // SAFETY: non-null and writable by the caller's contract; `T` is a plain C value.
    unsafe { p.write(value) };
    Ok(())
}

/// Writes `s` NUL-terminated into `buf` (`cap` bytes) and its length (without
/// the NUL) to `len_out` when that is not null. A `buf` too small (or null)
/// gets nothing and the call fails with `GANTRY_ERROR_BUFFER_TOO_SMALL`,
/// having written the length, so the caller can ask again.
///
/// # Safety
/// `buf` is null or valid for `cap` bytes of writes; `len_out` is null or
/// valid for one write.
pub(crate) unsafe fn write_string(buf: *mut c_char, cap: usize, len_out: *mut usize, s: &str) -> CallResult {
    if !len_out.is_null() {
        // SAFETY: non-null and writable by the caller's contract.
        unsafe { len_out.write(s.len()) };
    }
    if buf.is_null() || cap < s.len() + 1 {
        return Err(Failure::new(
            GantryStatus::GantryErrorBufferTooSmall,
            format!("the string needs {} bytes with its NUL, the buffer has {cap}", s.len() + 1),
        ));
    }
    // SAFETY: `buf` holds at least `s.len() + 1` bytes (checked above) and
    // does not overlap `s`, which Gantry owns.
    unsafe {
        std::ptr::copy_nonoverlapping(s.as_ptr(), buf.cast::<u8>(), s.len());
        buf.add(s.len()).write(0);
    }
    Ok(())
}
