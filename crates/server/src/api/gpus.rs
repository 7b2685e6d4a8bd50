//! `GET /v1/gpus`: every worker's GPUs as last read (utilisation, memory,
//! temperature, power) and the GPU alerts firing; see
//! [`crate::gpu_monitor`].

use axum::Json;
use axum::extract::State;

use crate::error::ErrorBody;
use crate::gpu_monitor::GpuSnapshot;
use crate::state::AppState;

/// GPU readings and alerts. On a machine without NVML (no NVIDIA driver),
/// `gpus` is empty and `unavailable` says why.
#[utoipa::path(
    get,
    path = "/v1/gpus",
    tag = "system",
    responses(
        (status = 200, description = "`{worker, unavailable, settings: {enabled, interval, temperature_celsius, memory_ratio, utilization_ratio, utilization_for}, gpus: [{worker, index, name, utilization, memory_used_bytes, memory_total_bytes, temperature_celsius, power_watts, power_limit_watts, sampled_at_us}], alerts: [{kind, worker, gpu, name, value, threshold, since_us, message}]}`; a reading a GPU lacks is null", body = Object),
        (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody),
    ),
    security(("api_key" = ["read"]))
)]
pub async fn list_gpus(State(state): State<AppState>) -> Json<GpuSnapshot> {
    Json(state.gpus.snapshot())
}
