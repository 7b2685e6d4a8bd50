//! `GET /v1/alerts`: the drift alerts firing now, with their evidence, and
//! the GPU alerts firing (`gpu_alerts`).
//!
//! Answers the server's latest periodic evaluation (see [`crate::alerts`]);
//! `fresh=true`, or no evaluation yet, evaluates first. GPU alerts come from
//! the GPU monitor's latest readings ([`crate::gpu_monitor`]).

use axum::Json;
use axum::extract::State;
use serde::Deserialize;
use serde_json::Value;
use utoipa::IntoParams;

use crate::api::extract::Query;
use crate::error::{ApiError, ErrorBody};
use crate::state::AppState;

#[derive(Debug, Clone, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct AlertParams {
    /// Only the alerts of this topology.
    pub topology: Option<String>,
    /// Evaluate now instead of answering the latest periodic evaluation.
    pub fresh: Option<bool>,
}

/// Drift alerts firing: route-ratio shifts, per-node P99 regressions and
/// cost-per-request jumps of the last window against a baseline; and GPU
/// alerts firing (temperature, memory, sustained utilisation).
#[utoipa::path(
    get,
    path = "/v1/alerts",
    tag = "reports",
    params(AlertParams),
    responses(
        (status = 200, description = "`{evaluated_at_us, baseline_from_us, window_from_us, until_us, thresholds, baseline_requests, current_requests, alerts: [{kind, topology, node, baseline: {value, samples}, current: {value, samples}, p_value, level, test, message}], gpu_alerts: [{kind, worker, gpu, name, value, threshold, since_us, message}]}`", body = Object),
        (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody),
    ),
    security(("api_key" = ["read"]))
)]
pub async fn list_alerts(
    State(state): State<AppState>,
    Query(params): Query<AlertParams>,
) -> Result<Json<Value>, ApiError> {
    let ev = match state.alerts.latest() {
        Some(ev) if !params.fresh.unwrap_or(false) => ev,
        _ => state.alerts.evaluate_now().await?,
    };
    let mut v = serde_json::to_value(&*ev)
        .map_err(|e| ApiError::internal("encode_failed", e.to_string()))?;
    if let Some(t) = params.topology.filter(|t| !t.is_empty())
        && let Some(alerts) = v.get_mut("alerts").and_then(Value::as_array_mut)
    {
        alerts.retain(|a| a["topology"] == t.as_str());
    }
    if let Some(obj) = v.as_object_mut() {
        let gpu = serde_json::to_value(state.gpus.firing())
            .map_err(|e| ApiError::internal("encode_failed", e.to_string()))?;
        obj.insert("gpu_alerts".into(), gpu);
    }
    Ok(Json(v))
}
