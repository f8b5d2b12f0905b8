//! Writing `--out` files of little-endian f32 (`logits`, `embed`) without a
//! second copy of the values, and never over the model being read (nor
//! `bench --trace`'s trace).

use std::io::Write;
use std::path::Path;

use gantry::Error;

/// Writes `values` to `out` as little-endian f32, refusing when `out` is (or
/// links to) one of `inputs` — the model file, or a file of the model's
/// folder — which the write would truncate while it is mapped.
pub fn write_f32_file(out: &Path, values: &[f32], inputs: &[&Path]) -> Result<(), Error> {
    refuse_inputs_as_output("--out", out, inputs)?;
    let mut file = std::io::BufWriter::new(std::fs::File::create(out).map_err(|e| io(out, e))?);
    for v in values {
        file.write_all(&v.to_le_bytes()).map_err(|e| io(out, e))?;
    }
    file.flush().map_err(|e| io(out, e))
}

fn io(out: &Path, source: std::io::Error) -> Error {
    Error::Io { context: format!("writing {}", out.display()), source }
}

/// `Err` when `out` (given as `flag`) exists and is (or links to, by a
/// symbolic or a hard link) one of `inputs`, or a file of an input that is
/// a folder: checked before the work, so that a long compute does not end
/// in that error.
pub fn refuse_inputs_as_output(flag: &str, out: &Path, inputs: &[&Path]) -> Result<(), Error> {
    if let Ok(target) = out.canonicalize() {
        for input in inputs {
            let is_input = input.canonicalize().is_ok_and(|i| {
                i == target
                    || (i.is_dir() && target.parent() == Some(&i))
                    || same_file(&i, &target)
                    || (i.is_dir()
                        && std::fs::read_dir(&i)
                            .is_ok_and(|mut d| d.any(|e| e.is_ok_and(|e| same_file(&e.path(), &target)))))
            });
            if is_input {
                return Err(Error::Model(format!(
                    "{flag} {} is {} the model reads: writing it would destroy the model",
                    out.display(),
                    if input.is_dir() { "a file of the folder" } else { "the file" }
                )));
            }
        }
    }
    Ok(())
}

/// Whether `a` and `b` are one file under two names (a hard link).
#[cfg(unix)]
fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(a), Ok(b)) => a.is_file() && a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

#[cfg(not(unix))]
fn same_file(_: &Path, _: &Path) -> bool {
    false
}
