//! `GET /v1/topologies` and `GET /v1/topologies/{id}` (with its graph).

use crate::api::extract::Path;
use axum::Json;
use axum::extract::State;
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use glassbox_store::Redactor;
use glassbox_topology::secret::{mask_config, mask_text};

use crate::error::{ApiError, ErrorBody};
use crate::state::AppState;
use glassbox_app::catalog::FileProblem;
use glassbox_app::served::{Served, StreamMode};

/// One served topology, in a list.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct TopologySummary {
    pub id: String,
    pub version: String,
    pub description: Option<String>,
    /// The file it was loaded from.
    pub file: String,
    /// When this version was loaded (microseconds since the epoch).
    pub loaded_at_us: u64,
    pub node_count: usize,
    pub edge_count: usize,
    /// How `/v1/chat/completions` streams it: `live` (tokens as generated)
    /// or `buffered` (the final, guarded output in one piece).
    pub streaming: String,
    /// Usable as a model of `/v1/embeddings`.
    pub embeddings: bool,
    /// Every loaded version of this id (the one above is the promoted
    /// one); `GET /v1/topologies/{id}/versions` shows the split.
    pub versions: Vec<String>,
}

/// A topology file that is not served, or whose latest edit was rejected.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct FileProblemBody {
    pub file: String,
    /// The rendered diagnostics.
    pub message: String,
    /// The topology id still served from this file (its previous version).
    pub still_serving: Option<String>,
}

impl From<FileProblem> for FileProblemBody {
    fn from(p: FileProblem) -> Self {
        FileProblemBody {
            file: p.file.display().to_string(),
            message: p.message,
            still_serving: p.still_serving,
        }
    }
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct TopologyList {
    pub topologies: Vec<TopologySummary>,
    /// Invalid files, and files whose last edit was rejected.
    pub problems: Vec<FileProblemBody>,
}

/// A node as drawn in the graph.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct GraphNode {
    pub id: String,
    /// The node kind, e.g. `router`, `llm_inference`.
    #[serde(rename = "type")]
    pub kind: String,
    pub description: Option<String>,
    pub resource: GraphResource,
    /// The node this one falls back to.
    pub fallback: Option<String>,
    /// Only runs as another node's fallback.
    pub is_fallback: bool,
    /// Has no incoming edge: starts every request.
    pub entry: bool,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct GraphResource {
    /// `cpu` or `gpu`.
    #[serde(rename = "type")]
    pub kind: String,
    pub model: Option<String>,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct GraphEdge {
    pub from: String,
    pub to: String,
    /// A label or a CEL expression; absent: always taken.
    pub condition: Option<String>,
    pub description: Option<String>,
    /// Set on a loop's back edge: the most times the loop's body runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_iterations: Option<u32>,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Graph {
    pub nodes: Vec<GraphNode>,
    pub edges: Vec<GraphEdge>,
}

/// One topology in full.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct TopologyDetail {
    #[serde(flatten)]
    pub summary: TopologySummary,
    pub currency: String,
    pub deadline_ms: Option<u64>,
    pub graph: Graph,
    /// The topology as written (defaults not applied), with secret-bearing
    /// config values masked (header values, keys, tokens, URL userinfo).
    #[schema(value_type = Object)]
    pub spec: Value,
    /// Why the latest edit of its file was rejected (the version above is
    /// still the one served).
    pub reload_error: Option<String>,
}

/// The spec as it may be shown to a read-scope key: every node's `config`
/// and every `metadata` (topology and node level) through `mask_config`
/// (secret-named keys in any case style), URL userinfo and secret query
/// parameters masked in every other string, then the store's one
/// redaction pass over every string (an AWS key pasted in a description,
/// a DSN under an innocent key).
fn masked_spec(spec: &glassbox_topology::TopologySpec, redactor: &Redactor) -> Value {
    let mut v = serde_json::to_value(spec).unwrap_or(Value::Null);
    mask_nodes(&mut v);
    redactor.redact_value(&mut v);
    v
}

fn mask_nodes(v: &mut Value) {
    match v {
        Value::Object(map) => {
            for (k, child) in map.iter_mut() {
                if k == "config" || k == "metadata" {
                    *child = mask_config(child);
                } else {
                    mask_nodes(child);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(mask_nodes),
        Value::String(s) => {
            if let std::borrow::Cow::Owned(m) = mask_text(s) {
                *s = m;
            }
        }
        _ => {}
    }
}

/// Free text written by a topology's author, as shown to a read-scope key.
fn shown(text: &str, redactor: &Redactor) -> String {
    redactor.redact(&mask_text(text)).into_owned()
}

fn summary(s: &Served, versions: Vec<String>, redactor: &Redactor) -> TopologySummary {
    let t = &s.topology;
    TopologySummary {
        id: t.id.clone(),
        version: t.version.clone(),
        description: t.description.as_deref().map(|d| shown(d, redactor)),
        file: s.file.display().to_string(),
        loaded_at_us: s.loaded_at_us,
        node_count: t.nodes.len(),
        edge_count: t.edges.len(),
        streaming: match s.stream {
            StreamMode::Live { .. } => "live".into(),
            StreamMode::Buffered { .. } => "buffered".into(),
        },
        embeddings: s.embeds,
        versions,
    }
}

/// The loaded versions of `id` (just the served one's if it is gone).
fn versions_of(state: &AppState, s: &Served) -> Vec<String> {
    match state.catalog.lineup(&s.topology.id) {
        Some(l) => l.versions().map(|(v, _)| v.to_string()).collect(),
        None => vec![s.topology.version.clone()],
    }
}

/// Builds the graph of a served topology.
pub fn graph(s: &Served, redactor: &Redactor) -> Graph {
    let t = &s.topology;
    let entries = t.entries();
    Graph {
        nodes: t
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| GraphNode {
                id: n.id.clone(),
                kind: n.kind.clone(),
                description: n.description.as_deref().map(|d| shown(d, redactor)),
                resource: GraphResource {
                    kind: n.resource.kind.as_str().to_string(),
                    model: n.resource.model.clone(),
                },
                fallback: n.fallback.map(|f| t.node(f).id.clone()),
                is_fallback: n.is_fallback,
                entry: entries.iter().any(|e| e.0 == i),
            })
            .collect(),
        edges: t
            .edges
            .iter()
            .map(|e| GraphEdge {
                max_iterations: e.bound.as_ref().map(|b| b.max_iterations),
                from: t.node(e.from).id.clone(),
                to: t.node(e.to).id.clone(),
                condition: e.condition.as_ref().map(|c| c.as_str().to_string()),
                description: e.description.as_deref().map(|d| shown(d, redactor)),
            })
            .collect(),
    }
}

/// Served topologies and the files that could not be loaded.
#[utoipa::path(
    get,
    path = "/v1/topologies",
    tag = "topologies",
    responses(
        (status = 200, body = TopologyList),
        (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody),
    ),
    security(("api_key" = ["read"]))
)]
pub async fn list_topologies(State(state): State<AppState>) -> Json<TopologyList> {
    let redactor = state.writer.redactor();
    Json(TopologyList {
        topologies: state
            .catalog
            .lineups()
            .iter()
            .filter_map(|(_, l)| {
                let versions = l.versions().map(|(v, _)| v.to_string()).collect();
                Some(summary(l.promoted()?, versions, redactor))
            })
            .collect(),
        problems: state
            .catalog
            .problems()
            .into_iter()
            .map(|p| {
                let mut body = FileProblemBody::from(p);
                body.message = shown(&body.message, redactor);
                body
            })
            .collect(),
    })
}

/// One topology: version, source file, graph and spec.
#[utoipa::path(
    get,
    path = "/v1/topologies/{id}",
    tag = "topologies",
    params(("id" = String, Path, description = "Topology id")),
    responses(
        (status = 200, body = TopologyDetail),
        (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody),
    ),
    security(("api_key" = ["read"]))
)]
pub async fn get_topology(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<TopologyDetail>, ApiError> {
    let s = state.topology(&id)?;
    let redactor = state.writer.redactor();
    let reload_error = state
        .catalog
        .problems()
        .into_iter()
        .find(|p| p.file == s.file)
        .map(|p| shown(&p.message, redactor));
    Ok(Json(TopologyDetail {
        summary: summary(&s, versions_of(&state, &s), redactor),
        currency: s.topology.currency.clone(),
        deadline_ms: s
            .topology
            .deadline
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
        graph: graph(&s, redactor),
        spec: masked_spec(&s.topology.spec, redactor),
        reload_error,
    }))
}
