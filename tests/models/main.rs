//! The model layer end to end: SmolLM2, Gemma-3 and MiniLM against
//! independent engines (`tests/data`), the exact float64 forward, the
//! tokenizers, model-file errors and sizes past the limits, sessions (one
//! and many sequences, the decode worker, GPU splits), memory budgets, the
//! allocator on a llama graph, and profiles. One test binary (one link) for
//! all of them.

// Counts allocations and each thread's peak heap: the chat-template
// regressions bound a render's memory with it (`fuzz_regressions.rs`).
#[global_allocator]
static GLOBAL: gantry::engine::testing::CountingAllocator = gantry::engine::testing::CountingAllocator;

mod alloc_llama;
mod chat_templates;
mod crafted_models;
mod decode_worker;
mod experts_block;
mod family_reference;
mod fuzz_regressions;
mod gemma3_reference;
mod memory_budgets;
mod minilm_reference;
mod model_errors;
mod model_tokenizer;
mod multi_sequence;
mod profile_trace;
mod session_gpu;
mod smollm2_exact_forward;
mod smollm2_reference;
