//! Compiled modules, kept so each is compiled once: in memory per (source
//! hash, architecture) for the process, and on disk under the user's cache
//! folder across processes (`$GANTRY_CUDA_CACHE`, else
//! `$XDG_CACHE_HOME/gantry/cuda`, else `~/.cache/gantry/cuda`;
//! `GANTRY_CUDA_CACHE=0` keeps nothing on disk). The hash covers the whole
//! composed source, the compile options and NVRTC's version, so a changed
//! kernel or compiler never loads a stale image.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use super::kernels::Module;
use super::nvrtc::{self, Arch, Image, ImageKind};
use gantry_engine::device_state::LazyCache;

/// FNV-1a, 64 bits: stable across Rust versions and platforms (the disk
/// cache's file names depend on it), unlike `DefaultHasher`.
pub fn fnv1a(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for &b in *part {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        // A separator, so ("ab", "c") and ("a", "bc") differ.
        h ^= 0xff;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The key of a module's image: what was compiled, for which architecture.
pub fn image_key(source: &str, arch: Arch) -> Result<u64, String> {
    let (major, minor) = nvrtc::version()?;
    let options = nvrtc::OPTIONS.join(" ");
    let version = format!("nvrtc {major}.{minor}");
    Ok(fnv1a(&[source.as_bytes(), options.as_bytes(), version.as_bytes(), &arch.code().to_le_bytes()]))
}

/// The folder of the disk cache, or `None` when it is turned off.
pub fn cache_dir() -> Option<PathBuf> {
    match std::env::var_os("GANTRY_CUDA_CACHE") {
        Some(v) if v == "0" => return None,
        Some(v) if !v.is_empty() => return Some(PathBuf::from(v)),
        _ => {}
    }
    if let Some(xdg) = std::env::var_os("XDG_CACHE_HOME").filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(xdg).join("gantry/cuda"));
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/gantry/cuda"))
}

fn file_name(module: Module, key: u64, arch: Arch) -> String {
    format!("{}-{key:016x}-sm_{}.img", module.name(), arch.code())
}

/// The disk format: one byte for the kind, one for the target's major and
/// minor each, then the image.
fn encode(image: &Image) -> Vec<u8> {
    let kind = match image.kind {
        ImageKind::Cubin => 0u8,
        ImageKind::Ptx => 1u8,
    };
    let mut out = vec![kind, image.target.major as u8, image.target.minor as u8];
    out.extend_from_slice(&image.bytes);
    out
}

fn decode(bytes: &[u8]) -> Option<Image> {
    let (&[kind, major, minor], rest) = bytes.split_first_chunk::<3>()?;
    let kind = match kind {
        0 => ImageKind::Cubin,
        1 => ImageKind::Ptx,
        _ => return None,
    };
    (!rest.is_empty()).then(|| Image {
        kind,
        target: Arch::new(u32::from(major), u32::from(minor)),
        bytes: rest.to_vec(),
        log: String::new(),
    })
}

fn process_cache() -> &'static LazyCache<(u64, Arch), Arc<Image>> {
    static CACHE: OnceLock<LazyCache<(u64, Arch), Arc<Image>>> = OnceLock::new();
    CACHE.get_or_init(LazyCache::default)
}

/// The image of `module` for `arch`: from memory, from disk, or compiled
/// (and then kept in both). A disk cache that cannot be read or written is
/// passed over: it only saves time.
pub fn image(module: Module, arch: Arch) -> Result<Arc<Image>, String> {
    let source = module.source();
    let key = image_key(&source, arch)?;
    process_cache().get_or_try_insert_with(&(key, arch), || {
        let path = cache_dir().map(|d| d.join(file_name(module, key, arch)));
        if let Some(image) = path.as_ref().and_then(|p| std::fs::read(p).ok()).and_then(|b| decode(&b)) {
            return Ok(Arc::new(image));
        }
        let image = nvrtc::compile(module.name(), &source, arch)?;
        if let Some(path) = path {
            store(&path, &encode(&image));
        }
        Ok(Arc::new(image))
    })
}

/// Writes `bytes` to `path` through a temporary file and a rename, so a
/// reader never sees half an image.
fn store(path: &std::path::Path, bytes: &[u8]) {
    let Some(dir) = path.parent() else { return };
    if std::fs::create_dir_all(dir).is_err() {
        return;
    }
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    if std::fs::write(&tmp, bytes).is_ok() && std::fs::rename(&tmp, path).is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_is_fnv1a_and_separates_parts() {
        assert_ne!(fnv1a(&[b"ab", b"c"]), fnv1a(&[b"a", b"bc"]));
        assert_eq!(fnv1a(&[b"x"]), fnv1a(&[b"x"]));
        let image = Image { kind: ImageKind::Ptx, target: Arch::new(8, 6), bytes: vec![1, 2, 3], log: String::new() };
        let back = decode(&encode(&image)).unwrap();
        assert_eq!((back.kind, back.target, back.bytes), (ImageKind::Ptx, Arch::new(8, 6), vec![1, 2, 3]));
        assert!(decode(&[7, 8, 6, 1]).is_none(), "an unknown kind is not an image");
    }
}
