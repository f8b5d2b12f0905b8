//! Reading and writing through the caller's pointers, each checked for null
//! first. The caller's promise (valid for the length given) is the `# Safety`
//! section of every exported function.

use std::ffi::{CStr, c_char};

use crate::entry::{CallResult, Failure};
use crate::status::GantryStatus;

/// Fails unless `p` is non-null and aligned for `T` (a misaligned pointer
/// is undefined behaviour to read or write through, and aborts the process
/// in a debug build: it is refused instead).
fn check_ptr<T>(p: *const T, what: &str) -> CallResult {
    if p.is_null() {
        return Err(Failure::invalid(format!("{what} is a null pointer")));
    }
    if !p.is_aligned() {
        return Err(Failure::invalid(format!(
            "{what} ({p:p}) is not aligned to the {} bytes its type needs",
            align_of::<T>()
        )));
    }
    Ok(())
}

/// Fails unless `n` values of `T` fit in one allocation (`isize::MAX`
/// bytes): a larger length from C cannot be a real array, and would be
/// undefined behaviour to make a slice of.
fn check_len<T>(n: usize, what: &str) -> CallResult {
    match n.checked_mul(size_of::<T>()) {
        Some(bytes) if bytes <= isize::MAX as usize => Ok(()),
        _ => Err(Failure::invalid(format!(
            "{what} has length {n}: {n} values of {} bytes cannot be one array",
            size_of::<T>()
        ))),
    }
}

/// The value at `p` (null is an error).
///
/// # Safety
/// `p` is null or valid for a read of one `T`.
pub(crate) unsafe fn read_in<T: Copy>(p: *const T, what: &str) -> Result<T, Failure> {
    check_ptr(p, what)?;
    // SAFETY: non-null and aligned (checked), readable by the caller's contract.
    Ok(unsafe { p.read() })
}

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
    check_len::<T>(n, what)?;
    check_ptr(p, what)?;
    // SAFETY: non-null and aligned (checked), `n` values fit one allocation
    // (checked), and valid for `n` reads by the caller's contract.
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
    check_len::<T>(n, what)?;
    check_ptr(p.cast_const(), what)?;
    // SAFETY: non-null and aligned (checked), `n` values fit one allocation
    // (checked), and valid and exclusive for `n` values by the caller's contract.
    Ok(unsafe { std::slice::from_raw_parts_mut(p, n) })
}

/// Writes `value` to `*p`.
///
/// # Safety
/// `p` is null or valid for a write of one `T`.
pub(crate) unsafe fn write_out<T>(p: *mut T, value: T, what: &str) -> CallResult {
    check_ptr(p.cast_const(), what)?;
    // SAFETY: non-null and aligned (checked), writable by the caller's
    // contract; `T` is a plain C value.
    unsafe { p.write(value) };
    Ok(())
}

/// Writes `s` NUL-terminated into `buf` (`cap` bytes) and its length (without
/// the NUL) to `len_out` when that is not null. A `buf` too small (or null
/// with `cap` 0, a size query) gets nothing and the call fails with
/// `GANTRY_ERROR_BUFFER_TOO_SMALL`, having written the length, so the caller
/// can ask again; a null `buf` with a `cap` above 0 is
/// `GANTRY_ERROR_INVALID_ARGUMENT`.
///
/// # Safety
/// `buf` is null or valid for `cap` bytes of writes; `len_out` is null or
/// valid for one write.
pub(crate) unsafe fn write_string(buf: *mut c_char, cap: usize, len_out: *mut usize, s: &str) -> CallResult {
    if !len_out.is_null() {
        // SAFETY: the caller's contract (non-null: valid for one write).
        unsafe { write_out(len_out, s.len(), "len")? };
    }
    if buf.is_null() && cap > 0 {
        // A size query is a null buffer of no bytes; one that claims bytes is a mistake.
        return Err(Failure::invalid(format!("buf is a null pointer (length {cap})")));
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
