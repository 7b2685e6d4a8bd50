//! Request records: the whole story of one request.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::fact::Explanation;
use crate::id::RequestId;
use crate::receipt::Receipt;

/// How a request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RequestStatus {
    Ok,
    Failed,
    Cancelled,
}

impl RequestStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            RequestStatus::Ok => "ok",
            RequestStatus::Failed => "failed",
            RequestStatus::Cancelled => "cancelled",
        }
    }
}

/// An error as recorded: stable code, message, and where.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorRecord {
    pub code: String,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<Arc<str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attempt: Option<u32>,
    /// What a remote server answered (status, an excerpt of its body), for
    /// admins reading the trace; never part of a run's result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// What happened to one node in this request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NodeStatus {
    Succeeded,
    /// Failed, and its fallback's output stood in for it.
    FellBack,
    /// Every incoming edge was dead (dead-path elimination).
    Skipped,
    Failed,
    /// Running when the request was cancelled or failed elsewhere.
    Cancelled,
    /// Never reached (the request ended first), or only a fallback.
    NotRun,
}

impl NodeStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            NodeStatus::Succeeded => "succeeded",
            NodeStatus::FellBack => "fell_back",
            NodeStatus::Skipped => "skipped",
            NodeStatus::Failed => "failed",
            NodeStatus::Cancelled => "cancelled",
            NodeStatus::NotRun => "not_run",
        }
    }
}

/// One node of the generated path.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PathNode {
    pub id: Arc<str>,
    #[serde(rename = "type")]
    pub kind: Arc<str>,
    pub status: NodeStatus,
    /// Offsets from the request's start, in microseconds (absent when it
    /// never ran).
    pub start_us: Option<u64>,
    pub end_us: Option<u64>,
    pub duration_us: Option<u64>,
    /// Attempts of this node itself (its fallback's are counted there).
    pub attempts: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// The fallback that replaced it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fallback: Option<Arc<str>>,
    /// For a fallback node: the node it replaced.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replaces: Option<Arc<str>>,
}

/// One edge of the topology, and whether this request took it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PathEdge {
    pub from: Arc<str>,
    pub to: Arc<str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub condition: Option<Arc<str>>,
    pub taken: bool,
    /// Why, in words: the label emitted and by which rule, or the condition
    /// with the values it read, or `no condition`, `source skipped`,
    /// `source failed`. (Fixed reasons are static strings: no allocation.)
    pub why: Cow<'static, str>,
}

/// The path generated for one request.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct PathRecord {
    pub nodes: Vec<PathNode>,
    pub edges: Vec<PathEdge>,
    /// The topology's bounded loops that ran: each iteration, and why the
    /// loop stopped. A node in a loop's body appears once in `nodes`
    /// (times from its first iteration's start to its last's end,
    /// `attempts` over all iterations); its spans carry the iteration.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub loops: Vec<crate::looped::LoopRun>,
}

impl PathRecord {
    /// Ids of the nodes that ran (succeeded, fell back or failed), in order.
    pub fn taken_nodes(&self) -> impl Iterator<Item = &str> {
        self.nodes
            .iter()
            .filter(|n| {
                matches!(
                    n.status,
                    NodeStatus::Succeeded | NodeStatus::FellBack | NodeStatus::Failed
                )
            })
            .map(|n| &*n.id)
    }

    pub fn node(&self, id: &str) -> Option<&PathNode> {
        self.nodes.iter().find(|n| &*n.id == id)
    }

    pub fn edge(&self, from: &str, to: &str) -> Option<&PathEdge> {
        self.edges.iter().find(|e| &*e.from == from && &*e.to == to)
    }

    /// The loop whose body holds `node`, when it ran in one.
    pub fn loop_of(&self, node: &str) -> Option<&crate::looped::LoopRun> {
        self.loops
            .iter()
            .find(|l| l.body.iter().any(|b| &**b == node))
    }

    /// Whether `from → to` is a loop's back edge.
    pub fn is_back_edge(&self, from: &str, to: &str) -> bool {
        self.loops.iter().any(|l| &*l.from == from && &*l.to == to)
    }
}

/// A model a node used, for grouping reports by model version.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelUse {
    pub node: Arc<str>,
    pub model: String,
    pub version: Option<String>,
}

/// One request, start to finish.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestRecord {
    pub request_id: RequestId,
    pub topology_id: Arc<str>,
    pub version: Arc<str>,
    /// Microseconds since the Unix epoch.
    pub started_at_us: u64,
    pub ended_at_us: u64,
    pub duration_us: u64,
    pub status: RequestStatus,
    /// True when a fallback replaced a failed node (the degraded path).
    pub degraded: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorRecord>,
    pub path: PathRecord,
    /// The label each node emitted, by node id.
    pub labels: BTreeMap<Arc<str>, String>,
    pub models: Vec<ModelUse>,
    pub input_summary: String,
    /// Characters of the request's whole input (the summary is cut short),
    /// for grouping by input length. Absent in records stored before it
    /// was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_chars: Option<u64>,
    /// Tokens of the input, when the first node to read it counted them
    /// (an embedding, a semantic router, a model reading it directly).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
    pub output_summary: String,
    pub receipt: Receipt,
    pub explanation: Explanation,
    pub worker: Arc<str>,
    /// Number of spans (attempts) recorded for this request.
    pub span_count: u32,
}
