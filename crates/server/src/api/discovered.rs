//! Discovered topologies: pipelines Glassbox does not run, known only from
//! their stored requests (ingested over OTLP, `POST /v1/traces`). The
//! dashboard lists them beside the served topologies and draws each one
//! from the paths its requests walked (`glassbox_ingest::discover`, the
//! same graph `glassbox graph --discovered` draws).

use std::collections::BTreeMap;
use std::str::FromStr;

use axum::Json;
use axum::extract::State;
use glassbox_ingest::discover::{Discovered, discover};
use glassbox_store::report::{self, GroupBy, ReportOptions};
use glassbox_store::{ListQuery, Sort};
use glassbox_trace::RequestId;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::api::extract::Query;
use crate::api::traces::{FilterParams, MAX_LIMIT};
use crate::error::{ApiError, ErrorBody};
use crate::state::AppState;

/// One topology seen in the store that no served file declares.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct DiscoveredSummary {
    pub topology_id: String,
    /// Versions seen (`service.version`), sorted.
    pub versions: Vec<String>,
    pub requests: u64,
    /// Cost per request, P50.
    pub cost_p50: f64,
    /// Latency per request, P95, in milliseconds.
    pub latency_p95_ms: f64,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct DiscoveredList {
    pub topologies: Vec<DiscoveredSummary>,
}

/// Topologies in the store (in the filter's window) that the server does
/// not serve: those discovered from ingested traces.
#[utoipa::path(
    get,
    path = "/v1/discovered",
    tag = "topologies",
    params(FilterParams),
    responses(
        (status = 200, body = DiscoveredList),
        (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody),
    ),
    security(("api_key" = ["read"]))
)]
pub async fn list_discovered(
    State(state): State<AppState>,
    Query(filter): Query<FilterParams>,
) -> Result<Json<DiscoveredList>, ApiError> {
    let options = ReportOptions {
        filter: filter.filter(None)?,
        group_by: GroupBy::Version,
        nodes: false,
        input_buckets: false,
    };
    let rep = state
        .with_store(move |store| report::build(store, &options).map_err(ApiError::from))
        .await?;
    let served = state.catalog.lineups();
    let mut by_id: BTreeMap<String, DiscoveredSummary> = BTreeMap::new();
    for g in rep.groups {
        if served.iter().any(|(id, _)| **id == *g.topology_id) {
            continue;
        }
        let s = by_id
            .entry(g.topology_id.clone())
            .or_insert_with(|| DiscoveredSummary {
                topology_id: g.topology_id.clone(),
                versions: Vec::new(),
                requests: 0,
                cost_p50: g.cost.p50,
                latency_p95_ms: g.latency_ms.p95,
            });
        // Percentiles of the busiest version stand for the topology.
        if g.requests > s.requests {
            s.cost_p50 = g.cost.p50;
            s.latency_p95_ms = g.latency_ms.p95;
        }
        s.requests += g.requests;
        s.versions.push(g.group);
    }
    Ok(Json(DiscoveredList {
        topologies: by_id.into_values().collect(),
    }))
}

#[derive(Debug, Clone, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct GraphParams {
    /// The topology id (`{service.name}/{root span name}` for ingested ones).
    pub topology: String,
    /// Only this version.
    pub version: Option<String>,
    /// Most recent requests read (default 200, at most 1000).
    pub limit: Option<u32>,
}

/// The graph a topology's stored requests walked: nodes and edges seen,
/// with how many requests ran each.
#[utoipa::path(
    get,
    path = "/v1/discovered/graph",
    tag = "topologies",
    params(GraphParams),
    responses(
        (status = 200, description = "`{topology_id, versions, requests, nodes: [{id, type, requests, spans, models}], edges: [{from, to, why, requests}]}`", body = Object),
        (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody),
    ),
    security(("api_key" = ["read"]))
)]
pub async fn discovered_graph(
    State(state): State<AppState>,
    Query(params): Query<GraphParams>,
) -> Result<Json<Discovered>, ApiError> {
    let id = params.topology.clone();
    let filter = FilterParams {
        topology: Some(id.clone()),
        version: params.version.clone(),
        ..FilterParams::default()
    }
    .filter(None)?;
    let limit = params.limit.unwrap_or(200).clamp(1, MAX_LIMIT);
    let found = state
        .with_store(move |store| {
            let list = store
                .list(&ListQuery {
                    filter,
                    sort: Sort::Recent,
                    limit,
                })
                .map_err(ApiError::from)?;
            let mut records = Vec::with_capacity(list.len());
            for s in &list {
                let Ok(rid) = RequestId::from_str(&s.request_id) else {
                    continue;
                };
                if let Some(t) = store.get(rid).map_err(ApiError::from)? {
                    records.push(t.record);
                }
            }
            Ok(discover(&id, &records))
        })
        .await?;
    if found.requests == 0 {
        return Err(ApiError::not_found(
            "topology_not_found",
            format!("no stored requests of topology `{}`", params.topology),
        )
        .hint("`GET /v1/discovered` lists the topologies seen in the store"));
    }
    Ok(Json(found))
}
