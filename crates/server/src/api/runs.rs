//! `POST /v1/topologies/{id}/runs`: one request through a topology.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use glassbox_engine::{Outcome, RunOptions};
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use crate::api::body::JsonBody;
use crate::api::extract::{Path, Query};
use crate::auth::Caller;
use crate::error::{ApiError, ErrorBody, ErrorDetail, failure_status};
use crate::service::{Ask, priority};
use crate::state::AppState;
use glassbox_app::versions::RequestKey;

/// Query parameters of a run.
#[derive(Debug, Clone, Default, serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct RunParams {
    /// The request key (a user or session id) that picks the topology
    /// version under a traffic split: one key, one version. The
    /// `X-Glassbox-Key` header does the same and wins.
    pub key: Option<String>,
    /// The priority band: `interactive`, `online` (the default), `offline`
    /// or `batch`. The `X-Glassbox-Priority` header does the same and
    /// wins; the key's `max_priority` caps it.
    pub priority: Option<String>,
}

/// A finished request: its output and how it was produced.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct RunResponse {
    /// Also the trace id: `GET /v1/traces/{request_id}`.
    pub request_id: String,
    pub topology_id: String,
    pub version: String,
    /// `ok`, `failed` or `cancelled`.
    pub status: String,
    /// True when a fallback or a degraded node produced the answer.
    pub degraded: bool,
    /// The output of the topology (null when it failed).
    #[schema(value_type = Object)]
    pub output: Value,
    /// Every node (status, timing, attempts, label) and every edge (taken or
    /// not, and why).
    #[schema(value_type = Object)]
    pub path: Value,
    /// Exact cost: one line per node and unit, and the total.
    #[schema(value_type = Object)]
    pub receipt: Value,
    /// Why the request took its path, in plain language.
    pub explanation: String,
    pub duration_us: u64,
    /// Present when the request failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorDetail>,
}

impl RunResponse {
    pub fn from_outcome(outcome: &Outcome) -> RunResponse {
        let r = &outcome.trace.record;
        let (output, error) = match &outcome.result {
            Ok(v) => (v.clone(), None),
            Err(e) => (
                Value::Null,
                Some(ErrorDetail {
                    code: e.code().to_string(),
                    message: glassbox_topology::secret::mask_text(&e.to_string()).into_owned(),
                    hint: failure_status(e).1.map(str::to_string),
                }),
            ),
        };
        RunResponse {
            request_id: r.request_id.to_string(),
            topology_id: r.topology_id.to_string(),
            version: r.version.to_string(),
            status: r.status.as_str().to_string(),
            degraded: r.degraded,
            output,
            path: serde_json::to_value(&r.path).unwrap_or(Value::Null),
            receipt: serde_json::to_value(&r.receipt).unwrap_or(Value::Null),
            explanation: r.explanation.text.clone(),
            duration_us: r.duration_us,
            error,
        }
    }
}

/// The input must be a JSON object.
pub fn check_input(input: &Value) -> Result<(), ApiError> {
    if input.is_object() {
        Ok(())
    } else {
        Err(ApiError::bad_request(
            "bad_input",
            "the request body must be a JSON object (the topology's input)",
        )
        .hint(r#"for example {"question": "What is the price of Pro?"}"#))
    }
}

/// Runs one request. A failed run still answers with its trace (path,
/// receipt, explanation) and an `error`, under a 4xx/5xx status.
#[utoipa::path(
    post,
    path = "/v1/topologies/{id}/runs",
    tag = "runs",
    params(
        ("id" = String, Path, description = "Topology id"),
        ("x-glassbox-key" = Option<String>, Header, description = "The request key that picks the version under a traffic split (same key, same version)"),
        ("x-glassbox-priority" = Option<String>, Header, description = "The priority band: interactive, online (default), offline or batch; capped by the key's `max_priority`"),
        RunParams,
    ),
    request_body(content = Object, description = "The request input, a JSON object, e.g. `{\"question\": \"...\"}`"),
    responses(
        (status = 200, description = "The request succeeded", body = RunResponse),
        (status = 400, description = "The body is not a JSON object", body = ErrorBody),
        (status = 401, description = "No valid API key", body = ErrorBody),
        (status = 403, description = "The key lacks the `run` scope", body = ErrorBody),
        (status = 404, description = "No such topology", body = ErrorBody),
        (status = 413, description = "The body is over the limit", body = ErrorBody),
        (status = 422, description = "The run failed on bad input (body: RunResponse with `error`)", body = RunResponse),
        (status = 429, description = "Over the topology's concurrency and queue (`overloaded`), shed from a full queue for a more urgent request (`shed`), or over the key's rate limit (`rate_limited`); see `Retry-After` and the `x-ratelimit-*` headers", body = ErrorBody),
        (status = 500, description = "The run failed (body: RunResponse with `error`)", body = RunResponse),
        (status = 503, description = "The run ended but its trace could not be stored (`trace_not_stored`); with `[store] durability = \"commit\"` (the default) no answer leaves before its trace has committed", body = ErrorBody),
        (status = 504, description = "A timeout, the deadline or the maximum run time (`max_run_time_exceeded`, naming the limit and where it is set) ended the run", body = RunResponse),
    ),
    security(("api_key" = ["run"]))
)]
pub async fn create_run(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    Query(params): Query<RunParams>,
    headers: axum::http::HeaderMap,
    JsonBody(input): JsonBody<Value>,
) -> Result<Response, ApiError> {
    check_input(&input)?;
    let key = RequestKey::find(
        crate::api::extract::key_header(&headers),
        None,
        params.key.as_deref(),
    );
    let field = params.priority.map(Value::String);
    let ask = Ask {
        key: key.as_ref(),
        priority: priority::asked(&headers, field.as_ref(), None)?,
        caller: Some(&caller),
    };
    let finished = state
        .service
        .admit(&id, ask)
        .await?
        .run(input, RunOptions::default())
        .await?;
    // A run's tokens are known only afterwards: the service settled them
    // against the key's `tokens_per_minute` when the run ended.
    let mut body = RunResponse::from_outcome(&finished.outcome);
    if let Some(e) = finished.over_run_time() {
        // Its maximum run time ended it: the error names the limit.
        body.error = Some(ApiError::from(e).body().error);
    }
    let outcome = finished.outcome;
    let status = match &outcome.result {
        Ok(_) => StatusCode::OK,
        Err(e) => failure_status(e).0,
    };
    let mut response = (status, Json(body)).into_response();
    if status == StatusCode::TOO_MANY_REQUESTS {
        response
            .headers_mut()
            .insert(axum::http::header::RETRY_AFTER, 1.into());
    }
    crate::api::request_id_header(&mut response, &outcome.trace.record.request_id.to_string());
    Ok(response)
}
