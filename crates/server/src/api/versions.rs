//! Topology versions served side by side: `GET /v1/topologies/{id}/versions`,
//! `PUT /v1/topologies/{id}/split`, `POST .../versions/{version}/promote` and
//! `POST /v1/topologies/{id}/rollback`. Changes take effect for the next
//! request, with no restart; requests already running finish on the
//! version they started with. The rules are in [`glassbox_app::versions`].

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::api::body::JsonBody;
use crate::api::extract::Path;
use crate::error::{ApiError, ErrorBody};
use crate::state::AppState;
use glassbox_app::versions::{Lineup, VersionError};

/// One loaded version.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct VersionBody {
    pub version: String,
    /// The file it was loaded from.
    pub file: String,
    /// When it was loaded (microseconds since the epoch).
    pub loaded_at_us: u64,
    /// Takes all traffic when no split is set.
    pub promoted: bool,
    /// Its share of traffic now, in percent.
    pub percent: u32,
}

/// One version's share of the split.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ShareBody {
    pub version: String,
    pub percent: u32,
}

/// Every loaded version of a topology and how traffic is shared.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Versions {
    pub id: String,
    pub promoted: String,
    /// The split in force, in bucket order (canaries first); empty: all
    /// traffic on the promoted version.
    pub split: Vec<ShareBody>,
    /// The version `rollback` would return to.
    pub rollback_to: Option<String>,
    pub versions: Vec<VersionBody>,
}

impl Versions {
    pub fn of(id: &str, l: &Lineup) -> Versions {
        Versions {
            id: id.to_string(),
            promoted: l.promoted_version().to_string(),
            split: l
                .split()
                .iter()
                .map(|(v, p)| ShareBody {
                    version: v.clone(),
                    percent: *p,
                })
                .collect(),
            rollback_to: l.rollback_target().map(str::to_string),
            versions: l
                .versions()
                .map(|(v, s)| VersionBody {
                    version: v.to_string(),
                    file: s.file.display().to_string(),
                    loaded_at_us: s.loaded_at_us,
                    promoted: v == l.promoted_version(),
                    percent: l.percent(v),
                })
                .collect(),
        }
    }
}

/// A traffic split: whole percentages per loaded version, adding up to 100.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SplitRequest {
    /// Version → percent, e.g. `{"1.0.0": 90, "1.1.0": 10}`. Versions left
    /// out get no traffic.
    pub weights: BTreeMap<String, u32>,
}

impl From<VersionError> for ApiError {
    fn from(e: VersionError) -> ApiError {
        let status = match e {
            VersionError::UnknownTopology { .. } | VersionError::UnknownVersion { .. } => {
                StatusCode::NOT_FOUND
            }
            VersionError::SplitTotal { .. } | VersionError::SplitShare { .. } => {
                StatusCode::BAD_REQUEST
            }
            VersionError::NothingToRollBack { .. } => StatusCode::CONFLICT,
        };
        ApiError::new(status, e.code(), e.to_string()).hint(e.hint())
    }
}

fn change(
    state: &AppState,
    id: &str,
    what: &str,
    f: impl FnOnce(&mut Lineup) -> Result<(), VersionError>,
) -> Result<Json<Versions>, ApiError> {
    let ((), lineup) = state.catalog.change_lineup(id, f)?;
    let view = Versions::of(id, &lineup);
    let split: Vec<String> = view
        .split
        .iter()
        .map(|s| format!("{} {}%", s.version, s.percent))
        .collect();
    glassbox_app::console::serve_line(format_args!(
        "{what} `{id}`: promoted {}{}",
        view.promoted,
        if split.is_empty() {
            String::new()
        } else {
            format!(", split {}", split.join(" / "))
        }
    ));
    Ok(Json(view))
}

/// The loaded versions of a topology, the promoted one and the split.
#[utoipa::path(
    get,
    path = "/v1/topologies/{id}/versions",
    tag = "topologies",
    params(("id" = String, Path, description = "Topology id")),
    responses(
        (status = 200, body = Versions),
        (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody),
    ),
    security(("api_key" = ["read"]))
)]
pub async fn list_versions(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Versions>, ApiError> {
    let lineup = state
        .catalog
        .lineup(&id)
        .ok_or_else(|| state.service.not_served(&id))?;
    Ok(Json(Versions::of(&id, &lineup)))
}

/// Sets the traffic split. Requests are bucketed by their key
/// (`X-Glassbox-Key`, the OpenAI `user` field, or `?key=` on a run): one
/// key stays on one version while the split stands.
#[utoipa::path(
    put,
    path = "/v1/topologies/{id}/split",
    tag = "topologies",
    params(("id" = String, Path, description = "Topology id")),
    request_body = SplitRequest,
    responses(
        (status = 200, body = Versions),
        (status = 400, description = "The shares do not add up to 100", body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody),
        (status = 404, description = "No such topology or version", body = ErrorBody),
    ),
    security(("api_key" = ["admin"]))
)]
pub async fn set_split(
    State(state): State<AppState>,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<SplitRequest>,
) -> Result<Json<Versions>, ApiError> {
    change(&state, &id, "split", |l| l.set_split(&id, &body.weights))
}

/// Promotes a version: it takes all traffic, and the split is cleared.
#[utoipa::path(
    post,
    path = "/v1/topologies/{id}/versions/{version}/promote",
    tag = "topologies",
    params(
        ("id" = String, Path, description = "Topology id"),
        ("version" = String, Path, description = "A loaded version"),
    ),
    responses(
        (status = 200, body = Versions),
        (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody),
        (status = 404, description = "No such topology or version", body = ErrorBody),
    ),
    security(("api_key" = ["admin"]))
)]
pub async fn promote(
    State(state): State<AppState>,
    Path((id, version)): Path<(String, String)>,
) -> Result<Json<Versions>, ApiError> {
    change(&state, &id, "promoted", |l| l.promote(&id, &version))
}

/// Returns all traffic to the version promoted before the current one.
#[utoipa::path(
    post,
    path = "/v1/topologies/{id}/rollback",
    tag = "topologies",
    params(("id" = String, Path, description = "Topology id")),
    responses(
        (status = 200, body = Versions),
        (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 409, description = "No earlier promoted version is loaded", body = ErrorBody),
    ),
    security(("api_key" = ["admin"]))
)]
pub async fn rollback(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Versions>, ApiError> {
    change(&state, &id, "rolled back", |l| l.rollback(&id).map(drop))
}
