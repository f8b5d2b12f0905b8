//! The engine on its own: op builders' shapes and errors, graph order, the
//! allocator's liveness, and random graphs through the scheduler with mock
//! devices. One test binary (one link) for all of them.

mod alloc_liveness;
mod errors;
mod graph_order;
mod op_shapes;
mod random_graphs;
