//! The scheduler's side of a profile ([`crate::profile`]): a process track
//! per backend, and a stream wrapper that times the pipeline protocol's
//! waits as [`SliceKind::EventWait`] slices.

use std::sync::Arc;

use gantry_arenas::EventId;

use super::pipeline::PipelineStream;
use super::{BackendIndex, BackendSet};
use crate::profile::{BackendProfiler, Profiler, SliceKind};
use crate::{Backend, Name, Result};

/// A profiler as the scheduler holds it: the recorder and each backend's
/// process track, by backend index.
#[derive(Debug)]
pub struct SchedProfile {
    /// The recorder.
    pub profiler: Arc<Profiler>,
    processes: Vec<u16>,
}

impl SchedProfile {
    /// Installs `profiler` on every backend of `set`, each its own process
    /// track named after the backend.
    pub fn install(profiler: Arc<Profiler>, set: &BackendSet) -> Self {
        let processes = set
            .indices()
            .map(|b| {
                let backend = set.backend(b);
                let process = profiler.add_process(backend.name());
                backend.set_profiler(Some(BackendProfiler { profiler: profiler.clone(), process }));
                process
            })
            .collect();
        Self { profiler, processes }
    }

    /// Removes the profiler from every backend of `set`.
    pub fn uninstall(set: &BackendSet) {
        for b in set.indices() {
            set.backend(b).set_profiler(None);
        }
    }

    /// Backend `b`'s process track.
    pub fn process(&self, b: BackendIndex) -> u16 {
        self.processes.get(b.get()).copied().unwrap_or(0)
    }

    /// Records a slice of `kind` from `start_ns` to now on backend `b`'s track.
    pub fn record(&self, kind: SliceKind, b: BackendIndex, name: Name, index: u32, start_ns: u64, bytes: u64) {
        self.profiler.record_since(kind, self.process(b), kind.name(), name, index, start_ns, bytes, 0);
    }
}

/// A backend as the pipeline protocol sees it, its waits timed when a
/// profile is on.
pub struct ProfiledStream<'a> {
    /// The backend.
    pub backend: &'a dyn Backend,
    /// The profile and the backend's index, when one is on.
    pub profile: Option<(&'a SchedProfile, BackendIndex)>,
}

impl ProfiledStream<'_> {
    fn timed(&self, wait: impl FnOnce() -> Result<()>) -> Result<()> {
        let Some((p, b)) = self.profile else { return wait() };
        let t0 = p.profiler.now_ns();
        let r = wait();
        p.record(SliceKind::EventWait, b, Name::EMPTY, 0, t0, 0);
        r
    }
}

impl PipelineStream for ProfiledStream<'_> {
    fn stream_wait(&self, event: EventId) -> Result<()> {
        self.timed(|| self.backend.stream_wait(event))
    }
    fn stream_record(&self, event: EventId) -> Result<()> {
        self.backend.stream_record(event)
    }
    fn host_wait(&self, event: EventId) -> Result<()> {
        self.timed(|| self.backend.host_wait(event))
    }
    fn host_synchronize(&self) -> Result<()> {
        self.timed(|| self.backend.host_synchronize())
    }
}
