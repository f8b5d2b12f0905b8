//! Model files are read from regular files only. Opening a FIFO for reading
//! blocks until something writes to it (a CLI given one as `--model` hung),
//! and a device or a folder is never a model: each is refused, naming the
//! path, before it is opened.

use std::path::Path;

use crate::{Error, Result};

/// `Ok` when `path` (links followed) is a regular file; an error naming it
/// and what it is otherwise. Checked before the file is opened.
pub(crate) fn check_regular(path: &Path) -> Result<()> {
    match not_regular(path)? {
        None => Ok(()),
        Some(what) => Err(Error::InvalidModel {
            file: path.display().to_string(),
            reason: format!("{what}: model files are read from regular files"),
        }),
    }
}

/// What `path` (links followed) is when it is not a regular file (`"a
/// folder"`, ...), `None` when it is one: for files that are not models
/// (a chat template), whose errors say what they are.
pub(crate) fn not_regular(path: &Path) -> Result<Option<&'static str>> {
    let file = path.display().to_string();
    let meta = std::fs::metadata(path).map_err(|source| Error::Io { context: format!("opening {file}"), source })?;
    Ok(if meta.is_file() {
        None
    } else if meta.is_dir() {
        Some("a folder")
    } else {
        Some("not a regular file (a FIFO, socket or device)")
    })
}

/// The whole regular file at `path`, read into memory (`--no-mmap`), with
/// its name for errors. The memory is reserved fallibly: a file larger than
/// the memory is an error naming it, not an abort.
pub(crate) fn read_regular(path: &Path) -> Result<(String, Vec<u8>)> {
    let name = path.display().to_string();
    check_regular(path)?;
    let io = |what: &str| {
        let context = format!("{what} {name}");
        move |source| Error::Io { context, source }
    };
    let mut file = std::fs::File::open(path).map_err(io("opening"))?;
    let len = file.metadata().map_err(io("reading the size of"))?.len();
    let mut bytes = Vec::new();
    usize::try_from(len).ok().and_then(|len| bytes.try_reserve_exact(len).ok()).ok_or_else(|| Error::InvalidModel {
        file: name.clone(),
        reason: format!("{len} bytes do not fit in memory"),
    })?;
    std::io::Read::read_to_end(&mut file, &mut bytes).map_err(io("reading"))?;
    Ok((name, bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folders_and_fifos_are_refused_before_they_are_opened() {
        let scratch = tempfile::Builder::new().prefix("gantry-regular-file-").tempdir().unwrap();
        let dir = scratch.path().to_owned();
        let err = check_regular(&dir).unwrap_err().to_string();
        assert!(err.contains("a folder") && err.contains(&dir.display().to_string()), "{err}");
        let plain = dir.join("plain.gguf");
        std::fs::write(&plain, b"GGUF").unwrap();
        check_regular(&plain).unwrap();
        assert!(check_regular(&dir.join("missing.gguf")).is_err());
        #[cfg(unix)]
        {
            let fifo = dir.join("fifo.gguf");
            let made = std::process::Command::new("mkfifo").arg(&fifo).status();
            if made.is_ok_and(|s| s.success()) {
                // Opening it would block until a writer came: the check must not open it.
                let err = check_regular(&fifo).unwrap_err().to_string();
                assert!(err.contains("not a regular file"), "{err}");
                let err = crate::model::gguf::Gguf::open(&fifo).unwrap_err().to_string();
                assert!(err.contains("not a regular file"), "{err}");
            } else {
                eprintln!("skipped the FIFO case: mkfifo is not available");
            }
        }
    }
}
