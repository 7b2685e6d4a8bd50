//! `GET /v1/traces` (filtered, sorted), `GET /v1/traces/{request_id}` and
//! `GET /v1/traces/{a}/diff/{b}` (two requests side by side, with the first
//! divergence explained; the diff is `glassbox_trace::diff`).

use crate::api::extract::{Path, Query};
use axum::Json;
use axum::extract::State;
use glassbox_store::{
    Filter, FilterError, FilterInput, ListQuery, RequestSummary, Sort, StoredTrace,
};
use glassbox_trace::diff::{Side, TraceDiff};
use glassbox_trace::{Lang, RequestId};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};

use crate::error::{ApiError, ErrorBody};
use crate::state::AppState;

/// Most traces one list returns.
pub const MAX_LIMIT: u32 = 1000;

/// Which requests (shared by traces and reports).
#[derive(Debug, Clone, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct FilterParams {
    /// Only this topology id.
    pub topology: Option<String>,
    /// Only this topology version.
    pub version: Option<String>,
    /// Started at or after: `2026-11-30`, `2026-11-30T12:00:00Z`, Unix
    /// seconds, or an age like `90m`, `24h`, `7d`.
    pub since: Option<String>,
    /// Started before (same forms as `since`).
    pub until: Option<String>,
}

impl FilterParams {
    /// The store's filter (the parse `glassbox trace list` shares).
    pub fn filter(&self, status: Option<String>) -> Result<Filter, ApiError> {
        FilterInput {
            topology: self.topology.clone(),
            version: self.version.clone(),
            status,
            since: self.since.clone(),
            until: self.until.clone(),
        }
        .parse(glassbox_trace::unix_micros_now())
        .map_err(bad_query)
    }
}

/// A refused filter or order as a 400, worded for query parameters.
fn bad_query(err: FilterError) -> ApiError {
    let message = match &err {
        FilterError::Time { field, .. } => format!("`{field}`: {err}"),
        FilterError::Status { value } => format!("`status={value}` is not a status"),
        FilterError::Sort { value } => format!("`sort={value}` is not an order"),
    };
    let api = ApiError::bad_request("bad_query", message);
    match err.hint() {
        Some(hint) => api.hint(hint),
        None => api,
    }
}

#[derive(Debug, Clone, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListParams {
    /// `ok`, `failed` or `cancelled`.
    pub status: Option<String>,
    /// `recent` (default), `slowest` or `costliest`.
    pub sort: Option<String>,
    /// At most this many (default 50, at most 1000).
    pub limit: Option<u32>,
}

/// One stored request, in a list.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct TraceSummary {
    pub request_id: String,
    pub topology_id: String,
    pub version: String,
    pub started_at_us: i64,
    pub duration_us: i64,
    pub status: String,
    pub degraded: bool,
    pub error_code: Option<String>,
    /// Exact decimal, as text.
    pub cost: String,
    pub currency: String,
    /// The taken nodes, `route>prompt>llm`.
    pub path: String,
    pub span_count: i64,
}

impl From<RequestSummary> for TraceSummary {
    fn from(r: RequestSummary) -> Self {
        TraceSummary {
            request_id: r.request_id,
            topology_id: r.topology_id,
            version: r.version,
            started_at_us: r.started_at_us,
            duration_us: r.duration_us,
            status: r.status,
            degraded: r.degraded,
            error_code: r.error_code,
            cost: r.cost,
            currency: r.currency,
            path: r.path,
            span_count: r.span_count,
        }
    }
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct TraceList {
    pub traces: Vec<TraceSummary>,
}

/// One stored request in full.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct TraceDetail {
    pub request_id: String,
    /// The request record: status, timing, path (nodes and edges with the
    /// reason each edge was or was not taken), labels, models, receipt,
    /// explanation.
    #[schema(value_type = Object)]
    pub request: Value,
    /// Every node attempt, in the order they finished, with timing, usage,
    /// cost and input/output summaries.
    #[schema(value_type = Vec<Object>)]
    pub spans: Vec<Value>,
    #[schema(value_type = Object)]
    pub receipt: Value,
    pub explanation: String,
    pub input_summary: String,
    pub output_summary: String,
    /// The chain of nodes that set the request's latency: `{steps: [{node,
    /// start_us, end_us, attempts, wait_us, added_us}], end_us,
    /// nodes_total_us, off_path}` (computed from the path and spans).
    #[schema(value_type = Object)]
    pub critical_path: Value,
}

impl From<StoredTrace> for TraceDetail {
    fn from(t: StoredTrace) -> Self {
        let r = &t.record;
        let critical = glassbox_trace::critical_path(&r.path, &t.spans);
        TraceDetail {
            critical_path: serde_json::to_value(critical).unwrap_or(Value::Null),
            request_id: r.request_id.to_string(),
            receipt: serde_json::to_value(&r.receipt).unwrap_or(Value::Null),
            explanation: r.explanation.text.clone(),
            input_summary: r.input_summary.clone(),
            output_summary: r.output_summary.clone(),
            spans: t
                .spans
                .iter()
                .map(|s| serde_json::to_value(s).unwrap_or(Value::Null))
                .collect(),
            request: serde_json::to_value(r).unwrap_or(Value::Null),
        }
    }
}

/// Stored requests, newest (or slowest, or costliest) first.
#[utoipa::path(
    get,
    path = "/v1/traces",
    tag = "traces",
    params(FilterParams, ListParams),
    responses(
        (status = 200, body = TraceList),
        (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody),
    ),
    security(("api_key" = ["read"]))
)]
pub async fn list_traces(
    State(state): State<AppState>,
    Query(filter): Query<FilterParams>,
    Query(list): Query<ListParams>,
) -> Result<Json<TraceList>, ApiError> {
    let query = ListQuery {
        filter: filter.filter(list.status.clone())?,
        sort: Sort::parse(list.sort.as_deref()).map_err(bad_query)?,
        limit: list.limit.unwrap_or(50).clamp(1, MAX_LIMIT),
    };
    let rows = state
        .with_store(move |store| store.list(&query).map_err(ApiError::from))
        .await?;
    Ok(Json(TraceList {
        traces: rows.into_iter().map(TraceSummary::from).collect(),
    }))
}

/// One stored request: record, spans, receipt, explanation, summaries.
#[utoipa::path(
    get,
    path = "/v1/traces/{request_id}",
    tag = "traces",
    params(("request_id" = String, Path, description = "Request id (32 hex digits, dashes allowed)")),
    responses(
        (status = 200, body = TraceDetail),
        (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody),
    ),
    security(("api_key" = ["read"]))
)]
pub async fn get_trace(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<TraceDetail>, ApiError> {
    load(&state, &id).await.map(|t| Json(t.into()))
}

/// One stored request, or a 400 (bad id) or 404 naming it.
async fn load(state: &AppState, id: &str) -> Result<StoredTrace, ApiError> {
    let rid: RequestId = id
        .parse()
        .map_err(|e| ApiError::bad_request("bad_request_id", format!("`{id}`: {e}")))?;
    let get =
        move |store: &mut dyn glassbox_store::TraceStore| store.get(rid).map_err(ApiError::from);
    let mut found = state.with_store(get).await?;
    if found.is_none() {
        // Read your writes: the request may still sit in the writer's queue.
        state.flush_traces().await?;
        found = state.with_store(get).await?;
    }
    found.ok_or_else(|| {
        ApiError::not_found("trace_not_found", format!("no stored request `{id}`"))
            .hint("GET /v1/traces lists stored requests")
    })
}

#[derive(Debug, Clone, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct DiffParams {
    /// Language of the explanation: `en` (default) or `zh`.
    pub lang: Option<String>,
}

/// Two stored requests side by side.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct TraceDiffBody {
    /// Both requests (id, topology and version, status, duration, cost,
    /// summaries, the nodes that ran); every node in both (status, label,
    /// attempts, guard outcome, timing, tokens, cost, input/output
    /// summaries, `differs`); every edge in both (taken, why); and
    /// `first_divergence` (`kind`: status, label, guard, attempts, input or
    /// output; `node`; both values), or null.
    #[schema(value_type = Object)]
    pub diff: Value,
    /// The first divergence in plain words.
    pub explanation: String,
    pub lang: String,
}

/// Two stored requests side by side: path and edges with their reasons,
/// per-node summaries, timings, tokens and costs, and the first divergence
/// explained in plain words.
#[utoipa::path(
    get,
    path = "/v1/traces/{a}/diff/{b}",
    tag = "traces",
    params(
        ("a" = String, Path, description = "The first request id"),
        ("b" = String, Path, description = "The second request id"),
        DiffParams,
    ),
    responses(
        (status = 200, body = TraceDiffBody),
        (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody),
    ),
    security(("api_key" = ["read"]))
)]
pub async fn diff_traces(
    State(state): State<AppState>,
    Path((a, b)): Path<(String, String)>,
    Query(params): Query<DiffParams>,
) -> Result<Json<TraceDiffBody>, ApiError> {
    let lang: Lang = params
        .lang
        .as_deref()
        .unwrap_or("en")
        .parse()
        .map_err(|e: String| {
            ApiError::bad_request("bad_query", format!("`lang`: {e}"))
                .hint("use lang=en or lang=zh")
        })?;
    let ta = load(&state, &a).await?;
    let tb = load(&state, &b).await?;
    let diff = TraceDiff::between(
        Side {
            record: &ta.record,
            spans: &ta.spans,
        },
        Side {
            record: &tb.record,
            spans: &tb.spans,
        },
    );
    Ok(Json(TraceDiffBody {
        explanation: diff.explain(lang),
        diff: serde_json::to_value(&diff).unwrap_or(Value::Null),
        lang: lang.to_string(),
    }))
}
