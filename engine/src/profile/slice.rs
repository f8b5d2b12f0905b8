//! One timed interval of a profile.

use crate::Name;

/// What a [`Slice`] timed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SliceKind {
    /// A whole split on its backend (the scheduler).
    Split,
    /// An input copy into a split (the scheduler).
    Copy,
    /// Waiting for an event or a stream (the scheduler).
    EventWait,
    /// One node (a backend's node loop).
    Node,
    /// One task of a node whose work was split over several threads.
    Task,
}

impl SliceKind {
    /// A short name, for trace categories.
    pub const fn name(self) -> &'static str {
        match self {
            SliceKind::Split => "split",
            SliceKind::Copy => "copy",
            SliceKind::EventWait => "event wait",
            SliceKind::Node => "node",
            SliceKind::Task => "task",
        }
    }
}

/// One timed interval on one track: a process (the scheduler gives each of
/// its backends one, [`crate::profile::Profiler::add_process`]) and a thread
/// (numbered per OS thread, [`crate::profile::Profiler::thread`]).
#[derive(Debug, Clone, Copy)]
pub struct Slice {
    /// What was timed.
    pub kind: SliceKind,
    /// The process (backend) track.
    pub process: u16,
    /// The thread track.
    pub thread: u16,
    /// The op's name for nodes and tasks (`MUL_MAT`), the kind's otherwise.
    pub op: &'static str,
    /// The tensor's name (nodes, tasks, copies), empty for splits and waits.
    pub name: Name,
    /// The split's index, or the task's.
    pub index: u32,
    /// Start, nanoseconds since the profiler was made.
    pub start_ns: u64,
    /// End, nanoseconds since the profiler was made (never before `start_ns`).
    pub end_ns: u64,
    /// Bytes read and written ([`crate::profile::node_cost`] for nodes, the
    /// tensor's size for copies).
    pub bytes: u64,
    /// Floating-point operations (nodes).
    pub flops: u64,
}

impl Slice {
    /// Its duration in nanoseconds.
    pub fn duration_ns(&self) -> u64 {
        self.end_ns - self.start_ns
    }
}
