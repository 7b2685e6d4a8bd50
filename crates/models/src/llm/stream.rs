//! A completion arriving piece by piece: the receiving end of a streamed
//! request ([`LlmHandle::stream`](super::LlmHandle::stream)).

use tokio::sync::{mpsc, oneshot};

use super::{Completion, LlmError};

/// A completion arriving piece by piece.
#[derive(Debug)]
pub struct CompletionStream {
    pub(super) tokens: mpsc::UnboundedReceiver<String>,
    pub(super) done: oneshot::Receiver<Result<Completion, LlmError>>,
}

impl CompletionStream {
    /// The next piece of text, or `None` when generation has ended.
    pub async fn next(&mut self) -> Option<String> {
        self.tokens.recv().await
    }

    /// The final completion (text, usage, finish reason). Pieces not read are
    /// skipped, not lost: they are part of [`Completion::text`].
    pub async fn finish(self) -> Result<Completion, LlmError> {
        let Self { mut tokens, done } = self;
        // Drain rather than drop: dropping the receiver would cancel generation.
        while tokens.recv().await.is_some() {}
        done.await.map_err(|_| LlmError::WorkerGone)?
    }

    /// Blocking [`next`](Self::next); not on an async runtime thread.
    pub fn next_blocking(&mut self) -> Option<String> {
        self.tokens.blocking_recv()
    }

    /// Blocking [`finish`](Self::finish); not on an async runtime thread.
    pub fn finish_blocking(self) -> Result<Completion, LlmError> {
        let Self { mut tokens, done } = self;
        while tokens.blocking_recv().is_some() {}
        done.blocking_recv().map_err(|_| LlmError::WorkerGone)?
    }
}
