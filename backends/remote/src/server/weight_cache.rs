//! The server's weight cache: runs of bytes it already holds (the tensors of
//! model files on its disk), named by their SHA-256, so a client loading the
//! same model binds them here instead of sending them.

use std::collections::HashMap;

use gantry_engine::{Error, HostMemory, Result};

use crate::wire::{DIGEST_BYTES, content_digest};

/// One cached run of bytes: a range of read-only memory kept alive by its owner.
struct Entry {
    memory: HostMemory,
    offset: usize,
    len: usize,
}

/// Read-only byte runs by digest. Built before the server starts (`gantry
/// rpc-server --weights DIR` indexes every tensor of the GGUF files in DIR).
#[derive(Default)]
pub struct WeightCache {
    entries: HashMap<[u8; DIGEST_BYTES], Entry>,
    bytes: usize,
}

impl std::fmt::Debug for WeightCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WeightCache").field("entries", &self.entries.len()).field("bytes", &self.bytes).finish()
    }
}

impl WeightCache {
    /// An empty cache (a server without one answers every lookup "not here").
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds the `len` bytes at `offset` of `memory` under their digest (hashing
    /// them now). The memory must be read-only: cached bytes never change.
    pub fn insert(&mut self, memory: &HostMemory, offset: usize, len: usize) -> Result<[u8; DIGEST_BYTES]> {
        if memory.is_writable() {
            return Err(Error::Unsupported("the weight cache holds read-only memory only".into()));
        }
        gantry_engine::check_range("weight cache", memory.len(), offset, len)?;
        let entry = Entry { memory: memory.clone(), offset, len };
        let digest = content_digest(entry.bytes());
        if self.entries.insert(digest, entry).is_none() {
            self.bytes += len;
        }
        Ok(digest)
    }

    /// The bytes named by `digest`, if held.
    pub fn get(&self, digest: &[u8; DIGEST_BYTES]) -> Option<&[u8]> {
        self.entries.get(digest).map(Entry::bytes)
    }

    /// Number of distinct runs held.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

impl Entry {
    fn bytes(&self) -> &[u8] {
        // SAFETY: the range was checked against the memory's length when the
        // entry was made; the memory is read-only (checked) and stays mapped
        // while `self.memory` holds its owner.
        unsafe { std::slice::from_raw_parts(self.memory.as_ptr().add(self.offset), self.len) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn runs_are_found_by_their_digest_only() {
        let file = Arc::new((0u8..=255).cycle().take(4096).collect::<Vec<u8>>());
        let memory = HostMemory::read_only(file.clone());
        let mut cache = WeightCache::new();
        let d = cache.insert(&memory, 100, 1000).unwrap();
        assert_eq!(d, content_digest(&file[100..1100]));
        assert_eq!(cache.get(&d).unwrap(), &file[100..1100]);
        assert!(cache.get(&content_digest(&file[101..1101])).is_none());
        assert!(cache.insert(&memory, 4000, 200).is_err(), "past the end");
        assert_eq!((cache.len(), cache.bytes()), (1, 1000));
    }
}
