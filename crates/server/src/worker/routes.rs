//! The worker's handlers: OpenAI-compatible chat completions and
//! embeddings of its models, translated to and from the model door's
//! calls ([`glassbox_app::models::door`]), and what a coordinator, an
//! attached reader and an orchestrator read (`/v1/models`, `/metrics`,
//! `/health`, `/readyz`).
//!
//! A coordinator's call carries how long it may wait to start
//! (`glassbox_nodes::cluster::START_WITHIN_HEADER`) and may carry a band
//! (`X-Glassbox-Priority`, a body's `priority`); the door refuses at once
//! what it cannot start in time, and its refusals are the request
//! service's 429s with `Retry-After`. A streamed call is paced for its
//! reader (chunked prefill) unless its caller says nobody reads it live
//! (`WATCHED_HEADER`; the coordinator does not, see
//! `glassbox_nodes::cluster::call`); a call without `stream` never is.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::atomic::Ordering;

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use glassbox_app::models::door::{Admit, ChatAsk, ChatCall};
use glassbox_nodes::cluster::WATCHED_HEADER;
use serde::Deserialize;
use serde_json::{Value, json};

use super::state::WorkerState;
use crate::api::body::JsonBody;
use crate::api::openai::chat::{
    ChatMessage, Sampling, StreamOptions, check_sampling, content_text,
};
use crate::api::openai::stream::{Chunks, PROGRESS_EVERY, done, progress};
use crate::api::openai::usage::Usage;
use crate::error::ApiError;

/// A chat completion asked of a worker: a coordinator's call (`model`,
/// `messages`, sampling) or any OpenAI client's; other fields are ignored.
#[derive(Debug, Clone, Deserialize)]
pub struct WorkerChat {
    /// A model this worker serves.
    pub model: String,
    pub messages: Vec<ChatMessage>,
    #[serde(default)]
    pub stream: bool,
    #[serde(default)]
    pub stream_options: Option<StreamOptions>,
    #[serde(default)]
    pub max_tokens: Option<u64>,
    #[serde(default)]
    pub max_completion_tokens: Option<u64>,
    #[serde(default)]
    pub temperature: Option<f64>,
    #[serde(default)]
    pub top_p: Option<f64>,
    #[serde(default)]
    pub seed: Option<u64>,
    /// A string or a list of strings.
    #[serde(default)]
    pub stop: Option<Value>,
    #[serde(default)]
    pub priority: Option<Value>,
    #[serde(default)]
    pub service_tier: Option<String>,
}

/// Embeddings asked of a worker: `input` is a string or a list of them.
#[derive(Debug, Clone, Deserialize)]
pub struct WorkerEmbed {
    pub model: String,
    pub input: Value,
    #[serde(default)]
    pub priority: Option<Value>,
}

/// The band and start deadline a call asks for.
fn admit(
    headers: &HeaderMap,
    priority: Option<&Value>,
    tier: Option<&str>,
) -> Result<Admit, ApiError> {
    let asked = crate::service::priority::asked(headers, priority, tier)?;
    Ok(Admit {
        priority: asked.unwrap_or_default(),
        start_within: crate::service::start::within(headers),
    })
}

/// Whether someone reads a call's text as it comes: a stream, unless its
/// caller says with [`WATCHED_HEADER`] that it only relays the pieces to
/// one that reads the answer whole.
fn watched(headers: &HeaderMap, req: &WorkerChat) -> bool {
    req.stream
        && !headers
            .get(WATCHED_HEADER)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("false"))
}

/// The domain call a chat request is.
fn chat_ask(req: &WorkerChat, watched: bool) -> Result<ChatAsk, ApiError> {
    check_sampling(&Sampling {
        max_tokens: req.max_completion_tokens.or(req.max_tokens),
        temperature: req.temperature,
        top_p: req.top_p,
        ..Sampling::default()
    })?;
    let messages = req
        .messages
        .iter()
        .map(|m| {
            let text = content_text(&m.content).unwrap_or_default();
            (m.role.clone(), text)
        })
        .collect();
    let stop = match &req.stop {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(a)) => a
            .iter()
            .map(|v| v.as_str().map(str::to_owned))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| {
                ApiError::bad_request("bad_input", "`stop` must be a string or a list of strings")
            })?,
        Some(other) => {
            return Err(ApiError::bad_request(
                "bad_input",
                format!("`stop` must be a string or a list of strings, got `{other}`"),
            ));
        }
    };
    Ok(ChatAsk {
        messages,
        max_tokens: req.max_completion_tokens.or(req.max_tokens),
        temperature: req.temperature,
        top_p: req.top_p,
        seed: req.seed,
        stop,
        watched,
    })
}

/// A chat completion by one of the worker's LLMs.
pub async fn chat_completions(
    State(state): State<WorkerState>,
    headers: HeaderMap,
    JsonBody(req): JsonBody<WorkerChat>,
) -> Result<Response, ApiError> {
    let admit = admit(&headers, req.priority.as_ref(), req.service_tier.as_deref())?;
    let ask = chat_ask(&req, watched(&headers, &req))?;
    let call = state.door.chat(&req.model, ask, admit).await?;
    let rid = glassbox_trace::RequestId::new();
    let chunks = Chunks {
        id: format!("chatcmpl-{rid}"),
        model: req.model.clone(),
        created: glassbox_trace::unix_micros_now() / 1_000_000,
    };
    if req.stream {
        let include_usage = req.stream_options.as_ref().is_some_and(|o| o.include_usage);
        return Ok(sse(call, chunks, include_usage));
    }
    let done = call.finish().await?;
    let usage = Usage {
        prompt_tokens: done.prompt_tokens,
        completion_tokens: done.completion_tokens,
        total_tokens: done.prompt_tokens + done.completion_tokens,
    };
    Ok(Json(json!({
        "id": chunks.id,
        "object": "chat.completion",
        "created": chunks.created,
        "model": req.model,
        "system_fingerprint": done.version,
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": done.text},
            "finish_reason": done.finish_reason,
        }],
        "usage": usage,
    }))
    .into_response())
}

/// Where a streamed completion is: events still to send, and the call
/// until it ended.
struct Live {
    call: Option<ChatCall>,
    chunks: Chunks,
    include_usage: bool,
    pending: VecDeque<Event>,
}

impl Live {
    async fn next(mut self) -> Option<(Result<Event, Infallible>, Live)> {
        loop {
            if let Some(event) = self.pending.pop_front() {
                return Some((Ok(event), self));
            }
            let call = self.call.as_mut()?;
            // `next` is cancel-safe: a timeout loses no piece.
            match tokio::time::timeout(PROGRESS_EVERY, call.next()).await {
                Err(_) => return Some((Ok(progress()), self)),
                Ok(Some(piece)) => {
                    let event = self.chunks.delta(json!({"content": piece}), None);
                    return Some((Ok(event), self));
                }
                Ok(None) => {
                    let call = self.call.take()?;
                    self.pending = match call.finish().await {
                        Ok(d) => {
                            let mut end =
                                vec![self.chunks.delta(json!({}), Some(&d.finish_reason))];
                            if self.include_usage {
                                end.push(self.chunks.usage(Usage {
                                    prompt_tokens: d.prompt_tokens,
                                    completion_tokens: d.completion_tokens,
                                    total_tokens: d.prompt_tokens + d.completion_tokens,
                                }));
                            }
                            end.push(done());
                            end.into()
                        }
                        Err(e) => {
                            let body = ApiError::from(e).body();
                            [Event::default().data(json!(body).to_string()), done()].into()
                        }
                    };
                }
            }
        }
    }
}

/// The SSE answer of a streamed completion; dropping it (the client went
/// away) drops the call, which cancels the generation.
fn sse(call: ChatCall, chunks: Chunks, include_usage: bool) -> Response {
    let first = chunks.delta(json!({"role": "assistant", "content": ""}), None);
    let live = Live {
        call: Some(call),
        chunks,
        include_usage,
        pending: VecDeque::from([first]),
    };
    Sse::new(futures_util::stream::unfold(live, Live::next))
        .keep_alive(KeepAlive::default())
        .into_response()
}

/// Embeddings by one of the worker's embedding models.
pub async fn embeddings(
    State(state): State<WorkerState>,
    headers: HeaderMap,
    JsonBody(req): JsonBody<WorkerEmbed>,
) -> Result<Response, ApiError> {
    let admit = admit(&headers, req.priority.as_ref(), None)?;
    let texts: Vec<String> = match &req.input {
        Value::String(s) => vec![s.clone()],
        Value::Array(a) => a
            .iter()
            .map(|v| v.as_str().map(str::to_owned))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| {
                ApiError::bad_request("bad_input", "`input` must be a string or a list of strings")
            })?,
        _ => {
            return Err(ApiError::bad_request(
                "bad_input",
                "`input` must be a string or a list of strings",
            ));
        }
    };
    let done = state.door.embed(&req.model, texts, admit).await?;
    let data: Vec<Value> = done
        .vectors
        .iter()
        .enumerate()
        .map(|(i, v)| json!({"object": "embedding", "index": i, "embedding": v}))
        .collect();
    Ok(Json(json!({
        "object": "list",
        "data": data,
        "model": req.model,
        "usage": {"prompt_tokens": done.tokens, "total_tokens": done.tokens},
    }))
    .into_response())
}

/// The served models, OpenAI's list, each with its kind and engine version.
pub async fn models(State(state): State<WorkerState>) -> Json<Value> {
    let data: Vec<Value> = state
        .door
        .models()
        .iter()
        .map(|m| {
            json!({
                "id": m.name,
                "object": "model",
                "owned_by": "glassbox",
                "kind": m.kind.node_kind(),
                "version": state.door.version(&m.name),
            })
        })
        .collect();
    Json(json!({"object": "list", "data": data}))
}

pub async fn health(State(state): State<WorkerState>) -> Json<Value> {
    Json(json!({"status": "ok", "models": state.door.models().names().len()}))
}

/// Ready while serving; 503 before and while draining.
pub async fn ready(State(state): State<WorkerState>) -> Response {
    let ready = state.ready.load(Ordering::Acquire);
    let status = if ready { "ok" } else { "unavailable" };
    let code = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let models = state.door.models().names().len();
    (code, Json(json!({"status": status, "models": models}))).into_response()
}

pub async fn metrics(State(state): State<WorkerState>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        state.metrics.encode_engines(),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chat(stream: bool) -> WorkerChat {
        serde_json::from_value(json!({
            "model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": stream,
        }))
        .unwrap()
    }

    #[test]
    fn a_stream_is_watched_unless_its_coordinator_says_it_only_relays_it() {
        let mut relayed = HeaderMap::new();
        relayed.insert(WATCHED_HEADER, "false".parse().unwrap());
        assert!(watched(&HeaderMap::new(), &chat(true)));
        assert!(!watched(&relayed, &chat(true)));
        assert!(!watched(&HeaderMap::new(), &chat(false)), "read whole");
        let mut other = HeaderMap::new();
        other.insert(WATCHED_HEADER, "true".parse().unwrap());
        assert!(watched(&other, &chat(true)));
        let ask = chat_ask(&chat(true), false).unwrap();
        assert!(!ask.watched);
    }

    #[test]
    fn a_worker_refuses_sampling_outside_openais_ranges() {
        let mut hot = chat(false);
        hot.temperature = Some(7.0);
        let e = chat_ask(&hot, false).unwrap_err();
        assert!(e.message.contains("`temperature` is 7"), "{}", e.message);
        let mut none = chat(false);
        none.max_tokens = Some(0);
        assert!(
            chat_ask(&none, false)
                .unwrap_err()
                .message
                .contains("`max_tokens`")
        );
        let mut fine = chat(false);
        fine.temperature = Some(0.0);
        fine.top_p = Some(0.9);
        assert!(chat_ask(&fine, false).is_ok());
    }
}
