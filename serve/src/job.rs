//! What a route hands the engine (a [`Job`]) and what comes back ([`Event`]s
//! on the job's own channel, which the route turns into a response or a
//! stream). A route that goes away (its client disconnected) drops the
//! receiver; the engine sees the closed channel and stops the job.

use std::time::Instant;

use gantry::model::grammar::Constraint;
use tokio::sync::mpsc::UnboundedSender;

use crate::error::ApiError;
use crate::token_choice::{GenerationParams, TokenLogprobs};

/// A generation request, tokenized and checked.
#[derive(Debug)]
pub struct Job {
    /// The prompt's token ids (at least one).
    pub prompt: Vec<u32>,
    /// How tokens are chosen and when it ends.
    pub params: GenerationParams,
    /// The grammar the reply must follow (`response_format`), if any.
    pub constraint: Option<Constraint>,
    /// Where its events go.
    pub events: UnboundedSender<Event>,
    /// When the request arrived (time to first token counts from here).
    pub arrived: Instant,
    /// Past this it is stopped with an error.
    pub deadline: Instant,
}

/// Why a generation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinishReason {
    /// An end-of-generation token or a stop string.
    Stop,
    /// `max_tokens`, or the sequence's context is full.
    Length,
}

impl FinishReason {
    /// OpenAI's name for it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Stop => "stop",
            Self::Length => "length",
        }
    }
}

/// Token counts of a finished request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Tokens of the prompt.
    pub prompt_tokens: usize,
    /// Tokens generated.
    pub completion_tokens: usize,
    /// Prompt tokens whose cells were reused from an earlier request.
    pub cached_tokens: usize,
}

/// What the engine reports about a job.
#[derive(Debug, Clone)]
pub enum Event {
    /// A generated token: the text it completed (may be empty while a
    /// character or a possible stop string is held back) and its
    /// log-probabilities when asked.
    Token {
        /// Text released with this token.
        text: String,
        /// The token's log-probabilities, when the request asked for them.
        logprobs: Option<TokenLogprobs>,
    },
    /// Text released at the end without a token of its own (a held tail).
    Text(String),
    /// The end.
    Done {
        /// Why it ended.
        finish: FinishReason,
        /// Its token counts.
        usage: Usage,
    },
    /// It failed or was stopped; nothing more follows.
    Failed(ApiError),
}
