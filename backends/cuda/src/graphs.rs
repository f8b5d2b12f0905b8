//! CUDA graphs: a split whose plan (its launches, bit for bit) is seen twice
//! unchanged is captured into a CUDA graph on the second run and replayed
//! from then on, one launch instead of one per kernel. A changed plan is a
//! new entry and is captured again once it repeats; the least recently used
//! entries make room. `GANTRY_CUDA_GRAPHS=0` turns graphs off.
//!
//! The cache is generic over the captured object so its rules are tested
//! without a GPU.

use super::launch::Launch;

/// Plans remembered per backend (a model's splits on one GPU, a few shapes).
pub const GRAPH_CACHE_ENTRIES: usize = 16;

/// Whether CUDA graphs are on (`GANTRY_CUDA_GRAPHS`, default on), read by
/// `CudaBackend::new` once per backend.
pub fn graphs_enabled() -> bool {
    !matches!(std::env::var("GANTRY_CUDA_GRAPHS").as_deref(), Ok("0") | Ok("off") | Ok("false"))
}

struct Entry<E> {
    launches: Vec<Launch>,
    seen: u32,
    exec: Option<E>,
    /// A capture failed: run this plan directly from now on.
    uncapturable: bool,
    last_used: u64,
}

/// What to do with a plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GraphAction {
    /// Launch it kernel by kernel.
    Direct,
    /// Capture it into entry `i` (it was seen before, unchanged), then replay.
    Capture(usize),
    /// Replay entry `i`'s graph.
    Replay(usize),
}

/// The plans of one backend with their captured graphs.
pub struct GraphCache<E> {
    entries: Vec<Entry<E>>,
    enabled: bool,
    clock: u64,
}

impl<E> GraphCache<E> {
    /// An empty cache; `enabled: false` always answers [`GraphAction::Direct`].
    pub fn new(enabled: bool) -> Self {
        Self { entries: Vec::new(), enabled, clock: 0 }
    }

    /// Decides how to run `launches` and remembers it. Steady state (a plan
    /// seen before) allocates nothing.
    pub fn action(&mut self, launches: &[Launch]) -> GraphAction {
        if !self.enabled || launches.is_empty() {
            return GraphAction::Direct;
        }
        self.clock += 1;
        if let Some(i) = self.entries.iter().position(|e| e.launches.as_slice() == launches) {
            let e = &mut self.entries[i];
            e.seen = e.seen.saturating_add(1);
            e.last_used = self.clock;
            return match (&e.exec, e.uncapturable) {
                (Some(_), _) => GraphAction::Replay(i),
                (None, true) => GraphAction::Direct,
                (None, false) => GraphAction::Capture(i),
            };
        }
        let entry =
            Entry { launches: launches.to_vec(), seen: 1, exec: None, uncapturable: false, last_used: self.clock };
        if self.entries.len() < GRAPH_CACHE_ENTRIES {
            self.entries.push(entry);
        } else if let Some(oldest) = self.entries.iter_mut().min_by_key(|e| e.last_used) {
            *oldest = entry;
        }
        GraphAction::Direct
    }

    /// The graph of entry `i`, when captured.
    pub fn exec(&self, i: usize) -> Option<&E> {
        self.entries.get(i).and_then(|e| e.exec.as_ref())
    }

    /// Stores entry `i`'s captured graph, or marks it as not capturable.
    pub fn captured(&mut self, i: usize, exec: Option<E>) {
        if let Some(e) = self.entries.get_mut(i) {
            e.uncapturable = exec.is_none();
            e.exec = exec;
        }
    }

    /// Number of captured graphs.
    pub fn captured_count(&self) -> usize {
        self.entries.iter().filter(|e| e.exec.is_some()).count()
    }

    /// Forgets every plan and graph (a scratch buffer they use is replaced).
    pub fn clear(&mut self) {
        self.entries.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(bytes: u64) -> Vec<Launch> {
        vec![Launch::CopyBytes { dst: 0x1000, src: 0x2000, bytes }]
    }

    #[test]
    fn seen_twice_unchanged_is_captured_then_replayed() {
        let mut cache = GraphCache::<&str>::new(true);
        assert_eq!(cache.action(&plan(4)), GraphAction::Direct, "first sight runs directly");
        assert_eq!(cache.action(&plan(4)), GraphAction::Capture(0), "second sight captures");
        cache.captured(0, Some("graph"));
        assert_eq!(cache.action(&plan(4)), GraphAction::Replay(0));
        assert_eq!(cache.exec(0), Some(&"graph"));
        // A changed plan is new: direct, then captured into its own entry.
        assert_eq!(cache.action(&plan(8)), GraphAction::Direct);
        assert_eq!(cache.action(&plan(8)), GraphAction::Capture(1));
        cache.captured(1, None);
        assert_eq!(cache.action(&plan(8)), GraphAction::Direct, "a failed capture is not retried");
        assert_eq!(cache.action(&plan(4)), GraphAction::Replay(0), "the first plan's graph is kept");
        assert_eq!(cache.captured_count(), 1);
    }

    #[test]
    fn off_means_direct_and_old_entries_make_room() {
        let mut off = GraphCache::<()>::new(false);
        for _ in 0..3 {
            assert_eq!(off.action(&plan(4)), GraphAction::Direct);
        }
        let mut cache = GraphCache::<u64>::new(true);
        for b in 0..GRAPH_CACHE_ENTRIES as u64 {
            cache.action(&plan(b));
            cache.action(&plan(b));
            cache.captured(b as usize, Some(b));
        }
        cache.action(&plan(0)); // plan 0 is used again: plan 1 is now the oldest
        cache.action(&plan(999));
        assert_eq!(cache.action(&plan(0)), GraphAction::Replay(0));
        assert_eq!(cache.action(&plan(1)), GraphAction::Direct, "plan 1 was evicted");
    }
}
