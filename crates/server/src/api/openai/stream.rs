//! A streamed chat completion: the request service's events as
//! `chat.completion.chunk` server-sent events.
//!
//! Order: a first chunk with the assistant role; each live text as a
//! `delta`; at the end (once the trace has committed, with durability
//! `commit`) the buffered answer if nothing was streamed, a `stop` chunk,
//! `usage` when asked for, and `[DONE]`. A failed run or a trace that
//! cannot be stored ends with an error event and `[DONE]` instead. The
//! client going away drops the service's receiver, which cancels the run.
//!
//! **Progress.** Whenever a second passes with nothing to send (the call
//! waits for a slot, for the engine's queue, or prefills a long prompt),
//! a comment goes out saying what the local engines are doing
//! (`: queued: 2 running, 3 waiting`). SSE clients ignore comments; a
//! cluster coordinator reads them as a sign of life, so its
//! `attempt_timeout` measures the silence of a dead or hung worker, never
//! the length of a queue (docs/cluster.md, "Slow is not dead").

use std::collections::VecDeque;
use std::convert::Infallible;
use std::time::Duration;

use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::usage::Usage;
use super::{answer_text, now_secs};
use crate::api::request_id_header;
use crate::error::ApiError;
use crate::service::{Finished, StreamEvent, Streaming};

/// The chunks of one completion: its id, model and creation time.
pub(crate) struct Chunks {
    pub(crate) id: String,
    pub(crate) model: String,
    pub(crate) created: u64,
}

impl Chunks {
    pub(crate) fn delta(&self, delta: Value, finish: Option<&str>) -> Event {
        Event::default().data(
            json!({
                "id": self.id,
                "object": "chat.completion.chunk",
                "created": self.created,
                "model": self.model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            })
            .to_string(),
        )
    }

    pub(crate) fn usage(&self, usage: Usage) -> Event {
        Event::default().data(
            json!({
                "id": self.id,
                "object": "chat.completion.chunk",
                "created": self.created,
                "model": self.model,
                "choices": [],
                "usage": usage,
            })
            .to_string(),
        )
    }

    /// What ends the stream after `finished`; `streamed` is the live text
    /// already sent.
    fn closing(&self, finished: &Finished, streamed: &str, include_usage: bool) -> Vec<Event> {
        let outcome = &finished.outcome;
        let mut events = Vec::new();
        match &outcome.result {
            Ok(output) => {
                // Buffered topologies send their final output here; so does a
                // live one whose LLM produced nothing (a fallback answered).
                if let Some(calls) = super::tools::tool_calls(output) {
                    events.push(self.delta(super::tools::delta(calls), None));
                    events.push(self.delta(json!({}), Some("tool_calls")));
                } else {
                    if streamed.is_empty() {
                        events.push(self.delta(json!({"content": answer_text(output)}), None));
                    }
                    events.push(self.delta(json!({}), Some("stop")));
                }
                if include_usage {
                    events.push(self.usage(Usage::from(finished.usage)));
                }
            }
            Err(err) => {
                let body = super::finished_failed(finished, err).body();
                events.push(Event::default().data(json!(body).to_string()));
            }
        }
        events.push(done());
        events
    }
}

pub(crate) fn done() -> Event {
    Event::default().data("[DONE]")
}

/// How long a stream may stay quiet before a progress comment goes out.
pub const PROGRESS_EVERY: Duration = Duration::from_secs(1);

/// A progress comment: what this process's LLM engines are doing now.
pub(crate) fn progress() -> Event {
    let loads = glassbox_nodes::model_cache::global().llm_loads();
    if loads.is_empty() {
        // No local engine (a coordinator): the run is on its way.
        return Event::default().comment("working");
    }
    let running: usize = loads.iter().map(|(_, l)| l.running).sum();
    let waiting: usize = loads.iter().map(|(_, l)| l.waiting).sum();
    Event::default().comment(format!("queued: {running} running, {waiting} waiting"))
}

/// Where a stream is: the chunks still to send before reading the next
/// event, and whether the end has been read.
struct Progress {
    streaming: Streaming,
    chunks: Chunks,
    include_usage: bool,
    streamed: String,
    pending: VecDeque<Event>,
    ended: bool,
}

impl Progress {
    async fn next(mut self) -> Option<(Result<Event, Infallible>, Progress)> {
        loop {
            if let Some(event) = self.pending.pop_front() {
                return Some((Ok(event), self));
            }
            if self.ended {
                return None;
            }
            // `recv` is cancel-safe: a timeout loses no event.
            let next = tokio::time::timeout(PROGRESS_EVERY, self.streaming.events.recv()).await;
            let Ok(next) = next else {
                return Some((Ok(progress()), self));
            };
            match next? {
                StreamEvent::Text(text) => {
                    let event = self.chunks.delta(json!({"content": text}), None);
                    self.streamed.push_str(&text);
                    return Some((Ok(event), self));
                }
                StreamEvent::End(Ok(finished)) => {
                    self.ended = true;
                    self.pending = self
                        .chunks
                        .closing(&finished, &self.streamed, self.include_usage)
                        .into();
                }
                StreamEvent::End(Err(e)) => {
                    self.ended = true;
                    self.pending = [
                        Event::default().data(json!(ApiError::from(e).body()).to_string()),
                        done(),
                    ]
                    .into();
                }
            }
        }
    }
}

/// The SSE answer of a streamed chat completion of `model`.
pub fn sse(streaming: Streaming, model: String, include_usage: bool) -> Response {
    let rid = streaming.request_id;
    let chunks = Chunks {
        id: format!("chatcmpl-{rid}"),
        model,
        created: now_secs(),
    };
    let first = chunks.delta(json!({"role": "assistant", "content": ""}), None);
    let progress = Progress {
        streaming,
        chunks,
        include_usage,
        streamed: String::new(),
        pending: VecDeque::from([first]),
        ended: false,
    };
    let body = futures_util::stream::unfold(progress, Progress::next);
    // Comments every 15 s keep proxies from closing a quiet (buffered) stream.
    let mut r = Sse::new(body)
        .keep_alive(KeepAlive::default())
        .into_response();
    request_id_header(&mut r, &rid.to_string());
    r
}
