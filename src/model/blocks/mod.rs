//! The building blocks every model family is made of, written once:
//! normalizations ([`norm`]), projections with optional biases
//! ([`linear`](mod@linear)), rotary position embeddings ([`rope`]), attention over keys
//! and values with a mask ([`attention`]) and the masks themselves
//! ([`mask`]), and feed-forward networks, dense ([`feed_forward`](mod@feed_forward)) or a
//! mixture of experts ([`experts`](mod@experts)). A family module
//! (`llama`, `gemma3`, `bert`) chooses among them by configuration.

pub mod attention;
pub mod experts;
pub mod feed_forward;
pub mod linear;
pub mod mask;
pub mod norm;
pub mod rope;

pub use attention::{Attention, AttentionSpec, attend};
pub use experts::{ExpertActivation, Experts, ExpertsSpec, Gating, experts};
pub use feed_forward::{FeedForward, FeedForwardKind, feed_forward};
pub use linear::linear;
pub use mask::{MaskRule, mask_value};
pub use norm::{Norm, NormKind, normalize};
pub use rope::RopeSpec;
