//! `GET /v1/reports/summary`: the trace store's report (as `glassbox
//! report`): cost and latency P50/P95/P99 per topology and group (day, week,
//! version, model, or time buckets from a minute to a week), node shares,
//! path mix and failure rates.

use crate::api::extract::{Path, Query};
use axum::Json;
use axum::extract::State;
use glassbox_store::report::{self, GroupBy, ReportOptions};
use serde::Deserialize;
use serde_json::Value;
use utoipa::IntoParams;

use crate::api::traces::FilterParams;
use crate::error::{ApiError, ErrorBody};
use crate::state::AppState;

/// Report names `GET /v1/reports/{name}` knows.
pub const REPORTS: &[&str] = &["summary"];

#[derive(Debug, Clone, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ReportParams {
    /// `all` (default: one group per topology), `day`, `week`, `version`,
    /// `model`, or a time bucket: `1m`, `5m`, `15m`, `1h`, `6h`, `1d`, `1w`
    /// (groups named by their start in UTC, e.g. `2026-12-01T19:25:00Z`;
    /// weeks start on Monday).
    pub group_by: Option<String>,
    /// Per-node latency and cost shares (default true; false skips reading spans).
    pub nodes: Option<bool>,
    /// Latency by input-length bucket (default false).
    pub by_input_length: Option<bool>,
}

fn group_by(s: Option<&str>) -> Result<GroupBy, ApiError> {
    Ok(match s.unwrap_or("all") {
        "all" => GroupBy::All,
        "day" => GroupBy::Day,
        "week" => GroupBy::Week,
        "version" => GroupBy::Version,
        "model" => GroupBy::Model,
        other => match report::interval(other) {
            Some(secs) => GroupBy::Every(secs),
            None => {
                let buckets: Vec<&str> = report::INTERVALS.iter().map(|(n, _)| *n).collect();
                return Err(ApiError::bad_request(
                    "bad_query",
                    format!("`group_by={other}` is not a grouping"),
                )
                .hint(format!(
                    "use all, day, week, version, model, or a time bucket: {}",
                    buckets.join(", ")
                )));
            }
        },
    })
}

async fn build(
    state: AppState,
    filter: FilterParams,
    params: ReportParams,
) -> Result<Json<Value>, ApiError> {
    let options = ReportOptions {
        filter: filter.filter(None)?,
        group_by: group_by(params.group_by.as_deref())?,
        nodes: params.nodes.unwrap_or(true),
        input_buckets: params.by_input_length.unwrap_or(false),
    };
    let rep = state
        .with_store(move |store| report::build(store, &options).map_err(ApiError::from))
        .await?;
    serde_json::to_value(&rep)
        .map(Json)
        .map_err(|e| ApiError::internal("encode_failed", e.to_string()))
}

/// A report over stored requests. `name` is `summary`.
#[utoipa::path(
    get,
    path = "/v1/reports/{name}",
    tag = "reports",
    params(("name" = String, Path, description = "Report name: `summary`"), FilterParams, ReportParams),
    responses(
        (status = 200, description = "`{group_by, groups: [{topology_id, group, requests, cost: {mean,p50,p95,p99}, cost_total, latency_ms: {mean,p50,p95,p99}, error_rate, timeout_rate, fallback_rate, paths, top_cost_nodes, nodes, input_buckets, critical_path: [{node, requests, rate, latency_share, added_ms_mean}], node_input_buckets: [{node, bucket, spans, latency_ms}]}]}`", body = Object),
        (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody),
    ),
    security(("api_key" = ["read"]))
)]
pub async fn get_report(
    State(state): State<AppState>,
    Path(name): Path<String>,
    Query(filter): Query<FilterParams>,
    Query(params): Query<ReportParams>,
) -> Result<Json<Value>, ApiError> {
    if !REPORTS.contains(&name.as_str()) {
        return Err(
            ApiError::not_found("report_not_found", format!("no report `{name}`"))
                .hint(format!("reports: {}", REPORTS.join(", "))),
        );
    }
    build(state, filter, params).await
}

/// The `summary` report (same as `/v1/reports/summary`).
#[utoipa::path(
    get,
    path = "/v1/reports",
    tag = "reports",
    params(FilterParams, ReportParams),
    responses(
        (status = 200, description = "Same as `/v1/reports/summary`", body = Object),
        (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody),
    ),
    security(("api_key" = ["read"]))
)]
pub async fn get_summary(
    State(state): State<AppState>,
    Query(filter): Query<FilterParams>,
    Query(params): Query<ReportParams>,
) -> Result<Json<Value>, ApiError> {
    build(state, filter, params).await
}
