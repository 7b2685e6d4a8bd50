//! `/healthz`, `/readyz`, `/metrics` (public) and `/v1/admin/reload`.

use axum::Json;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

use crate::error::{ApiError, ErrorBody};
use crate::state::AppState;
use glassbox_app::catalog::Change;

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Health {
    /// `ok`, or `starting` / `draining` for `/readyz`.
    pub status: String,
    pub topologies: usize,
}

/// The process is up.
#[utoipa::path(get, path = "/healthz", tag = "system", responses((status = 200, body = Health)))]
pub async fn healthz(State(state): State<AppState>) -> Json<Health> {
    Json(Health {
        status: "ok".into(),
        topologies: state.catalog.ids().len(),
    })
}

/// Ready for traffic: topologies scanned, store open, not shutting down.
#[utoipa::path(
    get,
    path = "/readyz",
    tag = "system",
    responses((status = 200, body = Health), (status = 503, body = Health))
)]
pub async fn readyz(State(state): State<AppState>) -> Response {
    let ready = state.is_ready();
    let body = Health {
        status: if ready { "ok" } else { "unavailable" }.into(),
        topologies: state.catalog.ids().len(),
    };
    let code = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (code, Json(body)).into_response()
}

/// Prometheus metrics (OpenMetrics text), series prefixed `glassbox_`.
#[utoipa::path(
    get,
    path = "/metrics",
    tag = "system",
    responses((status = 200, description = "OpenMetrics text", content_type = "application/openmetrics-text", body = String))
)]
pub async fn metrics(State(state): State<AppState>) -> Response {
    let text = state.metrics.encode(&state.writer);
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        text,
    )
        .into_response()
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ReloadReport {
    /// One line per change: `loaded id@version from file`, `unloaded id`,
    /// `rejected file: why`.
    pub changes: Vec<String>,
}

/// Describes a catalog change in one line (also used for the log).
pub fn describe(change: &Change) -> String {
    match change {
        Change::Loaded {
            id,
            version,
            file,
            replaced,
            candidate,
        } => {
            let line = match replaced {
                Some(old) => format!(
                    "reloaded `{id}` {version} from `{}` (was {old})",
                    file.display()
                ),
                None => format!("loaded `{id}` {version} from `{}`", file.display()),
            };
            if *candidate {
                format!(
                    "{line}; another version is promoted, so it takes no traffic until `glassbox versions split` or `promote`"
                )
            } else {
                line
            }
        }
        Change::Unloaded { id, version, file } => {
            format!(
                "unloaded `{id}` {version} (`{}` was removed)",
                file.display()
            )
        }
        Change::Rejected(p) => match &p.still_serving {
            Some(id) => format!(
                "rejected an edit of `{}`; `{id}` keeps its previous version live:\n{}",
                p.file.display(),
                p.message
            ),
            None => format!("skipped `{}`:\n{}", p.file.display(), p.message),
        },
    }
}

/// Rescans the topologies directory now (it is also polled every second).
#[utoipa::path(
    post,
    path = "/v1/admin/reload",
    tag = "system",
    responses(
        (status = 200, body = ReloadReport),
        (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody),
    ),
    security(("api_key" = ["admin"]))
)]
pub async fn reload(State(state): State<AppState>) -> Result<Json<ReloadReport>, ApiError> {
    let catalog = state.catalog.clone();
    let changes = tokio::task::spawn_blocking(move || catalog.rescan())
        .await
        .map_err(|e| ApiError::internal("reload_failed", e.to_string()))?
        .map_err(|e| ApiError::internal("reload_failed", e.to_string()))?;
    let lines: Vec<String> = changes.iter().map(describe).collect();
    for l in &lines {
        glassbox_app::console::serve_line(l);
    }
    Ok(Json(ReloadReport { changes: lines }))
}
