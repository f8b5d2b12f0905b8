//! CUDA graph plans: the graph planned into launches and its scratch
//! resolved once at create time; the first compute captures the launches
//! into a CUDA graph (where graphs are on and the capture works) and every
//! compute after replays it, one launch instead of one per kernel. A
//! context changed since, or a scratch buffer replaced by another compute,
//! plans the launches again (and captures again).

use gantry_engine::{Context, Graph, PlannedNodes};

use super::backend::GraphExec;
use super::launch::Launch;

/// One planned graph on a CUDA stream.
pub(crate) struct CudaPlan {
    pub nodes: PlannedNodes,
    pub launches: Vec<Launch>,
    /// The stream's scratch buffer the launches were resolved against.
    pub scratch_generation: u64,
    /// The captured graph, once captured.
    pub exec: Option<GraphExec>,
    /// A capture failed: launch directly until planned again.
    pub uncapturable: bool,
}

impl CudaPlan {
    /// A plan of `graph`'s nodes, not yet planned into launches.
    pub fn new(ctx: &Context, graph: Graph<'_>) -> Self {
        Self {
            nodes: PlannedNodes::new(ctx, graph),
            launches: Vec::new(),
            scratch_generation: 0,
            exec: None,
            uncapturable: false,
        }
    }
}
