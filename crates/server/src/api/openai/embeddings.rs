//! `POST /v1/embeddings`: vectors from an embedding topology (one whose
//! entry node is `embedding`). Each input is one traced request; all of a
//! call's inputs run under one admission, one after another.

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use glassbox_engine::Outcome;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use utoipa::ToSchema;

use super::{finished_failed, model_error};
use crate::api::body::JsonBody;
use crate::api::request_id_header;
use crate::auth::{Caller, Work, estimate_tokens};
use crate::error::{ApiError, ErrorBody};
use crate::service::{Ask, Cost, Counted, priority};
use crate::state::AppState;
use glassbox_app::versions::RequestKey;

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
    /// The end user: the request key that picks the topology version under
    /// a traffic split (the `X-Glassbox-Key` header wins over it).
    #[serde(default)]
    pub user: Option<String>,
    /// The priority band, as in chat completions (a band name or vLLM's
    /// integer; the `X-Glassbox-Priority` header wins).
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub priority: Option<Value>,
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

/// The `vector` of an embedding topology's output; `None` if it has none.
fn vector_of(outcome: &Outcome) -> Option<Vec<f32>> {
    outcome
        .result
        .as_ref()
        .ok()?
        .get("vector")
        .and_then(Value::as_array)
        .map(|v| {
            v.iter()
                .filter_map(Value::as_f64)
                .map(|x| x as f32)
                .collect()
        })
        .filter(|v: &Vec<f32>| !v.is_empty())
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
    headers: axum::http::HeaderMap,
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
    let key = RequestKey::find(
        crate::api::extract::key_header(&headers),
        req.user.as_deref(),
        None,
    );
    let ask = Ask {
        key: key.as_ref(),
        priority: priority::asked(&headers, req.priority.as_ref(), None)?,
        caller: Some(&caller),
    };
    let mut admission = state
        .service
        .admit(&req.model, ask)
        .await
        .map_err(|e| model_error(e, "whose entry node is `embedding`"))?;
    if !admission.served.embeds {
        return Err(ApiError::bad_request(
            "not_an_embedding_model",
            format!("topology `{}` does not start with an `embedding` node", req.model),
        )
        .hint("GET /v1/topologies shows `embeddings: true` for topologies that can serve /v1/embeddings"));
    }
    // Each input is one run: the guard took one unit, this takes the rest
    // and the estimated tokens, settled against the embedded ones.
    let estimate: u64 = texts.iter().map(|t| estimate_tokens(t)).sum();
    admission.charge(Cost {
        work: Work {
            units: texts.len() as u64,
            tokens: estimate,
        },
        counted: Counted::Embedded,
    })?;
    let runs = texts
        .into_iter()
        .map(|text| json!({ "question": text }))
        .collect();
    // The first input without a vector (a failed run) ends the call: later
    // inputs do not run.
    let finished = admission
        .run_each(runs, |outcome| vector_of(outcome).is_none())
        .await?;
    let mut data = Vec::with_capacity(finished.len());
    let mut ids = Vec::with_capacity(finished.len());
    let mut tokens = 0u64;
    for (index, f) in finished.iter().enumerate() {
        let outcome = &f.outcome;
        ids.push(outcome.trace.record.request_id.to_string());
        if let Err(err) = &outcome.result {
            // The error names this request's trace, which has committed.
            return Err(finished_failed(f, err));
        }
        let vector = vector_of(outcome).ok_or_else(|| {
            ApiError::internal(
                "no_vector",
                format!("topology `{}` did not output a `vector`", req.model),
            )
            .hint("end the topology at its `embedding` node")
        })?;
        tokens += f.usage.embedded;
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
    fn caps_embedding_inputs_and_names_the_cap() {
        assert_eq!(inputs(&json!(["a", "b"]), 2).unwrap().len(), 2);
        let e = inputs(&json!(["a", "b", "c"]), 2).unwrap_err();
        assert_eq!((e.status.as_u16(), e.code), (400, "too_many_inputs"));
        assert!(e.message.contains("at most 2"), "{}", e.message);
        assert_eq!(inputs(&json!("one"), 1).unwrap(), vec!["one".to_string()]);
    }
}
