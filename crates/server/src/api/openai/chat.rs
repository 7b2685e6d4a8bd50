//! `POST /v1/chat/completions`: a chat completion through a topology
//! (`model` = topology id). With `stream: true` the answer is an SSE stream
//! ([`super::stream`]).

use axum::Extension;
use axum::Json;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use glassbox_engine::RunOptions;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use utoipa::ToSchema;

pub use super::usage::Usage;
use super::{answer_text, finished_failed, model_error, now_secs};
use crate::api::body::JsonBody;
use crate::api::request_id_header;
use crate::auth::{Caller, Work, estimate_tokens};
use crate::error::{ApiError, ErrorBody};
use crate::service::priority;
use crate::service::{Ask, Cost, Counted};
use crate::state::AppState;
use glassbox_app::versions::RequestKey;

#[derive(Debug, Clone, Deserialize, ToSchema)]
pub struct ChatMessage {
    /// `system`, `user`, `assistant`, ...
    pub role: String,
    /// A string, or an array of parts (`{"type":"text","text":...}`).
    #[serde(default)]
    #[schema(value_type = Object)]
    pub content: Value,
    /// An assistant turn's tool calls (sent back with their results).
    #[serde(default)]
    #[schema(value_type = Option<Vec<Object>>)]
    pub tool_calls: Option<Value>,
    /// A `tool` turn: the call it answers.
    #[serde(default)]
    pub tool_call_id: Option<String>,
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
    /// Lowers the `max_tokens` of every LLM call the topology makes (never
    /// raises it), and is counted against `tokens_per_minute`;
    /// `max_completion_tokens` wins over it.
    #[serde(default)]
    pub max_tokens: Option<u64>,
    #[serde(default)]
    pub max_completion_tokens: Option<u64>,
    /// The end user: the request key that picks the topology version under
    /// a traffic split (the `X-Glassbox-Key` header wins over it).
    #[serde(default)]
    pub user: Option<String>,
    /// The priority band: `interactive`, `online` (the default), `offline`
    /// or `batch`, or vLLM's integer (below 0 interactive, 0 online, above
    /// 0 offline). The `X-Glassbox-Priority` header wins over it; the key's
    /// `max_priority` caps it.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub priority: Option<Value>,
    /// OpenAI's service tier, read as a band when `priority` is absent:
    /// `flex` runs offline, `priority` interactive, others online.
    #[serde(default)]
    pub service_tier: Option<String>,
    /// Functions the model may call: `[{"type": "function", "function":
    /// {"name", "description", "parameters"}}]` (parameters: a JSON Schema
    /// in the subset constrained decoding supports). Handed to the
    /// topology's LLM nodes that set no tools of their own.
    #[serde(default)]
    #[schema(value_type = Option<Vec<Object>>)]
    pub tools: Option<Value>,
    /// `auto` (the default with tools), `none`, `required`, or
    /// `{"type": "function", "function": {"name"}}`.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub tool_choice: Option<Value>,
    /// `{"type": "text"}`, `{"type": "json_object"}` or `{"type":
    /// "json_schema", "json_schema": {"name", "schema"}}`: a local model
    /// is constrained by a grammar to answer in that shape.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub response_format: Option<Value>,
    /// Checked against OpenAI's range, 0 to 2, then left to the topology,
    /// whose LLM nodes set their own sampling.
    #[serde(default)]
    pub temperature: Option<f64>,
    /// Checked against OpenAI's range, 0 to 1, then left to the topology.
    #[serde(default)]
    pub top_p: Option<f64>,
    /// Checked against OpenAI's range, -2 to 2, then left to the topology.
    #[serde(default)]
    pub presence_penalty: Option<f64>,
    /// Checked against OpenAI's range, -2 to 2, then left to the topology.
    #[serde(default)]
    pub frequency_penalty: Option<f64>,
    /// Choices asked for: a topology answers once, so only 1.
    #[serde(default)]
    pub n: Option<u64>,
    /// Checked as OpenAI types it (an integer), then left to the topology,
    /// whose LLM nodes set their own seed.
    #[serde(default)]
    pub seed: Option<i64>,
    /// Checked as OpenAI types it (a string or up to 4 strings), then left
    /// to the topology, whose LLM nodes set their own stop sequences.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub stop: Option<Value>,
    /// A topology's answer carries no token log probabilities: `true` is
    /// refused rather than answered without them.
    #[serde(default)]
    pub logprobs: Option<bool>,
    /// Refused with `logprobs` (above 0 asks for them).
    #[serde(default)]
    pub top_logprobs: Option<u32>,
}

/// The sampling fields of an OpenAI chat request, as the caller sent them.
#[derive(Debug, Clone, Copy, Default)]
pub struct Sampling {
    pub max_tokens: Option<u64>,
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub presence_penalty: Option<f64>,
    pub frequency_penalty: Option<f64>,
}

/// Refuses sampling values OpenAI's API refuses, naming the field and its
/// range: `max_tokens` (and `max_completion_tokens`) at least 1,
/// `temperature` in [0, 2], `top_p` in [0, 1], the penalties in [-2, 2].
pub fn check_sampling(s: &Sampling) -> Result<(), ApiError> {
    if s.max_tokens == Some(0) {
        return Err(ApiError::bad_request(
            "bad_input",
            "`max_tokens` is 0: a completion needs at least 1 token",
        )
        .hint("set `max_tokens` to 1 or more, or leave it out to use the topology's own"));
    }
    let ranges = [
        ("temperature", s.temperature, 0.0, 2.0),
        ("top_p", s.top_p, 0.0, 1.0),
        ("presence_penalty", s.presence_penalty, -2.0, 2.0),
        ("frequency_penalty", s.frequency_penalty, -2.0, 2.0),
    ];
    for (name, value, lo, hi) in ranges {
        if let Some(v) = value
            && !(lo..=hi).contains(&v)
        {
            return Err(ApiError::bad_request(
                "bad_input",
                format!("`{name}` is {v}, outside [{lo}, {hi}]"),
            )
            .hint(format!("OpenAI's API takes `{name}` from {lo} to {hi}")));
        }
    }
    Ok(())
}

impl ChatRequest {
    /// Refuses fields a topology cannot honour or OpenAI would refuse.
    fn check(&self) -> Result<(), ApiError> {
        if let Some(n) = self.n.filter(|&n| n != 1) {
            return Err(ApiError::bad_request(
                "bad_input",
                format!("`n` is {n}: a topology gives one answer per request"),
            )
            .hint("leave `n` out (or set it to 1) and send the request again for another answer"));
        }
        if self.logprobs == Some(true) || self.top_logprobs.is_some_and(|k| k > 0) {
            return Err(ApiError::bad_request(
                "bad_input",
                "`logprobs`: a topology's answer carries no token log probabilities",
            )
            .hint("leave `logprobs` and `top_logprobs` out; the trace (GET /v1/traces/{id}) holds each LLM call's tokens"));
        }
        let stop_ok = match &self.stop {
            None | Some(Value::Null | Value::String(_)) => true,
            Some(Value::Array(items)) => items.len() <= 4 && items.iter().all(Value::is_string),
            Some(_) => false,
        };
        if !stop_ok {
            return Err(ApiError::bad_request(
                "bad_input",
                "`stop` must be a string or a list of at most 4 strings",
            )
            .hint("OpenAI's API takes `stop` as \"END\" or [\"END\", \"\\n\\n\"]"));
        }
        check_sampling(&Sampling {
            max_tokens: self.max_completion_tokens.or(self.max_tokens),
            temperature: self.temperature,
            top_p: self.top_p,
            presence_penalty: self.presence_penalty,
            frequency_penalty: self.frequency_penalty,
        })
    }

    /// The conversation as JSON, for the topology's input.
    fn messages_json(&self) -> Vec<Value> {
        self.messages
            .iter()
            .map(|m| {
                let mut v = json!({"role": m.role, "content": m.content});
                if let Some(calls) = &m.tool_calls {
                    v["tool_calls"] = calls.clone();
                }
                if let Some(id) = &m.tool_call_id {
                    v["tool_call_id"] = json!(id);
                }
                v
            })
            .collect()
    }

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

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ChatChoiceMessage {
    pub role: String,
    /// The answer; `null` when the model called tools.
    pub content: Option<String>,
    /// The model's tool calls: `[{"id", "type": "function", "function":
    /// {"name", "arguments"}}]` (`arguments`: JSON text).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Vec<Object>>)]
    pub tool_calls: Option<Vec<Value>>,
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
pub(crate) fn content_text(content: &Value) -> Option<String> {
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
    headers: HeaderMap,
    JsonBody(req): JsonBody<ChatRequest>,
) -> Result<Response, ApiError> {
    req.check()?;
    let text = question(&req)?;
    let model_ask = super::tools::model_ask(
        req.tools.as_ref(),
        req.tool_choice.as_ref(),
        req.response_format.as_ref(),
    )?;
    // A worker refuses at once what it cannot start in time.
    let loads: Vec<_> = glassbox_nodes::model_cache::global()
        .llm_loads()
        .into_iter()
        .map(|(_, l)| l)
        .collect();
    crate::service::start::check(&headers, &loads)?;
    let key = RequestKey::find(
        crate::api::extract::key_header(&headers),
        req.user.as_deref(),
        None,
    );
    let ask = Ask {
        key: key.as_ref(),
        priority: priority::asked(&headers, req.priority.as_ref(), req.service_tier.as_deref())?,
        caller: Some(&caller),
    };
    let mut admission = state
        .service
        .admit(&req.model, ask)
        .await
        .map_err(|e| model_error(e, "served here; GET /v1/models lists them"))?;
    admission.max_tokens = req.max_completion_tokens.or(req.max_tokens);
    admission.model_ask = model_ask;
    // The guard took the request's unit; this adds its estimated tokens,
    // settled against its real ones when it ends (streamed or not).
    admission.charge(Cost {
        work: Work {
            units: 1,
            tokens: req.estimated_tokens(),
        },
        counted: Counted::Generated,
    })?;
    let mut input = json!({ "question": text });
    if super::tools::offers_tools(admission.model_ask.as_deref()) {
        input["messages"] = json!(req.messages_json());
    }
    if req.stream {
        let include_usage = req.stream_options.as_ref().is_some_and(|o| o.include_usage);
        return Ok(super::stream::sse(
            admission.stream(input),
            req.model,
            include_usage,
        ));
    }
    let finished = admission.run(input, RunOptions::default()).await?;
    let usage = Usage::from(finished.usage);
    let outcome = &finished.outcome;
    let rid = outcome.trace.record.request_id.to_string();
    let output = match &outcome.result {
        Ok(v) => v,
        Err(err) => {
            let mut r = finished_failed(&finished, err).into_response();
            request_id_header(&mut r, &rid);
            return Ok(r);
        }
    };
    let calls = super::tools::tool_calls(output).cloned();
    let body = ChatCompletion {
        id: format!("chatcmpl-{rid}"),
        object: "chat.completion".into(),
        created: now_secs(),
        model: req.model,
        system_fingerprint: outcome.trace.record.version.to_string(),
        choices: vec![ChatChoice {
            index: 0,
            finish_reason: if calls.is_some() {
                "tool_calls"
            } else {
                "stop"
            }
            .into(),
            message: ChatChoiceMessage {
                role: "assistant".into(),
                content: calls.is_none().then(|| answer_text(output)),
                tool_calls: calls,
            },
        }],
        usage,
    };
    let mut r = Json(body).into_response();
    request_id_header(&mut r, &rid);
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn sampling_outside_openais_ranges_is_refused_by_name() {
        let chat = |extra: Value| {
            let mut body = json!({"model": "m", "messages": [{"role": "user", "content": "q"}]});
            for (k, v) in extra.as_object().unwrap() {
                body[k] = v.clone();
            }
            serde_json::from_value::<ChatRequest>(body).unwrap().check()
        };
        let ok = json!({"temperature": 0, "top_p": 1, "n": 1, "max_tokens": 1,
                        "presence_penalty": -2, "frequency_penalty": 2, "seed": 7,
                        "stop": ["a", "b"], "logprobs": false, "top_logprobs": 0});
        assert!(chat(ok).is_ok());
        assert!(chat(json!({"stop": "END"})).is_ok());
        for (extra, field) in [
            (json!({"temperature": 2.5}), "`temperature`"),
            (json!({"temperature": -0.1}), "`temperature`"),
            (json!({"top_p": 1.5}), "`top_p`"),
            (json!({"presence_penalty": -3}), "`presence_penalty`"),
            (json!({"frequency_penalty": 9}), "`frequency_penalty`"),
            (json!({"max_tokens": 0}), "`max_tokens`"),
            (
                json!({"max_completion_tokens": 0, "max_tokens": 5}),
                "`max_tokens`",
            ),
            (json!({"n": 3}), "`n`"),
            (json!({"logprobs": true}), "`logprobs`"),
            (json!({"top_logprobs": 3}), "`logprobs`"),
            (json!({"stop": 5}), "`stop`"),
            (json!({"stop": ["a", "b", "c", "d", "e"]}), "`stop`"),
            (json!({"stop": ["a", 1]}), "`stop`"),
        ] {
            let e = chat(extra.clone()).unwrap_err();
            assert_eq!(e.code, "bad_input", "{extra}");
            assert!(e.message.contains(field), "{extra}: {}", e.message);
            assert!(e.hint.is_some(), "{extra}");
        }
        // A value of the wrong type fails to parse (the body's 400).
        for wrong in [
            json!({"temperature": "hot"}),
            json!({"seed": "x"}),
            json!({"logprobs": 1}),
        ] {
            let mut body = json!({"model": "m", "messages": []});
            for (k, v) in wrong.as_object().unwrap() {
                body[k] = v.clone();
            }
            assert!(
                serde_json::from_value::<ChatRequest>(body).is_err(),
                "{wrong}"
            );
        }
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
