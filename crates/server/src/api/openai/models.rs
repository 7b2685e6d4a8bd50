//! `GET /v1/models`: the served topologies, as models.

use axum::Json;
use axum::extract::State;
use serde::Serialize;
use utoipa::ToSchema;

use crate::error::ErrorBody;
use crate::state::AppState;

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Model {
    /// The topology id.
    pub id: String,
    /// `model`.
    pub object: String,
    /// When its current version was loaded (Unix seconds).
    pub created: u64,
    pub owned_by: String,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ModelList {
    pub object: String,
    pub data: Vec<Model>,
}

/// The served topologies, as models.
#[utoipa::path(
    get,
    path = "/v1/models",
    tag = "openai",
    responses(
        (status = 200, body = ModelList),
        (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody),
    ),
    security(("api_key" = ["run"]), ("api_key" = ["read"]))
)]
pub async fn models(State(state): State<AppState>) -> Json<ModelList> {
    Json(ModelList {
        object: "list".into(),
        data: state
            .catalog
            .list()
            .iter()
            .map(|s| Model {
                id: s.topology.id.clone(),
                object: "model".into(),
                created: s.loaded_at_us / 1_000_000,
                owned_by: "glassbox".into(),
            })
            .collect(),
    })
}
