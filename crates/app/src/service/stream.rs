//! Token streaming: a request runs on the engine runtime while the text of
//! its live nodes goes to the caller as it is generated, then its end.
//!
//! Which nodes are live is the topology's streaming mode
//! ([`StreamMode`]): tokens go out as they come only when no output guard
//! checks LLM text after them; otherwise nothing is sent before the end,
//! whose output the caller sends as one piece.

use glassbox_engine::{CancellationToken, RunOptions};
use glassbox_trace::RequestId;
use serde_json::Value;
use tokio::sync::mpsc;

use super::ServiceError;
use super::durable::committed;
use super::{Admission, Finished};
use crate::served::StreamMode;

/// What a streamed request sends, in order: any number of `Text`, then one
/// `End` (none if the caller went away first).
#[derive(Debug)]
pub enum StreamEvent {
    /// Text a live node generated.
    Text(String),
    /// The request ended; `Ok` once its trace has committed, 503
    /// `trace_not_stored` if it could not be stored.
    End(Result<Finished, ServiceError>),
}

/// A request being streamed.
#[derive(Debug)]
pub struct Streaming {
    /// Its id, known before it runs (for headers and chunk ids).
    pub request_id: RequestId,
    /// Its events. Dropping the receiver (the client went away) cancels the
    /// run.
    pub events: mpsc::Receiver<StreamEvent>,
}

/// How many events may wait for a slow client before the run waits too.
const BUFFERED_EVENTS: usize = 64;

impl Admission {
    /// Starts the request on the engine runtime and returns at once. Live
    /// text goes out as it comes; the `End` (with durability `commit`)
    /// waits for the trace's commit. The admission is held until the run
    /// ends.
    pub fn stream(mut self, input: Value) -> Streaming {
        let request_id = RequestId::new();
        let charge = self.take_charge();
        let ticket = self.service.ticket(request_id);
        let (events, rx) = mpsc::channel::<StreamEvent>(BUFFERED_EVENTS);
        let live: Option<Vec<String>> = match &self.served.stream {
            StreamMode::Live { nodes } => Some(nodes.clone()),
            StreamMode::Buffered { .. } => None,
        };
        let service = self.service.clone();
        let kinds = self.service.clone();
        let job = async move {
            let cancel = CancellationToken::new();
            let (tok_tx, mut tok_rx) = mpsc::unbounded_channel();
            let mut options = RunOptions {
                request_id: Some(request_id),
                cancel: Some(cancel.clone()),
                tokens: live.is_some().then_some(tok_tx),
                // Only live nodes get a token stream: the engine leaves
                // the others out, so every chunk that arrives goes out.
                live_nodes: live,
                ..RunOptions::default()
            };
            self.prepare(&mut options);
            let run_limit = self.run_limit.clone();
            let pipeline = self.served.pipeline.clone();
            let run = pipeline.run(input, options);
            tokio::pin!(run);
            let mut gone = false;
            let outcome = loop {
                tokio::select! {
                    outcome = &mut run => break outcome,
                    Some(chunk) = tok_rx.recv() => {
                        if !gone {
                            gone = events.send(StreamEvent::Text(chunk.text)).await.is_err();
                            if gone { cancel.cancel(); }
                        }
                    }
                    _ = events.closed(), if !gone => {
                        gone = true;
                        cancel.cancel();
                    }
                }
            };
            drop(self);
            // Settled however the stream ended, its client gone included:
            // the tokens were generated either way.
            let finished = Finished::new(outcome, kinds.catalog.registry(), run_limit);
            if let Some(charge) = charge {
                charge.settle(&finished.usage);
            }
            if gone {
                return;
            }
            while let Ok(chunk) = tok_rx.try_recv() {
                let _ = events.send(StreamEvent::Text(chunk.text)).await;
            }
            let end = committed(ticket).await.map(|()| finished);
            let _ = events.send(StreamEvent::End(end)).await;
        };
        drop(service.engine.spawn(job));
        Streaming {
            request_id,
            events: rx,
        }
    }
}
