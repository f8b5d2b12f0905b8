//! Read-only mappings of files: how model weights reach the CPU backend's
//! buffers over caller memory without a copy. The one `unsafe` step of
//! reading a model file lives here, so the model layer needs none.

use std::fs::File;

use memmap2::Mmap;

/// Maps `file` read-only and private to this process.
///
/// As with any memory map, the file must not be truncated or rewritten
/// while the mapping is in use: that would change the bytes a reader sees
/// (or end the process with a bus error on a truncated page), which is why
/// readers copy every metadata value out before use and treat tensor bytes
/// as untrusted input.
pub fn map_read_only(file: &File) -> std::io::Result<Mmap> {
    // SAFETY: the map is read-only and private; the caveat of a file changed
    // underneath is the documented contract above.
    unsafe { Mmap::map(file) }
}
