//! Token streaming: nodes that generate text (LLMs) send it to the caller
//! piece by piece while the request runs, for chat UIs and SSE endpoints.
//!
//! Streaming is opt-in per request ([`RunOptions::tokens`](crate::RunOptions)).
//! A chunk names its node and attempt, so a caller can tell a retried or
//! re-run generation from the first one and decide what to show: text from an
//! attempt that later failed, or that an output guard rejected, was streamed
//! already. The request's final output is always authoritative.

use std::sync::Arc;

/// One piece of generated text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenChunk {
    /// The node that generated it.
    pub node: Arc<str>,
    /// Its attempt, 1 for the first.
    pub attempt: u32,
    pub text: String,
}

/// The receiving end is the caller's; sending never blocks the request.
pub type TokenSink = tokio::sync::mpsc::UnboundedSender<TokenChunk>;

/// A node's handle for sending its text ([`NodeCx::token_stream`](crate::NodeCx::token_stream)).
#[derive(Debug, Clone)]
pub struct TokenStream {
    pub(crate) sink: TokenSink,
    pub(crate) node: Arc<str>,
    pub(crate) attempt: u32,
}

impl TokenStream {
    /// Sends one piece; returns false once the caller has stopped listening.
    pub fn send(&self, text: impl Into<String>) -> bool {
        self.sink
            .send(TokenChunk {
                node: self.node.clone(),
                attempt: self.attempt,
                text: text.into(),
            })
            .is_ok()
    }

    /// Whether the caller still listens.
    pub fn is_open(&self) -> bool {
        !self.sink.is_closed()
    }
}
