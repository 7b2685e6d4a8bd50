//! `GET /v1/reports/compare`: two versions of one topology side by side
//! (as `glassbox report --compare`): cost, latency P50/P95/P99 per request
//! and per node, path mix, guard failures and error rates, each with its
//! significance test ([`glassbox_store::compare`]).

use axum::Json;
use axum::extract::State;
use glassbox_store::compare::{self, CompareOptions, Comparison};
use serde::Deserialize;
use serde_json::Value;
use utoipa::IntoParams;

use crate::api::extract::Query;
use crate::api::traces::FilterParams;
use crate::error::{ApiError, ErrorBody};
use crate::state::AppState;

#[derive(Debug, Clone, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct CompareParams {
    /// The topology id.
    pub topology: Option<String>,
    /// The baseline version.
    pub a: Option<String>,
    /// The version compared against it.
    pub b: Option<String>,
    /// Family-wise significance level (default 0.05), between 0 and 0.5.
    pub alpha: Option<f64>,
    /// Started at or after (as for `/v1/reports`).
    pub since: Option<String>,
    /// Started before.
    pub until: Option<String>,
}

fn required(v: Option<String>, name: &str) -> Result<String, ApiError> {
    v.filter(|v| !v.is_empty()).ok_or_else(|| {
        ApiError::bad_request("bad_query", format!("`{name}` is required"))
            .hint("e.g. /v1/reports/compare?topology=rag-chat&a=1.0.0&b=1.1.0")
    })
}

/// Compares two versions of a topology; differences larger than noise are
/// marked `significant`.
#[utoipa::path(
    get,
    path = "/v1/reports/compare",
    tag = "reports",
    params(CompareParams),
    responses(
        (status = 200, description = "`{topology_id, a, b, alpha, method, requests, latency_ms, cost, rates, paths, path_test, nodes}`; each compared measure has `a`, `b` and `test: {test, statistic, p_value, significant}` (null when a side has too few values)", body = Object),
        (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody),
    ),
    security(("api_key" = ["read"]))
)]
pub async fn compare_versions(
    State(state): State<AppState>,
    Query(params): Query<CompareParams>,
) -> Result<Json<Value>, ApiError> {
    let topology = required(params.topology, "topology")?;
    let a = required(params.a, "a")?;
    let b = required(params.b, "b")?;
    let alpha = params.alpha.unwrap_or(compare::DEFAULT_ALPHA);
    if !(alpha > 0.0 && alpha <= 0.5) {
        return Err(ApiError::bad_request(
            "bad_query",
            format!("`alpha={alpha}` is not a significance level"),
        )
        .hint("use a value above 0 and at most 0.5, e.g. 0.05"));
    }
    let filter = FilterParams {
        since: params.since,
        until: params.until,
        ..FilterParams::default()
    }
    .filter(None)?;
    let registry = state.catalog.registry();
    let guard_kinds = registry
        .names()
        .filter(|k| registry.guards_output(k))
        .map(str::to_string)
        .collect();
    let options = CompareOptions {
        topology,
        a,
        b,
        filter,
        guard_kinds,
        alpha,
    };
    let c: Comparison = state
        .with_store(move |store| compare::compare(store, &options).map_err(ApiError::from))
        .await?;
    serde_json::to_value(&c)
        .map(Json)
        .map_err(|e| ApiError::internal("encode_failed", e.to_string()))
}
