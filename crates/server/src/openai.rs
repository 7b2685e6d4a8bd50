//! OpenAI-compatible endpoints: `POST /v1/chat/completions`,
//! `POST /v1/embeddings`, `GET /v1/models`. Topologies are the models.
//!
//! Chat: `model` is a topology id; the last `user` message becomes the input
//! `{"question": TEXT}`; other request fields (temperature, max_tokens, ...)
//! are accepted and ignored, because the topology decides them. `usage`
//! counts the tokens of the topology's `llm_inference` spans.
//!
//! Streaming (`stream: true`) sends `chat.completion.chunk` events. Tokens go
//! out as the LLM generates them *only* when no `output_guard` runs after an
//! LLM: guarded text must not leave before the guard has seen it, so such
//! topologies (and topologies without an LLM) stream the final, guarded
//! output as one piece when the request ends. `GET /v1/topologies` shows the
//! mode of each (`streaming: live | buffered`).
//!
//! Embeddings: `model` is a topology whose entry nodes are `embedding`
//! nodes; each input string is one request (`{"question": TEXT}`) and the
//! topology's output must carry `vector`.
//!
//! Rate limits count work: an embeddings call is charged one unit per input
//! (at most `max_embedding_inputs` of them), and with `tokens_per_minute`
//! chats and embeddings are charged their estimated tokens before they run
//! and the difference to the real usage after ([`crate::auth`]).

use std::convert::Infallible;

use axum::Extension;
use axum::Json;
use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use glassbox_engine::{CancellationToken, Outcome, RunOptions, text_of};
use glassbox_trace::RequestId;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use utoipa::ToSchema;

use crate::api::body::JsonBody;
use crate::api::request_id_header;
use crate::api::runs::failure_status;
use crate::auth::{Caller, Work, estimate_tokens};
use crate::catalog::StreamMode;
use crate::error::{ApiError, ErrorBody};
use crate::state::AppState;

#[derive(Debug, Clone, Deserialize, ToSchema)]
pub struct ChatMessage {
    /// `system`, `user`, `assistant`, ...
    pub role: String,
    /// A string, or an array of parts (`{"type":"text","text":...}`).
    #[serde(default)]
    #[schema(value_type = Object)]
    pub content: Value,
}

#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
pub struct StreamOptions {
    /// Send a last chunk with `usage` before `[DONE]`.
    #[serde(default)]
    pub include_usage: bool,
}

/// The request; unknown fields are ignored.
#[derive(Debug, Clone, Deserialize, ToSchema)]
pub struct ChatRequest {
    /// A topology id.
    pub model: String,
    pub messages: Vec<ChatMessage>,
    #[serde(default)]
    pub stream: bool,
    #[serde(default)]
    pub stream_options: Option<StreamOptions>,
    /// Counted against `tokens_per_minute` (the topology decides the real
    /// limit); `max_completion_tokens` is read the same way.
    #[serde(default)]
    pub max_tokens: Option<u64>,
    #[serde(default)]
    pub max_completion_tokens: Option<u64>,
}

impl ChatRequest {
    /// Estimated tokens: every message's text and the completion asked for.
    fn estimated_tokens(&self) -> u64 {
        let prompt: u64 = self
            .messages
            .iter()
            .filter_map(|m| content_text(&m.content))
            .map(|t| estimate_tokens(&t))
            .sum();
        let completion = self.max_completion_tokens.or(self.max_tokens).unwrap_or(0);
        prompt.saturating_add(completion)
    }
}

#[derive(Debug, Clone, Copy, Default, Serialize, ToSchema)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub total_tokens: u64,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ChatChoiceMessage {
    pub role: String,
    pub content: String,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ChatChoice {
    pub index: u32,
    pub message: ChatChoiceMessage,
    pub finish_reason: String,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ChatCompletion {
    /// `chatcmpl-` and the request id.
    pub id: String,
    /// `chat.completion`.
    pub object: String,
    pub created: u64,
    pub model: String,
    /// The topology version.
    pub system_fingerprint: String,
    pub choices: Vec<ChatChoice>,
    pub usage: Usage,
}

/// The text of a message's content.
fn content_text(content: &Value) -> Option<String> {
    match content {
        Value::String(s) => Some(s.clone()),
        Value::Array(parts) => {
            let text: Vec<&str> = parts
                .iter()
                .filter(|p| p.get("type").and_then(Value::as_str) == Some("text"))
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect();
            (!text.is_empty()).then(|| text.join("\n"))
        }
        _ => None,
    }
}

fn question(req: &ChatRequest) -> Result<String, ApiError> {
    req.messages
        .iter()
        .rev()
        .find(|m| m.role == "user")
        .and_then(|m| content_text(&m.content))
        .ok_or_else(|| {
            ApiError::bad_request("bad_input", "no `user` message with text content")
                .hint("the last message with role `user` becomes the question")
        })
}

fn model_error(e: ApiError, what: &str) -> ApiError {
    if e.code == "topology_not_found" {
        ApiError {
            code: "model_not_found",
            message: format!("{} (`model` names a topology {what})", e.message),
            ..e
        }
    } else {
        e
    }
}

/// Token counts of the LLM spans (all attempts: every one was paid for).
pub fn llm_usage(outcome: &Outcome) -> Usage {
    let mut u = Usage::default();
    for s in outcome
        .trace
        .spans
        .iter()
        .filter(|s| &*s.kind == "llm_inference")
    {
        u.prompt_tokens += s.usage.input_tokens.unwrap_or(0);
        u.completion_tokens += s.usage.output_tokens.unwrap_or(0);
    }
    u.total_tokens = u.prompt_tokens + u.completion_tokens;
    u
}

fn answer_text(output: &Value) -> String {
    match text_of(output) {
        Some(t) => t.to_string(),
        None if output.is_null() => String::new(),
        None => output.to_string(),
    }
}

fn now_secs() -> u64 {
    glassbox_trace::unix_micros_now() / 1_000_000
}

fn run_failed(outcome: &Outcome, err: &glassbox_engine::ExecError) -> ApiError {
    let (status, hint) = failure_status(err);
    let e = ApiError::new(
        status,
        err.code(),
        format!(
            "{err} (request {}: GET /v1/traces/{} shows its path)",
            outcome.trace.record.request_id, outcome.trace.record.request_id
        ),
    );
    match hint {
        Some(h) => e.hint(h),
        None => e,
    }
}

/// A chat completion through a topology (`model` = topology id).
#[utoipa::path(
    post,
    path = "/v1/chat/completions",
    tag = "openai",
    request_body = ChatRequest,
    responses(
        (status = 200, description = "A `chat.completion`, or with `stream: true` a `text/event-stream` of `chat.completion.chunk` events ending in `data: [DONE]`; the request id is in `x-request-id`. The answer (a stream: its closing chunks) is sent once the request's trace has committed; a stream whose trace cannot be stored ends with an error event (`trace_not_stored`)", body = ChatCompletion),
        (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody),
        (status = 404, description = "No such model (topology)", body = ErrorBody),
        (status = 429, body = ErrorBody),
        (status = 500, body = ErrorBody),
        (status = 503, description = "The request's trace could not be stored (`trace_not_stored`)", body = ErrorBody),
    ),
    security(("api_key" = ["run"]))
)]
pub async fn chat_completions(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    JsonBody(req): JsonBody<ChatRequest>,
) -> Result<Response, ApiError> {
    let text = question(&req)?;
    let admitted = state
        .admit(&req.model)
        .map_err(|e| model_error(e, "served here; GET /v1/models lists them"))?;
    // The guard took the request's unit; this adds its tokens.
    let estimate = req.estimated_tokens();
    let more = Work {
        units: 0,
        tokens: estimate,
    };
    state.charge(&caller, more, Work { units: 1, ..more })?;
    let input = json!({ "question": text });
    if req.stream {
        let include_usage = req.stream_options.as_ref().is_some_and(|o| o.include_usage);
        let rid = RequestId::new();
        let ticket = state.trace_ticket(rid);
        return Ok(stream(
            admitted,
            Streamed {
                rid,
                ticket,
                model: req.model,
                include_usage,
            },
            input,
        ));
    }
    let outcome = admitted.run(&state, input, RunOptions::default()).await?;
    let usage = llm_usage(&outcome);
    state
        .limiter
        .settle(&caller, usage.total_tokens.saturating_sub(estimate));
    let rid = outcome.trace.record.request_id.to_string();
    let output = match &outcome.result {
        Ok(v) => v,
        Err(err) => {
            let mut r = run_failed(&outcome, err).into_response();
            request_id_header(&mut r, &rid);
            return Ok(r);
        }
    };
    let body = ChatCompletion {
        id: format!("chatcmpl-{rid}"),
        object: "chat.completion".into(),
        created: now_secs(),
        model: req.model,
        system_fingerprint: outcome.trace.record.version.to_string(),
        choices: vec![ChatChoice {
            index: 0,
            message: ChatChoiceMessage {
                role: "assistant".into(),
                content: answer_text(output),
            },
            finish_reason: "stop".into(),
        }],
        usage,
    };
    let mut r = Json(body).into_response();
    request_id_header(&mut r, &rid);
    Ok(r)
}

struct Chunks {
    id: String,
    model: String,
    created: u64,
}

impl Chunks {
    fn delta(&self, delta: Value, finish: Option<&str>) -> Event {
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

    fn usage(&self, usage: Usage) -> Event {
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
}

/// A stream's request: its id, and the ticket of its trace's commit.
struct Streamed {
    rid: RequestId,
    ticket: Option<glassbox_store::Durable>,
    model: String,
    include_usage: bool,
}

/// Streams a run's chunks. With durability `commit`, the closing chunks
/// (the buffered answer or `finish_reason`, usage, `[DONE]`) wait for the
/// trace's commit; live tokens go out as they come. A trace that cannot be
/// stored ends the stream with an error event instead.
fn stream(admitted: crate::state::Admitted, streamed: Streamed, input: Value) -> Response {
    let Streamed {
        rid,
        ticket,
        model,
        include_usage,
    } = streamed;
    let chunks = Chunks {
        id: format!("chatcmpl-{rid}"),
        model,
        created: now_secs(),
    };
    let (events, rx) = tokio::sync::mpsc::channel::<Event>(64);
    let cancel = CancellationToken::new();
    let live: Option<Vec<String>> = match &admitted.served.stream {
        StreamMode::Live { nodes } => Some(nodes.clone()),
        StreamMode::Buffered { .. } => None,
    };
    tokio::spawn(async move {
        let admitted = admitted;
        let (tok_tx, mut tok_rx) = tokio::sync::mpsc::unbounded_channel();
        let options = RunOptions {
            request_id: Some(rid),
            cancel: Some(cancel.clone()),
            tokens: live.is_some().then_some(tok_tx),
            ..RunOptions::default()
        };
        let pipeline = admitted.served.pipeline.clone();
        let run = pipeline.run(input, options);
        tokio::pin!(run);
        let mut gone = events
            .send(chunks.delta(json!({"role": "assistant", "content": ""}), None))
            .await
            .is_err();
        let mut streamed = String::new();
        let is_live = |node: &str| live.as_ref().is_some_and(|n| n.iter().any(|x| x == node));
        let outcome = loop {
            tokio::select! {
                outcome = &mut run => break outcome,
                Some(chunk) = tok_rx.recv() => {
                    if is_live(&chunk.node) && !gone {
                        streamed.push_str(&chunk.text);
                        gone = events.send(chunks.delta(json!({"content": chunk.text}), None)).await.is_err();
                        if gone { cancel.cancel(); }
                    }
                }
                _ = events.closed(), if !gone => {
                    gone = true;
                    cancel.cancel();
                }
            }
        };
        drop(admitted);
        if gone {
            return;
        }
        while let Ok(chunk) = tok_rx.try_recv() {
            if is_live(&chunk.node) {
                streamed.push_str(&chunk.text);
                let _ = events
                    .send(chunks.delta(json!({"content": chunk.text}), None))
                    .await;
            }
        }
        if let Err(e) = crate::state::trace_committed(ticket).await {
            let _ = events
                .send(Event::default().data(json!(e.body()).to_string()))
                .await;
            let _ = events.send(Event::default().data("[DONE]")).await;
            return;
        }
        match &outcome.result {
            Ok(output) => {
                // Buffered topologies send their final output here; so does a
                // live one whose LLM produced nothing (a fallback answered).
                if streamed.is_empty() {
                    let text = answer_text(output);
                    let _ = events
                        .send(chunks.delta(json!({"content": text}), None))
                        .await;
                }
                let _ = events.send(chunks.delta(json!({}), Some("stop"))).await;
                if include_usage {
                    let _ = events.send(chunks.usage(llm_usage(&outcome))).await;
                }
            }
            Err(err) => {
                let body = run_failed(&outcome, err).body();
                let _ = events
                    .send(Event::default().data(json!(body).to_string()))
                    .await;
            }
        }
        let _ = events.send(Event::default().data("[DONE]")).await;
    });
    let body = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|ev| (Ok::<Event, Infallible>(ev), rx))
    });
    // Comments every 15 s keep proxies from closing a quiet (buffered) stream.
    let mut r = Sse::new(body)
        .keep_alive(KeepAlive::default())
        .into_response();
    request_id_header(&mut r, &rid.to_string());
    r
}

/// `input`: one string or a list of strings.
#[derive(Debug, Clone, Deserialize, ToSchema)]
pub struct EmbeddingRequest {
    /// A topology whose entry nodes are `embedding` nodes.
    pub model: String,
    #[schema(value_type = Object)]
    pub input: Value,
    /// `float` (default) or `base64` (little-endian f32).
    #[serde(default)]
    pub encoding_format: Option<String>,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct EmbeddingData {
    pub object: String,
    pub index: usize,
    /// Floats, or a base64 string with `encoding_format: base64`.
    #[schema(value_type = Object)]
    pub embedding: Value,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct EmbeddingUsage {
    pub prompt_tokens: u64,
    pub total_tokens: u64,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct EmbeddingList {
    pub object: String,
    pub data: Vec<EmbeddingData>,
    pub model: String,
    pub usage: EmbeddingUsage,
}

/// The input strings, at most `cap` of them.
fn inputs(v: &Value, cap: usize) -> Result<Vec<String>, ApiError> {
    if let Value::Array(items) = v
        && items.len() > cap
    {
        return Err(ApiError::bad_request(
            "too_many_inputs",
            format!(
                "`input` has {} items; this server takes at most {cap} per request",
                items.len()
            ),
        )
        .hint("split the inputs into several requests, or raise `max_embedding_inputs` in the server config"));
    }
    let bad = || {
        ApiError::bad_request(
            "bad_input",
            "`input` must be a non-empty string or a list of non-empty strings",
        )
        .hint("token-id inputs are not supported; send text")
    };
    let list = match v {
        Value::String(s) => vec![s.clone()],
        Value::Array(items) if !items.is_empty() => items
            .iter()
            .map(|i| i.as_str().map(str::to_string).ok_or_else(bad))
            .collect::<Result<_, _>>()?,
        _ => return Err(bad()),
    };
    if list.iter().any(|s| s.trim().is_empty()) {
        return Err(bad());
    }
    Ok(list)
}

/// Standard base64 (with padding), as OpenAI's `encoding_format: base64`.
pub fn base64(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Embeddings through an embedding topology; each input is one traced request.
#[utoipa::path(
    post,
    path = "/v1/embeddings",
    tag = "openai",
    request_body = EmbeddingRequest,
    responses(
        (status = 200, description = "The vectors; `x-request-id` lists the request ids, comma-separated", body = EmbeddingList),
        (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 429, body = ErrorBody),
        (status = 503, description = "An input's trace could not be stored (`trace_not_stored`)", body = ErrorBody),
    ),
    security(("api_key" = ["run"]))
)]
pub async fn embeddings(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    JsonBody(req): JsonBody<EmbeddingRequest>,
) -> Result<Response, ApiError> {
    let texts = inputs(&req.input, state.config.max_embedding_inputs)?;
    let base64_out = match req.encoding_format.as_deref() {
        None | Some("float") => false,
        Some("base64") => true,
        Some(other) => {
            return Err(ApiError::bad_request(
                "bad_input",
                format!("`encoding_format: {other}` is not supported"),
            )
            .hint("use float or base64"));
        }
    };
    let admitted = state
        .admit(&req.model)
        .map_err(|e| model_error(e, "whose entry node is `embedding`"))?;
    if !admitted.served.embeds {
        return Err(ApiError::bad_request(
            "not_an_embedding_model",
            format!("topology `{}` does not start with an `embedding` node", req.model),
        )
        .hint("GET /v1/topologies shows `embeddings: true` for topologies that can serve /v1/embeddings"));
    }
    // Each input is one run: the guard took one unit, this takes the rest.
    let estimate: u64 = texts.iter().map(|t| estimate_tokens(t)).sum();
    let total = Work {
        units: texts.len() as u64,
        tokens: estimate,
    };
    state.charge(
        &caller,
        Work {
            units: total.units.saturating_sub(1),
            ..total
        },
        total,
    )?;
    let mut data = Vec::with_capacity(texts.len());
    let mut ids = Vec::with_capacity(texts.len());
    let mut tickets = Vec::with_capacity(texts.len());
    let mut tokens = 0u64;
    for (index, text) in texts.into_iter().enumerate() {
        let rid = RequestId::new();
        tickets.push(state.trace_ticket(rid));
        let options = RunOptions {
            request_id: Some(rid),
            ..RunOptions::default()
        };
        let outcome = admitted
            .served
            .pipeline
            .run(json!({ "question": text }), options)
            .await;
        ids.push(rid.to_string());
        let output = match &outcome.result {
            Ok(v) => v,
            Err(err) => {
                // The error names this request's trace: it must exist.
                let e = run_failed(&outcome, err);
                all_committed(tickets).await?;
                return Err(e);
            }
        };
        let vector: Vec<f32> = output
            .get("vector")
            .and_then(Value::as_array)
            .map(|v| {
                v.iter()
                    .filter_map(Value::as_f64)
                    .map(|x| x as f32)
                    .collect()
            })
            .filter(|v: &Vec<f32>| !v.is_empty())
            .ok_or_else(|| {
                ApiError::internal(
                    "no_vector",
                    format!("topology `{}` did not output a `vector`", req.model),
                )
                .hint("end the topology at its `embedding` node")
            })?;
        tokens += outcome
            .trace
            .spans
            .iter()
            .filter(|s| &*s.kind == "embedding")
            .map(|s| s.usage.input_tokens.unwrap_or(0))
            .sum::<u64>();
        let embedding = if base64_out {
            let bytes: Vec<u8> = vector.iter().flat_map(|f| f.to_le_bytes()).collect();
            Value::String(base64(&bytes))
        } else {
            json!(vector)
        };
        data.push(EmbeddingData {
            object: "embedding".into(),
            index,
            embedding,
        });
    }
    state
        .limiter
        .settle(&caller, tokens.saturating_sub(estimate));
    // The inputs' traces were queued one after another, so they mostly share
    // one commit.
    all_committed(tickets).await?;
    let mut r = Json(EmbeddingList {
        object: "list".into(),
        data,
        model: req.model,
        usage: EmbeddingUsage {
            prompt_tokens: tokens,
            total_tokens: tokens,
        },
    })
    .into_response();
    request_id_header(&mut r, &ids.join(","));
    Ok(r)
}

/// Waits for every ticket, in order.
async fn all_committed(tickets: Vec<Option<glassbox_store::Durable>>) -> Result<(), ApiError> {
    for ticket in tickets {
        crate::state::trace_committed(ticket).await?;
    }
    Ok(())
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Model {
    /// The topology id.
    pub id: String,
    /// `model`.
    pub object: String,
    /// When its current version was loaded (Unix seconds).
    pub created: u64,
    pub owned_by: String,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ModelList {
    pub object: String,
    pub data: Vec<Model>,
}

/// The served topologies, as models.
#[utoipa::path(
    get,
    path = "/v1/models",
    tag = "openai",
    responses(
        (status = 200, body = ModelList),
        (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody),
    ),
    security(("api_key" = ["run"]), ("api_key" = ["read"]))
)]
pub async fn models(State(state): State<AppState>) -> Json<ModelList> {
    Json(ModelList {
        object: "list".into(),
        data: state
            .catalog
            .list()
            .iter()
            .map(|s| Model {
                id: s.topology.id.clone(),
                object: "model".into(),
                created: s.loaded_at_us / 1_000_000,
                owned_by: "glassbox".into(),
            })
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_the_standard() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
    }

    #[test]
    fn takes_the_last_user_message() {
        let req: ChatRequest = serde_json::from_value(json!({
            "model": "m",
            "messages": [
                {"role": "user", "content": "first"},
                {"role": "assistant", "content": "x"},
                {"role": "user", "content": [{"type": "text", "text": "second"}]},
                {"role": "system", "content": "s"}
            ]
        }))
        .unwrap();
        assert_eq!(question(&req).unwrap(), "second");
        let none: ChatRequest =
            serde_json::from_value(json!({"model": "m", "messages": []})).unwrap();
        assert_eq!(question(&none).unwrap_err().code, "bad_input");
    }

    #[test]
    fn caps_embedding_inputs_and_names_the_cap() {
        assert_eq!(inputs(&json!(["a", "b"]), 2).unwrap().len(), 2);
        let e = inputs(&json!(["a", "b", "c"]), 2).unwrap_err();
        assert_eq!((e.status.as_u16(), e.code), (400, "too_many_inputs"));
        assert!(e.message.contains("at most 2"), "{}", e.message);
        assert_eq!(inputs(&json!("one"), 1).unwrap(), vec!["one".to_string()]);
    }

    #[test]
    fn chats_are_estimated_from_messages_and_max_tokens() {
        let req: ChatRequest = serde_json::from_value(json!({
            "model": "m",
            "max_tokens": 100,
            "messages": [
                {"role": "system", "content": "12345678"},
                {"role": "user", "content": "1234"}
            ]
        }))
        .unwrap();
        assert_eq!(req.estimated_tokens(), 103);
    }
}
