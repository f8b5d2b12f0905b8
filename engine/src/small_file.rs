//! Reading the small side files a program is pointed at (certificates, keys,
//! schemas): only a regular file, and only up to a bound. A FIFO would block
//! the read for ever, and `/dev/zero` or a huge file would take the
//! machine's memory; both are refused with an error saying which.

use std::io::{Error, ErrorKind, Read};
use std::path::Path;

/// The whole regular file at `path` (links followed), refused when it is
/// not a regular file or holds more than `max` bytes. The error says which,
/// for the caller to name the file and what it was read for.
///
/// ```
/// let dir = std::env::temp_dir().join(format!("gantry-small-file-doc-{}", std::process::id()));
/// std::fs::create_dir_all(&dir).unwrap();
/// let path = dir.join("ca.pem");
/// std::fs::write(&path, b"12345").unwrap();
/// assert_eq!(gantry_engine::read_small_file(&path, 5).unwrap(), b"12345");
/// assert!(gantry_engine::read_small_file(&path, 4).unwrap_err().to_string().contains("more than 4 bytes"));
/// assert!(gantry_engine::read_small_file(&dir, 4).unwrap_err().to_string().contains("a folder"));
/// std::fs::remove_dir_all(&dir).unwrap();
/// ```
pub fn read_small_file(path: &Path, max: u64) -> std::io::Result<Vec<u8>> {
    let meta = std::fs::metadata(path)?;
    if !meta.is_file() {
        let what = if meta.is_dir() { "a folder" } else { "not a regular file (a FIFO, socket or device)" };
        return Err(Error::new(ErrorKind::InvalidInput, what));
    }
    let file = std::fs::File::open(path)?;
    let mut bytes = Vec::new();
    // `take`: a file that grows after the check is still cut at the bound.
    file.take(max.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(Error::new(ErrorKind::InvalidInput, format!("more than {max} bytes")));
    }
    Ok(bytes)
}
