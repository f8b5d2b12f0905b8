//! Why a tensor went to its backend: the system (and the step in it) that
//! chose it, shown by `GANTRY_SCHED_DEBUG=2` and the Graphviz output.

/// Why a tensor went to its backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(u8)]
pub enum Cause {
    /// Not assigned.
    #[default]
    None,
    /// Pinned by the user (`Scheduler::set_tensor_backend`).
    User,
    /// assign: pre-allocated; the highest-priority backend that can use its buffer.
    Buffer,
    /// assign: a view of a pre-allocated tensor; its source's buffer decided.
    ViewBuffer,
    /// assign: a graph input; the CPU.
    Input,
    /// assign: reads weights; the weights' backend.
    Weights,
    /// assign: reads host weights, but a higher-priority backend wanted the op.
    Offload,
    /// expand: spread from a GPU neighbour (GPU assignments only).
    ExpandGpu,
    /// expand: spread from any neighbour.
    Expand,
    /// expand: unassigned; the backend supporting the most of its sources.
    MostSources,
    /// expand: moved to a higher-priority backend with the same buffer type.
    Upgrade,
    /// expand: a view; follows its view source.
    ViewSource,
    /// expand: a source; follows its consumer.
    Consumer,
    /// expand: still unassigned; the first backend supporting it.
    Fallback,
    /// expand: computed in place; moved to where its memory is, or its view
    /// source's memory moved to where it runs.
    InPlace,
}

impl Cause {
    /// A short label: the system, then the step.
    ///
    /// ```
    /// use gantry_engine::sched::Cause;
    /// assert_eq!(Cause::Weights.label(), "assign.weights");
    /// assert_eq!(Cause::InPlace.label(), "expand.in-place");
    /// ```
    pub const fn label(self) -> &'static str {
        match self {
            Cause::None => "-",
            Cause::User => "pin",
            Cause::Buffer => "assign.buffer",
            Cause::ViewBuffer => "assign.view-buffer",
            Cause::Input => "assign.input",
            Cause::Weights => "assign.weights",
            Cause::Offload => "assign.offload",
            Cause::ExpandGpu => "expand.gpu",
            Cause::Expand => "expand.any",
            Cause::MostSources => "expand.most-sources",
            Cause::Upgrade => "expand.upgrade",
            Cause::ViewSource => "expand.view-source",
            Cause::Consumer => "expand.consumer",
            Cause::Fallback => "expand.fallback",
            Cause::InPlace => "expand.in-place",
        }
    }
}
