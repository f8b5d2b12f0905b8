//! A map filled on first use, from any thread: kernels compiled once per
//! key, bind groups made once per set of buffers.

use std::collections::HashMap;
use std::hash::Hash;

use crate::sync::{Mutex, lock};

/// Values made on first use and kept. The lock is held while a value is
/// made, so two threads asking for the same new key make it once (a kernel
/// compiles once), at the cost of making different keys one at a time.
#[derive(Debug)]
pub struct LazyCache<K, V>(Mutex<HashMap<K, V>>);

impl<K, V> Default for LazyCache<K, V> {
    fn default() -> Self {
        Self(Mutex::new(HashMap::new()))
    }
}

impl<K: Eq + Hash + Clone, V: Clone> LazyCache<K, V> {
    /// The value for `key`, made by `make` if there is none yet. When
    /// `make` fails nothing is kept, and the next call tries again.
    pub fn get_or_try_insert_with<E>(&self, key: &K, make: impl FnOnce() -> Result<V, E>) -> Result<V, E> {
        let mut map = lock(&self.0);
        if let Some(v) = map.get(key) {
            return Ok(v.clone());
        }
        let v = make()?;
        map.insert(key.clone(), v.clone());
        Ok(v)
    }

    /// The value for `key`, made by `make` if there is none yet.
    pub fn get_or_insert_with(&self, key: &K, make: impl FnOnce() -> V) -> V {
        self.get_or_try_insert_with(key, || Ok::<V, std::convert::Infallible>(make())).unwrap_or_else(|e| match e {})
    }

    /// Keeps only the entries for which `keep` says so.
    pub fn retain(&self, keep: impl FnMut(&K, &mut V) -> bool) {
        lock(&self.0).retain(keep);
    }

    /// The number of values kept.
    pub fn len(&self) -> usize {
        lock(&self.0).len()
    }

    /// Whether no value is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
